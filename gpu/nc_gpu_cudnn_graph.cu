// nc_gpu_cudnn_graph.cu — the exact fp32 convolution on bf16 tensor cores,
// through cuDNN's graph (backend) API.
//
// Why the graph API: the legacy API's bf16 convolution writes a bf16 output,
// which would round away the low weight parts.  A graph of a convolution
// whose output is a virtual fp32 tensor, followed by a pointwise operation
// into the real fp32 output, is run by cuDNN's runtime-fusion engines with
// bf16 tensor cores and fp32 accumulation.
//
// The weight (θ/D-scaled) is split into three bf16 parts, hi + mid + lo =
// the fp32 value exactly, and the operand is the integer spike counts q, so
// every product q·part is exact in fp32.  Two passes:
//   y  = conv(q, hi)                      (pointwise identity)
//   y += conv([q, q], [mid, lo])          (pointwise add of y, in place)
// Why not one pass over [q, q, q] · [hi, mid, lo]: tensor cores add a block's
// products into the accumulator with truncation, so small parts summed
// into a large accumulator lose bits.  Measured on the H200 (gpu/NOTES.md):
// one pass is 5-15x further from a float64 sum than a plain fp32 loop, the
// two passes are 5-10x closer than that loop; the two passes cost about the
// same as one (the small parts' pass accumulates only small values).
//
// A plan is built for one shape: for each pass the heuristics' first few
// engine configurations are compiled (cuDNN compiles them at run time: about
// half a second each) and timed on the real buffers, and the fastest is
// kept.  Engines flagged non-deterministic, down-converting or with
// reduced-precision reduction are never used.
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <vector>

#include <cudnn.h>

#include "gpu/nc_gpu_cudnn_graph.h"
#include "gpu/nc_gpu_internal.h"

nc_cudnn_graph_api nc_graph_api;

namespace {

typedef cudnnBackendDescriptor_t bdesc;
const nc_cudnn_graph_api &api = nc_graph_api;

// Unique ids of the tensors in the variant pack (B: the y added in the
// second pass, the same buffer as Y).
enum : int64_t { UID_X = 1, UID_W = 2, UID_Y = 3, UID_V = 4, UID_B = 5 };

// How many of the heuristics' configurations are compiled and timed.
const int kTries = 3;

// Every descriptor made for one plan, destroyed together (a plan outlives
// the list once keep() takes it out).
struct desc_list {
    std::vector<bdesc> d;
    ~desc_list()
    {
        for (size_t k = d.size(); k-- > 0;)
            if (d[k])
                api.DestroyDescriptor(d[k]);
    }
    bdesc make(cudnnBackendDescriptorType_t t)
    {
        bdesc x = nullptr;
        if (api.CreateDescriptor(t, &x) != CUDNN_STATUS_SUCCESS)
            return nullptr;
        d.push_back(x);
        return x;
    }
};

struct graph_error {
    const char *what = nullptr;
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
};

#define GRAPH_TRY(ge, call)                                                                   \
    do {                                                                                      \
        cudnnStatus_t s_ = (call);                                                            \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                     \
            (ge)->what = #call;                                                               \
            (ge)->status = s_;                                                                \
            return nullptr;                                                                   \
        }                                                                                     \
    } while (0)

