// nc_gpu_cudnn.cu — 2-D convolutions through cuDNN, loaded at run time
// (see nc_gpu_cudnn.h for the contract).
#include <dlfcn.h>
#include <mutex>
#include <stdio.h>
#include <string.h>

#include <cudnn.h>

#include "gpu/nc_gpu_cudnn.h"
#include "gpu/nc_gpu_cudnn_graph.h"
#include "gpu/nc_gpu_internal.h"

namespace {

// ---- the library, loaded once ------------------------------------------------

// The functions of cuDNN's API that the engine calls, looked up by name in
// libcudnn.so.9 (types spelled out here: the header's declarations are only
// used for the enums and structs).
struct cudnn_api {
    size_t (*GetVersion)(void);
    const char *(*GetErrorString)(cudnnStatus_t);
    cudnnStatus_t (*Create)(cudnnHandle_t *);
    cudnnStatus_t (*Destroy)(cudnnHandle_t);
    cudnnStatus_t (*SetStream)(cudnnHandle_t, cudaStream_t);
    cudnnStatus_t (*CreateTensorDescriptor)(cudnnTensorDescriptor_t *);
    cudnnStatus_t (*SetTensor4dDescriptor)(cudnnTensorDescriptor_t, cudnnTensorFormat_t, cudnnDataType_t, int, int,
                                           int, int);
    cudnnStatus_t (*DestroyTensorDescriptor)(cudnnTensorDescriptor_t);
    cudnnStatus_t (*CreateFilterDescriptor)(cudnnFilterDescriptor_t *);
    cudnnStatus_t (*SetFilter4dDescriptor)(cudnnFilterDescriptor_t, cudnnDataType_t, cudnnTensorFormat_t, int, int,
                                           int, int);
    cudnnStatus_t (*DestroyFilterDescriptor)(cudnnFilterDescriptor_t);
    cudnnStatus_t (*CreateConvolutionDescriptor)(cudnnConvolutionDescriptor_t *);
    cudnnStatus_t (*SetConvolution2dDescriptor)(cudnnConvolutionDescriptor_t, int, int, int, int, int, int,
                                                cudnnConvolutionMode_t, cudnnDataType_t);
    cudnnStatus_t (*SetConvolutionMathType)(cudnnConvolutionDescriptor_t, cudnnMathType_t);
    cudnnStatus_t (*DestroyConvolutionDescriptor)(cudnnConvolutionDescriptor_t);
    cudnnStatus_t (*GetConvolution2dForwardOutputDim)(cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t,
                                                      cudnnFilterDescriptor_t, int *, int *, int *, int *);
    cudnnStatus_t (*FindConvolutionForwardAlgorithmEx)(cudnnHandle_t, cudnnTensorDescriptor_t, const void *,
                                                       cudnnFilterDescriptor_t, const void *,
                                                       cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, void *,
                                                       int, int *, cudnnConvolutionFwdAlgoPerf_t *, void *, size_t);
    cudnnStatus_t (*ConvolutionForward)(cudnnHandle_t, const void *, cudnnTensorDescriptor_t, const void *,
                                        cudnnFilterDescriptor_t, const void *, cudnnConvolutionDescriptor_t,
                                        cudnnConvolutionFwdAlgo_t, void *, size_t, const void *,
                                        cudnnTensorDescriptor_t, void *);
    cudnnStatus_t (*SetConvolutionGroupCount)(cudnnConvolutionDescriptor_t, int);
    // the trainer's backward passes
    cudnnStatus_t (*FindConvolutionBackwardDataAlgorithmEx)(cudnnHandle_t, cudnnFilterDescriptor_t, const void *,
                                                            cudnnTensorDescriptor_t, const void *,
                                                            cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t,
                                                            void *, int, int *, cudnnConvolutionBwdDataAlgoPerf_t *,
                                                            void *, size_t);
    cudnnStatus_t (*ConvolutionBackwardData)(cudnnHandle_t, const void *, cudnnFilterDescriptor_t, const void *,
                                             cudnnTensorDescriptor_t, const void *, cudnnConvolutionDescriptor_t,
                                             cudnnConvolutionBwdDataAlgo_t, void *, size_t, const void *,
                                             cudnnTensorDescriptor_t, void *);
    cudnnStatus_t (*FindConvolutionBackwardFilterAlgorithmEx)(cudnnHandle_t, cudnnTensorDescriptor_t, const void *,
                                                              cudnnTensorDescriptor_t, const void *,
                                                              cudnnConvolutionDescriptor_t, cudnnFilterDescriptor_t,
                                                              void *, int, int *,
                                                              cudnnConvolutionBwdFilterAlgoPerf_t *, void *, size_t);
    cudnnStatus_t (*ConvolutionBackwardFilter)(cudnnHandle_t, const void *, cudnnTensorDescriptor_t, const void *,
                                               cudnnTensorDescriptor_t, const void *, cudnnConvolutionDescriptor_t,
                                               cudnnConvolutionBwdFilterAlgo_t, void *, size_t, const void *,
                                               cudnnFilterDescriptor_t, void *);
};

// The oldest cuDNN whose legacy convolution API and bf16 support we rely on.
const size_t kMinVersion = 90000;

cudnn_api api;
int api_ok = 0;
char api_why[400];
std::once_flag api_once;

// A function of the API: its name in the library and where its address goes.
struct entry {
    const char *name;
    void **slot;
};

// Looks up every entry of table[0..n); 0 (and api_why says which) if one is missing.
int look_up_all(void *lib, const entry *table, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        *table[k].slot = dlsym(lib, table[k].name);
        if (!*table[k].slot) {
            snprintf(api_why, sizeof api_why, "cuDNN's libcudnn.so.9 lacks %s", table[k].name);
            return 0;
        }
    }
    return 1;
}

