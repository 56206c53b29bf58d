// nc_gpu_cudnn_graph.cu — the exact fp32 convolution through cuDNN's graph
// (backend) API: bf16 operands, fp32 output.
//
// Why the graph API: the legacy API's bf16 convolution writes a bf16 output,
// which would round away the low weight parts.  A graph of a convolution
// whose output is a virtual fp32 tensor, followed by an identity pointwise
// operation into the real fp32 output, is run by cuDNN's runtime-fusion
// engines with bf16 tensor cores and fp32 accumulation (measured on the H200
// with cuDNN 9.14: 0 error against a float64 sum, and about 2x faster per
// convolution than three TF32 passes; gpu/NOTES.md).
//
// The operand is the spike counts repeated once per weight part along the
// channels, x' = [q, q, q], and the filter holds the parts side by side,
// w' = [hi, mid, lo]; one convolution over 3·Cin channels then adds
// q·hi + q·mid + q·lo = q·w exactly for every tap (each product of a small
// integer and a bf16 part is exact in fp32).
//
// A plan is built for one shape: the heuristics' first few engine
// configurations are compiled (cuDNN compiles them at run time: about half a
// second each) and timed on the real buffers, and the fastest is kept.
// Engines flagged non-deterministic or with reduced-precision reduction are
// never used.
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cudnn.h>

#include "gpu/nc_gpu_cudnn_graph.h"
#include "gpu/nc_gpu_internal.h"

nc_cudnn_graph_api nc_graph_api;