// A channels-last 4-d tensor [n, c, h, w] (dimensions in NCHW order, strides
// of NHWC memory), or NULL.
bdesc tensor(desc_list &dl, int64_t uid, cudnnDataType_t type, int64_t n, int64_t c, int64_t h, int64_t w, bool virt,
             graph_error *ge)
{
    bdesc d = dl.make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t dims[4] = {n, c, h, w}, strides[4] = {h * w * c, 1, w * c, c};
    int64_t align = 16;
    bool is_virtual = virt;
    GRAPH_TRY(ge, d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED);
    GRAPH_TRY(ge, api.SetAttribute(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
    GRAPH_TRY(ge, api.SetAttribute(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
    GRAPH_TRY(ge, api.SetAttribute(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
    GRAPH_TRY(ge, api.SetAttribute(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    GRAPH_TRY(ge, api.SetAttribute(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    if (virt)
        GRAPH_TRY(ge, api.SetAttribute(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual));
    GRAPH_TRY(ge, api.Finalize(d));
    return d;
}

bdesc conv_descriptor(desc_list &dl, const nc_conv_shape *s, graph_error *ge)
{
    bdesc d = dl.make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    int64_t dims = 2, pad[2] = {s->ph, s->pw}, stride[2] = {s->sh, s->sw}, dil[2] = {s->dh, s->dw};
    cudnnDataType_t acc = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    GRAPH_TRY(ge, d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED);
    GRAPH_TRY(ge, api.SetAttribute(d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims));
    GRAPH_TRY(ge, api.SetAttribute(d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &acc));
    GRAPH_TRY(ge, api.SetAttribute(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
    GRAPH_TRY(ge, api.SetAttribute(d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad));
    GRAPH_TRY(ge, api.SetAttribute(d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad));
    GRAPH_TRY(ge, api.SetAttribute(d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil));
    GRAPH_TRY(ge, api.SetAttribute(d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride));
    GRAPH_TRY(ge, api.Finalize(d));
    return d;
}

// The operation graph of one pass over `cin` input channels: v = conv(x, w)
// (virtual fp32), then y = v (add = 0) or y = v + y (add = 1).
bdesc operation_graph(desc_list &dl, void *handle, const nc_conv_shape *s, int64_t cin, int add, graph_error *ge)
{
    bdesc x = tensor(dl, UID_X, CUDNN_DATA_BFLOAT16, s->rows, cin, s->h, s->w, false, ge);
    bdesc w = x ? tensor(dl, UID_W, CUDNN_DATA_BFLOAT16, s->cout, cin, s->kh, s->kw, false, ge) : nullptr;
    bdesc v = w ? tensor(dl, UID_V, CUDNN_DATA_FLOAT, s->rows, s->cout, s->oh, s->ow, true, ge) : nullptr;
    bdesc y = v ? tensor(dl, UID_Y, CUDNN_DATA_FLOAT, s->rows, s->cout, s->oh, s->ow, false, ge) : nullptr;
    bdesc b = y && add ? tensor(dl, UID_B, CUDNN_DATA_FLOAT, s->rows, s->cout, s->oh, s->ow, false, ge) : y;
    bdesc cd = b ? conv_descriptor(dl, s, ge) : nullptr;
    if (!cd)
        return nullptr;
    bdesc conv = dl.make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    float alpha = 1.0f, beta = 0.0f;
    GRAPH_TRY(ge, conv ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED);
    GRAPH_TRY(ge, api.SetAttribute(conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    GRAPH_TRY(ge, api.SetAttribute(conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w));
    GRAPH_TRY(ge, api.SetAttribute(conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v));
    GRAPH_TRY(ge, api.SetAttribute(conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd));
    GRAPH_TRY(ge, api.SetAttribute(conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha));
    GRAPH_TRY(ge, api.SetAttribute(conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta));
    GRAPH_TRY(ge, api.Finalize(conv));
    bdesc pw = dl.make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    cudnnPointwiseMode_t mode = add ? CUDNN_POINTWISE_ADD : CUDNN_POINTWISE_IDENTITY;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    GRAPH_TRY(ge, pw ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED);
    GRAPH_TRY(ge, api.SetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    GRAPH_TRY(ge, api.SetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
    GRAPH_TRY(ge, api.Finalize(pw));
    bdesc out = dl.make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    GRAPH_TRY(ge, out ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED);
    GRAPH_TRY(ge, api.SetAttribute(out, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw));
    GRAPH_TRY(ge, api.SetAttribute(out, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v));
    if (add)
        GRAPH_TRY(ge, api.SetAttribute(out, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
    GRAPH_TRY(ge, api.SetAttribute(out, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    GRAPH_TRY(ge, api.Finalize(out));
    bdesc graph = dl.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    bdesc ops[2] = {conv, out};
    cudnnHandle_t h = (cudnnHandle_t)handle;
    GRAPH_TRY(ge, graph ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED);
    GRAPH_TRY(ge, api.SetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 2, ops));
    GRAPH_TRY(ge, api.SetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
    GRAPH_TRY(ge, api.Finalize(graph));
    return graph;
}

// May the engine of configuration cfg run the exact mode?  Not when cuDNN
// notes it as non-deterministic or as reducing in less than fp32.
bool engine_allowed(desc_list &dl, bdesc cfg, int64_t *index)
{
    bdesc engine = dl.make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    int64_t got = 0;
    if (!engine ||
        api.GetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &engine) != 0)
        return false;
    api.GetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, index);
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    int64_t n = 0;
    if (api.GetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                         CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) != 0)
        return false;
    for (int64_t k = 0; k < n; k++)
        if (notes[k] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC ||
            notes[k] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION || notes[k] == CUDNN_NUMERICAL_NOTE_FFT ||
            notes[k] == CUDNN_NUMERICAL_NOTE_WINOGRAD || notes[k] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)
            return false;
    return true;
}

bdesc variant_pack(desc_list &dl, const void *x, const void *w, void *y, void *ws, int add)
{
    bdesc vp = dl.make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    int64_t uids[4] = {UID_X, UID_W, UID_Y, UID_B};
    void *ptrs[4] = {(void *)x, (void *)w, y, y};
    int n = add ? 4 : 3;
    if (!vp || api.SetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids) ||
        api.SetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs) ||
        api.SetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws) || api.Finalize(vp))
        return nullptr;
    return vp;
}

double now_ms()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// The time of one run of `plan` in ms (the mean of 3 runs after one
// warm-up), or a negative number when it fails.
float time_plan(void *handle, bdesc plan, bdesc vp, cudaStream_t stream)
{
    cudaEvent_t a, b;
    if (cudaEventCreate(&a) != cudaSuccess)
        return -1.0f;
    if (cudaEventCreate(&b) != cudaSuccess) {
        cudaEventDestroy(a);
        return -1.0f;
    }
    float ms = -1.0f;
    if (api.Execute((cudnnHandle_t)handle, plan, vp) == CUDNN_STATUS_SUCCESS) {
        cudaEventRecord(a, stream);
        int ok = 1;
        for (int k = 0; k < 3 && ok; k++)
            ok = api.Execute((cudnnHandle_t)handle, plan, vp) == CUDNN_STATUS_SUCCESS;
        cudaEventRecord(b, stream);
        if (ok && cudaEventSynchronize(b) == cudaSuccess && cudaEventElapsedTime(&ms, a, b) == cudaSuccess)
            ms /= 3.0f;
        else
            ms = -1.0f;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    (void)cudaGetLastError();
    return ms;
}

} // namespace

int nc_cudnn_graph_shape_ok(const nc_conv_shape *s)
{
    // 16-byte rows of bf16 channels and of fp32 outputs; cuDNN's graph engines refuse others
    return s->c % 8 == 0 && s->cout % 4 == 0;
}

namespace {

// The pointers of pass p (0: counts · hi, 1: pairs · [mid, lo]) in the
// layouts of NC_CONV_BF16_EXACT.
void pass_operands(const nc_conv_shape *s, int p, const void *x, const void *w, const void **xp, const void **wp)
{
    const uint16_t *x16 = (const uint16_t *)x, *w16 = (const uint16_t *)w;
    *xp = p ? (const void *)(x16 + s->rows * s->h * s->w * s->c) : x;
    *wp = p ? (const void *)(w16 + (int64_t)s->cout * s->kh * s->kw * s->c) : w;
}

// The fastest allowed engine of pass p, or NULL (and *why set).
bdesc plan_pass(desc_list &dl, void *handle, cudaStream_t stream, const nc_conv_shape *s, int p, const void *x,
                const void *w, void *y, void *ws, size_t ws_bytes, size_t *ws_used, float *ms_out,
                int64_t *engine_out, char *why, size_t why_size)
{
    graph_error ge;
    bdesc graph = operation_graph(dl, handle, s, (int64_t)s->c * (p ? 2 : 1), p, &ge);
    if (!graph) {
        snprintf(why, why_size, "%s: %s", ge.what, api.GetErrorString(ge.status));
        return nullptr;
    }
    bdesc heur = dl.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    int64_t n = 0, got = 0;
    if (!heur || api.SetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph) ||
        api.SetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) || api.Finalize(heur) ||
        api.GetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, nullptr))
        n = 0;
    bdesc cfgs[8] = {};
    n = n > 8 ? 8 : n;
    for (int64_t k = 0; k < n; k++)
        cfgs[k] = dl.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    if (n > 0 && api.GetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got, cfgs))
        got = 0;
    bdesc best = nullptr;
    for (int64_t k = 0, tried = 0; k < got && tried < kTries; k++) {
        int64_t index = -1, wsz = 0, one = 0;
        if (!engine_allowed(dl, cfgs[k], &index))
            continue;
        bdesc plan = dl.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        cudnnHandle_t h = (cudnnHandle_t)handle;
        if (!plan || api.SetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) ||
            api.SetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[k]) ||
            api.Finalize(plan) ||
            api.GetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &one, &wsz) ||
            (size_t)wsz > ws_bytes)
            continue;
        tried++;
        bdesc vp = variant_pack(dl, x, w, y, ws, p);
        float ms = vp ? time_plan(handle, plan, vp, stream) : -1.0f;
        if (ms >= 0.0f && (!best || ms < *ms_out)) {
            best = plan;
            *ms_out = ms;
            *engine_out = index;
            *ws_used = (size_t)wsz;
        }
    }
    if (!best)
        snprintf(why, why_size, "no deterministic fp32-accumulating engine (%lld configurations)", (long long)got);
    return best;
}

// Takes descriptor d out of the list, so that it outlives the list.
void keep(desc_list &dl, bdesc d)
{
    for (bdesc &x : dl.d)
        if (x == d)
            x = nullptr;
}

} // namespace

nc_status nc_cudnn_graph_plan(void *handle, cudaStream_t stream, const nc_conv_shape *s, const void *x,
                              const void *w, void *y, void *ws, size_t ws_bytes, nc_conv_plan *plan,
                              const char *where, nc_error *err)
{
    if (nc_gpu_fault_graph())
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: cuDNN's graph API refused the exact convolution (injected fault)",
                       where);
    desc_list dl;
    double t0 = now_ms();
    float ms[2] = {0.0f, 0.0f};
    int64_t engine[2] = {-1, -1};
    size_t used[2] = {0, 0};
    bdesc best[2] = {nullptr, nullptr};
    char why[200] = "";
    for (int p = 0; p < 2; p++) {
        const void *xp, *wp;
        pass_operands(s, p, x, w, &xp, &wp);
        best[p] = plan_pass(dl, handle, stream, s, p, xp, wp, y, ws, ws_bytes, &used[p], &ms[p], &engine[p], why,
                            sizeof why);
        if (!best[p])
            return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: cuDNN's graph API refused the exact convolution's %s pass (%s)",
                           where, p ? "second" : "first", why);
    }
    for (int p = 0; p < 2; p++) {
        keep(dl, best[p]);
        plan->graph_plan[p] = best[p];
    }
    plan->workspace = used[0] > used[1] ? used[0] : used[1];
    plan->find_ms = ms[0] + ms[1];
    snprintf(plan->desc, sizeof plan->desc,
             "cuDNN graph engines %lld + %lld, exact fp32: counts x bf16 hi, then pairs x [mid, lo] added, NHWC, "
             "workspace %zu bytes, %.3f + %.3f ms (planned in %.0f ms)",
             (long long)engine[0], (long long)engine[1], plan->workspace, ms[0], ms[1], now_ms() - t0);
    return NC_OK;
}

nc_status nc_cudnn_graph_conv(void *handle, const nc_conv_plan *plan, const void *x, const void *w, void *y, void *ws,
                              const char *where, nc_error *err)
{
    for (int p = 0; p < 2; p++) {
        desc_list dl;
        const void *xp, *wp;
        pass_operands(&plan->shape, p, x, w, &xp, &wp);
        bdesc vp = variant_pack(dl, xp, wp, y, ws, p);
        if (!vp)
            return nc_fail(err, NC_ERR_DEVICE, "%s: cuDNN's graph API: the variant pack failed", where);
        cudnnStatus_t s = api.Execute((cudnnHandle_t)handle, (bdesc)plan->graph_plan[p], vp);
        if (s != CUDNN_STATUS_SUCCESS)
            return nc_fail(err, s == CUDNN_STATUS_ALLOC_FAILED ? NC_ERR_MEMORY : NC_ERR_DEVICE,
                           "%s: cuDNN's graph API: execute failed: %s", where, api.GetErrorString(s));
    }
    return NC_OK;
}

void nc_cudnn_graph_plan_free(nc_conv_plan *plan)
{
    for (int p = 0; p < 2; p++) {
        if (plan->graph_plan[p] && api.DestroyDescriptor)
            api.DestroyDescriptor((bdesc)plan->graph_plan[p]);
        plan->graph_plan[p] = nullptr;
    }
}