void load_api()
{
    void *lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(api_why, sizeof api_why,
                 "cuDNN 9 was not found (%.200s): convolutions run as im2col + cuBLAS, which is slower; install "
                 "cuDNN 9 (libcudnn9) for the fast path",
                 e ? e : "dlopen libcudnn.so.9 failed");
        return;
    }
    const entry table[] = {
        {"cudnnGetVersion", (void **)&api.GetVersion},
        {"cudnnGetErrorString", (void **)&api.GetErrorString},
        {"cudnnCreate", (void **)&api.Create},
        {"cudnnDestroy", (void **)&api.Destroy},
        {"cudnnSetStream", (void **)&api.SetStream},
        {"cudnnCreateTensorDescriptor", (void **)&api.CreateTensorDescriptor},
        {"cudnnSetTensor4dDescriptor", (void **)&api.SetTensor4dDescriptor},
        {"cudnnDestroyTensorDescriptor", (void **)&api.DestroyTensorDescriptor},
        {"cudnnCreateFilterDescriptor", (void **)&api.CreateFilterDescriptor},
        {"cudnnSetFilter4dDescriptor", (void **)&api.SetFilter4dDescriptor},
        {"cudnnDestroyFilterDescriptor", (void **)&api.DestroyFilterDescriptor},
        {"cudnnCreateConvolutionDescriptor", (void **)&api.CreateConvolutionDescriptor},
        {"cudnnSetConvolution2dDescriptor", (void **)&api.SetConvolution2dDescriptor},
        {"cudnnSetConvolutionMathType", (void **)&api.SetConvolutionMathType},
        {"cudnnDestroyConvolutionDescriptor", (void **)&api.DestroyConvolutionDescriptor},
        {"cudnnGetConvolution2dForwardOutputDim", (void **)&api.GetConvolution2dForwardOutputDim},
        {"cudnnFindConvolutionForwardAlgorithmEx", (void **)&api.FindConvolutionForwardAlgorithmEx},
        {"cudnnConvolutionForward", (void **)&api.ConvolutionForward},
        {"cudnnSetConvolutionGroupCount", (void **)&api.SetConvolutionGroupCount},
        {"cudnnFindConvolutionBackwardDataAlgorithmEx", (void **)&api.FindConvolutionBackwardDataAlgorithmEx},
        {"cudnnConvolutionBackwardData", (void **)&api.ConvolutionBackwardData},
        {"cudnnFindConvolutionBackwardFilterAlgorithmEx", (void **)&api.FindConvolutionBackwardFilterAlgorithmEx},
        {"cudnnConvolutionBackwardFilter", (void **)&api.ConvolutionBackwardFilter},
    };
    const entry graph_table[] = {
        {"cudnnGetErrorString", (void **)&nc_graph_api.GetErrorString},
        {"cudnnBackendCreateDescriptor", (void **)&nc_graph_api.CreateDescriptor},
        {"cudnnBackendDestroyDescriptor", (void **)&nc_graph_api.DestroyDescriptor},
        {"cudnnBackendFinalize", (void **)&nc_graph_api.Finalize},
        {"cudnnBackendSetAttribute", (void **)&nc_graph_api.SetAttribute},
        {"cudnnBackendGetAttribute", (void **)&nc_graph_api.GetAttribute},
        {"cudnnBackendExecute", (void **)&nc_graph_api.Execute},
    };
    if (!look_up_all(lib, table, sizeof table / sizeof *table) ||
        !look_up_all(lib, graph_table, sizeof graph_table / sizeof *graph_table)) {
        dlclose(lib);
        return;
    }
    size_t version = api.GetVersion();
    if (version < kMinVersion) {
        snprintf(api_why, sizeof api_why,
                 "cuDNN %zu.%zu is older than 9.0: convolutions run as im2col + cuBLAS, which is slower; install "
                 "cuDNN 9",
                 version / 10000, version / 100 % 100);
        dlclose(lib);
        return;
    }
    snprintf(api_why, sizeof api_why, "cuDNN %zu.%zu.%zu", version / 10000, version / 100 % 100, version % 100);
    api_ok = 1; // the library stays loaded for the life of the process
}