namespace {

typedef cudnnBackendDescriptor_t bdesc;
const nc_cudnn_graph_api &api = nc_graph_api;

// Unique ids of the tensors in the variant pack.
enum : int64_t { UID_X = 1, UID_W = 2, UID_Y = 3, UID_V = 4 };

// How many of the heuristics' configurations are compiled and timed.
const int kTries = 3;

// Every descriptor made for one plan, destroyed together.
struct desc_list {
    bdesc d[32];
    int n = 0;
    ~desc_list()
    {
        for (int k = n - 1; k >= 0; k--)
            if (d[k])
                api.DestroyDescriptor(d[k]);
    }
    bdesc make(cudnnBackendDescriptorType_t t)
    {
        bdesc x = nullptr;
        if (n < 32 && api.CreateDescriptor(t, &x) == CUDNN_STATUS_SUCCESS)
            d[n++] = x;
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

// The operation graph: v = conv(x', w') (virtual fp32), y = identity(v).
bdesc operation_graph(desc_list &dl, void *handle, const nc_conv_shape *s, int parts, graph_error *ge)
{
    int64_t cin = (int64_t)s->c * parts;
    bdesc x = tensor(dl, UID_X, CUDNN_DATA_BFLOAT16, s->rows, cin, s->h, s->w, false, ge);
    bdesc w = x ? tensor(dl, UID_W, CUDNN_DATA_BFLOAT16, s->cout, cin, s->kh, s->kw, false, ge) : nullptr;
    bdesc v = w ? tensor(dl, UID_V, CUDNN_DATA_FLOAT, s->rows, s->cout, s->oh, s->ow, true, ge) : nullptr;
    bdesc y = v ? tensor(dl, UID_Y, CUDNN_DATA_FLOAT, s->rows, s->cout, s->oh, s->ow, false, ge) : nullptr;
    bdesc cd = y ? conv_descriptor(dl, s, ge) : nullptr;
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
    cudnnPointwiseMode_t mode = CUDNN_POINTWISE_IDENTITY;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    GRAPH_TRY(ge, pw ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED);
    GRAPH_TRY(ge, api.SetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    GRAPH_TRY(ge, api.SetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
    GRAPH_TRY(ge, api.Finalize(pw));
    bdesc copy = dl.make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    GRAPH_TRY(ge, copy ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED);
    GRAPH_TRY(ge, api.SetAttribute(copy, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw));
    GRAPH_TRY(ge, api.SetAttribute(copy, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v));
    GRAPH_TRY(ge, api.SetAttribute(copy, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    GRAPH_TRY(ge, api.Finalize(copy));
    bdesc graph = dl.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    bdesc ops[2] = {conv, copy};
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

bdesc variant_pack(desc_list &dl, const void *x, const void *w, void *y, void *ws)
{
    bdesc vp = dl.make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    int64_t uids[3] = {UID_X, UID_W, UID_Y};
    void *ptrs[3] = {(void *)x, (void *)w, y};
    if (!vp || api.SetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids) ||
        api.SetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs) ||
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

int nc_cudnn_graph_shape_ok(const nc_conv_shape *s, int parts)
{
    // 16-byte rows of bf16 channels and of fp32 outputs; cuDNN's graph engines refuse others
    return ((int64_t)s->c * parts) % 8 == 0 && s->cout % 4 == 0;
}

nc_status nc_cudnn_graph_plan(void *handle, cudaStream_t stream, const nc_conv_shape *s, int parts, const void *x,
                              const void *w, void *y, void *ws, size_t ws_bytes, nc_conv_plan *plan,
                              const char *where, nc_error *err)
{
    if (nc_gpu_fault_graph())
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: cuDNN's graph API refused the exact convolution (injected fault)",
                       where);
    desc_list dl;
    graph_error ge;
    double t0 = now_ms();
    bdesc graph = operation_graph(dl, handle, s, parts, &ge);
    if (!graph)
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: cuDNN's graph API refused the exact convolution (%s: %s)", where,
                       ge.what, api.GetErrorString(ge.status));
    bdesc heur = dl.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    int64_t n = 0;
    if (!heur || api.SetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph) ||
        api.SetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) || api.Finalize(heur) ||
        api.GetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, nullptr))
        n = 0;
    bdesc cfgs[8] = {};
    int64_t got = 0;
    if (n > 8)
        n = 8;
    for (int64_t k = 0; k < n; k++)
        cfgs[k] = dl.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    if (n > 0 && api.GetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got, cfgs))
        got = 0;
    bdesc best = nullptr;
    float best_ms = 0.0f;
    int64_t best_engine = -1;
    size_t best_ws = 0;
    for (int64_t k = 0, tried = 0; k < got && tried < kTries; k++) {
        int64_t index = -1, wsz = 0, one = 0;
        if (!engine_allowed(dl, cfgs[k], &index))
            continue;
        bdesc p = dl.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        cudnnHandle_t h = (cudnnHandle_t)handle;
        if (!p || api.SetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) ||
            api.SetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[k]) ||
            api.Finalize(p) ||
            api.GetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &one, &wsz) ||
            (size_t)wsz > ws_bytes)
            continue;
        tried++;
        bdesc vp = variant_pack(dl, x, w, y, ws);
        float ms = vp ? time_plan(handle, p, vp, stream) : -1.0f;
        if (ms >= 0.0f && (!best || ms < best_ms)) {
            best = p;
            best_ms = ms;
            best_engine = index;
            best_ws = (size_t)wsz;
        }
    }
    if (!best)
        return nc_fail(err, NC_ERR_UNSUPPORTED,
                       "%s: cuDNN has no deterministic fp32-accumulating engine for the exact convolution", where);
    // keep the chosen plan: take it out of the list that is destroyed on return
    for (int k = 0; k < dl.n; k++)
        if (dl.d[k] == best)
            dl.d[k] = nullptr;
    plan->graph_plan = best;
    plan->workspace = best_ws;
    plan->find_ms = best_ms;
    snprintf(plan->desc, sizeof plan->desc,
             "cuDNN graph engine %lld, exact fp32: spike counts x %d bf16 weight parts in one conv, NHWC, "
             "workspace %zu bytes, %.3f ms (planned in %.0f ms)",
             (long long)best_engine, parts, best_ws, best_ms, now_ms() - t0);
    return NC_OK;
}

nc_status nc_cudnn_graph_conv(void *handle, const nc_conv_plan *plan, const void *x, const void *w, void *y, void *ws,
                              const char *where, nc_error *err)
{
    desc_list dl;
    bdesc vp = variant_pack(dl, x, w, y, ws);
    if (!vp)
        return nc_fail(err, NC_ERR_DEVICE, "%s: cuDNN's graph API: the variant pack failed", where);
    cudnnStatus_t s = api.Execute((cudnnHandle_t)handle, (bdesc)plan->graph_plan, vp);
    if (s != CUDNN_STATUS_SUCCESS)
        return nc_fail(err, s == CUDNN_STATUS_ALLOC_FAILED ? NC_ERR_MEMORY : NC_ERR_DEVICE,
                       "%s: cuDNN's graph API: execute failed: %s", where, api.GetErrorString(s));
    return NC_OK;
}

void nc_cudnn_graph_plan_free(nc_conv_plan *plan)
{
    if (plan->graph_plan && api.DestroyDescriptor)
        api.DestroyDescriptor((bdesc)plan->graph_plan);
    plan->graph_plan = nullptr;
}