nc_status fail_cudnn(nc_error *err, const char *where, const char *call, cudnnStatus_t s)
{
    return nc_fail(err, s == CUDNN_STATUS_ALLOC_FAILED ? NC_ERR_MEMORY : NC_ERR_DEVICE, "%s: %s failed: %s", where,
                   call, api.GetErrorString ? api.GetErrorString(s) : "cuDNN error");
}

#define NC_CUDNN_TRY(err, where, call)                                                        \
    do {                                                                                      \
        cudnnStatus_t nc_s_ = api.call;                                                       \
        if (nc_s_ != CUDNN_STATUS_SUCCESS)                                                    \
            return fail_cudnn((err), (where), #call, nc_s_);                                  \
    } while (0)

const char *algo_name(int a)
{
    switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
    }
}

const char *math_name(nc_conv_math m)
{
    switch (m) {
    case NC_CONV_BF16: return "bf16 tensor cores";
    case NC_CONV_TF32: return "tf32 tensor cores";
    case NC_CONV_TF32_EXACT: return "exact fp32: spike counts x 3 TF32 weight parts on tensor cores";
    case NC_CONV_BF16_EXACT: return "exact fp32: spike counts x 3 bf16 weight parts in two passes";
    case NC_CONV_FP32_ANY: return "fp32 FMA (FFT and Winograd allowed)";
    default: return "fp32 FMA";
    }
}

// May algorithm result p run in precision m?  Deterministic only; the fp32
// mode also keeps exact products (no FFT or Winograd, no tensor cores).
int algo_allowed(const cudnnConvolutionFwdAlgoPerf_t &p, nc_conv_math m)
{
    if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC)
        return 0;
    if (m == NC_CONV_TF32 || m == NC_CONV_BF16)
        return 1;
    if (m == NC_CONV_FP32_ANY)
        return p.mathType == CUDNN_FMA_MATH;
    int exact_algo = p.algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
                     p.algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
                     p.algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || p.algo == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
    return exact_algo && (m == NC_CONV_TF32_EXACT || p.mathType == CUDNN_FMA_MATH);
}

nc_status make_descriptors(const nc_conv_shape *s, nc_conv_math m, nc_conv_plan *plan, const char *where,
                           nc_error *err)
{
    cudnnDataType_t data = m == NC_CONV_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t c;
    NC_CUDNN_TRY(err, where, CreateTensorDescriptor(&x));
    plan->x_desc = x;
    NC_CUDNN_TRY(err, where, CreateTensorDescriptor(&y));
    plan->y_desc = y;
    NC_CUDNN_TRY(err, where, CreateFilterDescriptor(&w));
    plan->w_desc = w;
    NC_CUDNN_TRY(err, where, CreateConvolutionDescriptor(&c));
    plan->conv_desc = c;
    cudnnTensorFormat_t format = s->nchw ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC;
    int groups = s->groups > 1 ? s->groups : 1;
    NC_CUDNN_TRY(err, where, SetTensor4dDescriptor(x, format, data, (int)s->rows, s->c, s->h, s->w));
    NC_CUDNN_TRY(err, where, SetFilter4dDescriptor(w, data, format, s->cout, s->c / groups, s->kh, s->kw));
    NC_CUDNN_TRY(err, where,
                 SetConvolution2dDescriptor(c, s->ph, s->pw, s->sh, s->sw, s->dh, s->dw, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT));
    NC_CUDNN_TRY(err, where, SetConvolutionMathType(c, m == NC_CONV_FP32 || m == NC_CONV_FP32_ANY ? CUDNN_FMA_MATH
                                                                                          : CUDNN_TENSOR_OP_MATH));
    if (groups > 1)
        NC_CUDNN_TRY(err, where, SetConvolutionGroupCount(c, groups));
    int n = 0, k = 0, oh = 0, ow = 0;
    NC_CUDNN_TRY(err, where, GetConvolution2dForwardOutputDim(c, x, w, &n, &k, &oh, &ow));
    if (n != s->rows || k != s->cout || oh != s->oh || ow != s->ow)
        return nc_fail(err, NC_ERR_SHAPE, "%s: cuDNN computes a %dx%dx%d output where the net has %dx%dx%d", where, k,
                       oh, ow, s->cout, s->oh, s->ow);
    NC_CUDNN_TRY(err, where, SetTensor4dDescriptor(y, format, data, n, k, oh, ow));
    return NC_OK;
}

} // namespace

int nc_cudnn_status(char *why, size_t why_size)
{
    std::call_once(api_once, load_api);
    if (why && why_size)
        snprintf(why, why_size, "%s", api_why);
    return api_ok;
}

nc_status nc_cudnn_create(cudaStream_t stream, void **handle, nc_error *err)
{
    *handle = nullptr;
    if (!nc_cudnn_status(nullptr, 0))
        return NC_OK;
    cudnnHandle_t h = nullptr;
    NC_CUDNN_TRY(err, "gpu engine", Create(&h));
    cudnnStatus_t s = api.SetStream(h, stream);
    if (s != CUDNN_STATUS_SUCCESS) {
        api.Destroy(h);
        return fail_cudnn(err, "gpu engine", "SetStream", s);
    }
    *handle = h;
    return NC_OK;
}

void nc_cudnn_destroy(void *handle)
{
    if (handle && api_ok)
        api.Destroy((cudnnHandle_t)handle);
}

int nc_cudnn_shape_ok(const nc_conv_shape *s, char *why, size_t why_size)
{
    const int64_t int_max = 0x7fffffff;
    if (s->rows > int_max || s->rows * s->c * s->h * s->w > int_max ||
        s->rows * s->cout * s->oh * s->ow > int_max) {
        snprintf(why, why_size, "more than 2^31 values in one tensor");
        return 0;
    }
    return 1;
}

int nc_cudnn_exact_ok(const nc_conv_shape *s)
{
    return nc_cudnn_status(nullptr, 0) && nc_cudnn_graph_shape_ok(s);
}

nc_status nc_cudnn_plan(void *handle, cudaStream_t stream, const nc_conv_shape *s, nc_conv_math m, const void *x,
                        const void *w, void *y, void *ws, size_t ws_bytes, nc_conv_plan *plan, const char *where,
                        nc_error *err)
{
    memset(plan, 0, sizeof *plan);
    plan->shape = *s;
    plan->math = m;
    if (m == NC_CONV_BF16_EXACT)
        return nc_cudnn_graph_plan(handle, stream, s, x, w, y, ws, ws_bytes, plan, where, err);
    nc_status st = make_descriptors(s, m, plan, where, err);
    if (st != NC_OK) {
        nc_cudnn_plan_free(plan);
        return st;
    }
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    cudnnStatus_t cs = api.FindConvolutionForwardAlgorithmEx(
        (cudnnHandle_t)handle, (cudnnTensorDescriptor_t)plan->x_desc, x, (cudnnFilterDescriptor_t)plan->w_desc, w,
        (cudnnConvolutionDescriptor_t)plan->conv_desc, (cudnnTensorDescriptor_t)plan->y_desc, y,
        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf, ws, ws_bytes);
    if (cs != CUDNN_STATUS_SUCCESS) {
        nc_cudnn_plan_free(plan);
        return fail_cudnn(err, where, "FindConvolutionForwardAlgorithmEx", cs);
    }
    // Results come fastest first.  Each candidate runs once, with the
    // workspace it asked for, before it is kept: cuDNN 9.14 has timed an
    // algorithm that then refused to run the same call
    // (CUDNN_STATUS_BAD_PARAM, a bf16 3-channel input).
    int best = -1;
    const float one = 1.0f, zero = 0.0f;
    for (int k = 0; k < found && best < 0; k++)
        if (algo_allowed(perf[k], m) && perf[k].memory <= ws_bytes &&
            api.ConvolutionForward((cudnnHandle_t)handle, &one, (cudnnTensorDescriptor_t)plan->x_desc, x,
                                   (cudnnFilterDescriptor_t)plan->w_desc, w,
                                   (cudnnConvolutionDescriptor_t)plan->conv_desc, perf[k].algo, ws, perf[k].memory, &zero,
                                   (cudnnTensorDescriptor_t)plan->y_desc, y) == CUDNN_STATUS_SUCCESS)
            best = k;
    if (best < 0) {
        nc_cudnn_plan_free(plan);
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: cuDNN has no deterministic %s algorithm for this convolution",
                       where, math_name(m));
    }
    plan->algo = perf[best].algo;
    plan->workspace = perf[best].memory;
    plan->find_ms = perf[best].time;
    snprintf(plan->desc, sizeof plan->desc, "cuDNN %s, %s, %s, workspace %zu bytes, %.3f ms",
             algo_name(plan->algo), math_name(m), s->nchw ? "NCHW" : "NHWC", plan->workspace, plan->find_ms);
    return NC_OK;
}

void nc_cudnn_plan_free(nc_conv_plan *plan)
{
    nc_cudnn_graph_plan_free(plan);
    if (api_ok) {
        if (plan->x_desc)
            api.DestroyTensorDescriptor((cudnnTensorDescriptor_t)plan->x_desc);
        if (plan->y_desc)
            api.DestroyTensorDescriptor((cudnnTensorDescriptor_t)plan->y_desc);
        if (plan->w_desc)
            api.DestroyFilterDescriptor((cudnnFilterDescriptor_t)plan->w_desc);
        if (plan->conv_desc)
            api.DestroyConvolutionDescriptor((cudnnConvolutionDescriptor_t)plan->conv_desc);
    }
    plan->x_desc = plan->y_desc = plan->w_desc = plan->conv_desc = nullptr;
}

nc_status nc_cudnn_conv(void *handle, const nc_conv_plan *plan, const void *x, const void *w, void *y, void *ws,
                        float beta, const char *where, nc_error *err)
{
    if (plan->math == NC_CONV_BF16_EXACT)
        return nc_cudnn_graph_conv(handle, plan, x, w, y, ws, where, err);
    const float one = 1.0f;
    NC_CUDNN_TRY(err, where,
                 ConvolutionForward((cudnnHandle_t)handle, &one, (cudnnTensorDescriptor_t)plan->x_desc, x,
                                    (cudnnFilterDescriptor_t)plan->w_desc, w,
                                    (cudnnConvolutionDescriptor_t)plan->conv_desc,
                                    (cudnnConvolutionFwdAlgo_t)plan->algo, ws, plan->workspace, &beta,
                                    (cudnnTensorDescriptor_t)plan->y_desc, y));
    return NC_OK;
}

// ---- the trainer's backward passes ----------------------------------------------

namespace {

// The first result (fastest first) that is deterministic, succeeded, fits
// the workspace and, in fp32, keeps fp32 FMA arithmetic; -1 if none.
template <typename Perf> int first_allowed(const Perf *perf, int found, nc_conv_math m, size_t ws_bytes)
{
    for (int k = 0; k < found; k++)
        if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].determinism == CUDNN_DETERMINISTIC &&
            perf[k].memory <= ws_bytes &&
            (m != NC_CONV_FP32 && m != NC_CONV_FP32_ANY || perf[k].mathType == CUDNN_FMA_MATH))
            return k;
    return -1;
}

} // namespace

namespace {

// Keeps the first allowed of a backward pass's timed results in the plan
// (algo, workspace, planned flag, and a line in its description).
template <typename Perf>
nc_status keep_backward(const Perf *perf, int found, nc_conv_plan *plan, const char *gradient, int *algo,
                        size_t *workspace, int *planned, size_t ws_bytes, const char *where, nc_error *err)
{
    int k = first_allowed(perf, found, plan->math, ws_bytes);
    if (k < 0)
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: cuDNN has no deterministic %s algorithm for the %s gradient",
                       where, math_name(plan->math), gradient);
    *algo = perf[k].algo;
    *workspace = perf[k].memory;
    *planned = 1;
    size_t len = strlen(plan->desc);
    snprintf(plan->desc + len, sizeof plan->desc - len, "; %s gradient algo %d (%.3f ms)", gradient, *algo,
             perf[k].time);
    return NC_OK;
}

} // namespace

nc_status nc_cudnn_plan_backward_data(void *handle, nc_conv_plan *plan, const void *w, const void *dy, void *dx,
                                      void *ws, size_t ws_bytes, const char *where, nc_error *err)
{
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int found = 0;
    NC_CUDNN_TRY(err, where,
                 FindConvolutionBackwardDataAlgorithmEx(
                     (cudnnHandle_t)handle, (cudnnFilterDescriptor_t)plan->w_desc, w,
                     (cudnnTensorDescriptor_t)plan->y_desc, dy, (cudnnConvolutionDescriptor_t)plan->conv_desc,
                     (cudnnTensorDescriptor_t)plan->x_desc, dx, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, perf, ws,
                     ws_bytes));
    return keep_backward(perf, found, plan, "input", &plan->data_algo, &plan->data_workspace, &plan->data_planned,
                         ws_bytes, where, err);
}

nc_status nc_cudnn_plan_backward_filter(void *handle, nc_conv_plan *plan, const void *x, const void *dy,
                                        void *dw_scratch, void *ws, size_t ws_bytes, const char *where,
                                        nc_error *err)
{
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int found = 0;
    NC_CUDNN_TRY(err, where,
                 FindConvolutionBackwardFilterAlgorithmEx(
                     (cudnnHandle_t)handle, (cudnnTensorDescriptor_t)plan->x_desc, x,
                     (cudnnTensorDescriptor_t)plan->y_desc, dy, (cudnnConvolutionDescriptor_t)plan->conv_desc,
                     (cudnnFilterDescriptor_t)plan->w_desc, dw_scratch, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                     &found, perf, ws, ws_bytes));
    return keep_backward(perf, found, plan, "weight", &plan->filter_algo, &plan->filter_workspace,
                         &plan->filter_planned, ws_bytes, where, err);
}

nc_status nc_cudnn_backward_data(void *handle, const nc_conv_plan *plan, const void *w, const void *dy, void *dx,
                                 void *ws, const char *where, nc_error *err)
{
    const float one = 1.0f, zero = 0.0f;
    NC_CUDNN_TRY(err, where,
                 ConvolutionBackwardData((cudnnHandle_t)handle, &one, (cudnnFilterDescriptor_t)plan->w_desc, w,
                                         (cudnnTensorDescriptor_t)plan->y_desc, dy,
                                         (cudnnConvolutionDescriptor_t)plan->conv_desc,
                                         (cudnnConvolutionBwdDataAlgo_t)plan->data_algo, ws, plan->data_workspace,
                                         &zero, (cudnnTensorDescriptor_t)plan->x_desc, dx));
    return NC_OK;
}

nc_status nc_cudnn_backward_filter(void *handle, const nc_conv_plan *plan, const void *x, const void *dy, void *dw,
                                   void *ws, float beta, const char *where, nc_error *err)
{
    const float one = 1.0f;
    NC_CUDNN_TRY(err, where,
                 ConvolutionBackwardFilter((cudnnHandle_t)handle, &one, (cudnnTensorDescriptor_t)plan->x_desc, x,
                                           (cudnnTensorDescriptor_t)plan->y_desc, dy,
                                           (cudnnConvolutionDescriptor_t)plan->conv_desc,
                                           (cudnnConvolutionBwdFilterAlgo_t)plan->filter_algo, ws,
                                           plan->filter_workspace, &beta, (cudnnFilterDescriptor_t)plan->w_desc, dw));
    return NC_OK;
}
