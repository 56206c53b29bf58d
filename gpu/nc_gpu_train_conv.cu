// nc_gpu_train_conv.cu — the GPU trainer's convolutions through cuDNN (see
// nc_gpu_train_conv.h).
#include "gpu/nc_gpu_train_conv.h"

#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <vector>

#include "gpu/nc_gpu_cudnn.h"
#include "gpu/nc_gpu_internal.h"

namespace {

// Room cuDNN may use while it times its algorithms (less when memory is short).
// The FFT algorithms need it: on the H200, at 2048 rows, the input gradient of a
// 14x14 conv takes 0.33-0.52 ms through FFT (290-300 MB of workspace) against
// 0.69-1.33 ms through the best algorithm that fits in 256 MB, and the 28x28
// layers' FFT variants ask for 550-880 MB (docs/bench-logs/gpu_2026-12-02/
// session8_call1/train_conv_probe.txt).
constexpr size_t kPlanWorkspace = (size_t)1 << 30;
const char *const kWhere = "gpu trainer: conv2d";
// Forward inputs whose bf16 copies are kept (one per conv layer and batch
// shape in a trainer; past this, the oldest copies go, and the weight
// gradient copies its input again).
constexpr size_t kMaxKept = 64;

struct train_plan {
    nc_conv_shape shape; // memset, then filled: compared with memcmp
    nc_conv_plan plan;
    int refused; // cuDNN has no deterministic algorithm: im2col runs it
};

// The arithmetic of one convolution: the bf16 mode's only for an ungrouped
// conv whose channel counts are multiples of 8 (cuDNN 9.14 refuses the input
// gradient of a bf16 conv of 4 channels with BAD_PARAM after timing it); fp32
// FMA for the others (e.g. a first layer of 1 or 3 channels: a small part of
// a step).
nc_conv_math math_for(nc_conv_math m, int c, int cout, int groups)
{
    if (m == NC_CONV_BF16 && (groups > 1 || c % 8 != 0 || cout % 8 != 0))
        return NC_CONV_FP32_ANY;
    return m;
}

// The trainer's shape of a convolution: NCHW fp32 values, or channels-last
// bf16 copies of them in the bf16 mode (cuDNN's bf16 kernels are 2-4x
// faster on channels-last operands than on NCHW ones).
nc_conv_shape shape_of(const nc_window *w, int cout, int groups, int64_t rows, nc_conv_math m)
{
    nc_conv_shape s;
    memset(&s, 0, sizeof s);
    s.rows = rows;
    s.c = w->c, s.h = w->h, s.w = w->w;
    s.cout = cout, s.oh = w->oh, s.ow = w->ow;
    s.kh = w->kernel[0], s.kw = w->kernel[1], s.sh = w->stride[0], s.sw = w->stride[1];
    s.dh = w->dilation[0], s.dw = w->dilation[1];
    s.ph = w->pad[0], s.pw = w->pad[1];
    s.groups = groups;
    s.nchw = m != NC_CONV_BF16;
    return s;
}

} // namespace

// A device buffer that only grows (the workspace, the bf16 copies).
struct grow_buffer {
    void *p = nullptr;
    size_t bytes = 0;
};

// The bf16 mode's copy of one forward input, kept until the backward pass
// needs it again for the weight gradient (the forward inputs of a step stay
// where they are until its backward pass, and the trainer allocates them
// once, so a pointer and a shape name one layer's input).
struct kept_input {
    const float *src;
    nc_conv_shape shape;
    grow_buffer copy;
};

struct nc_train_convs {
    cudaStream_t stream = nullptr;
    void *cudnn = nullptr;
    std::vector<train_plan> plans; // grows at the first pass of each shape; never shrinks
    grow_buffer ws;                // cuDNN's workspace
    nc_conv_math math = NC_CONV_FP32_ANY; // nc_train_conv_math()
    // the bf16 mode's channels-last bf16 copies: an input (x, or its
    // gradient), an output (y, or its gradient), the weight and its gradient
    grow_buffer in16, out16, w16, dw16;
    std::vector<kept_input> kept; // the forward inputs' bf16 copies (at most kMaxKept)
    uint64_t frees = 0;           // buffers freed that queued or recorded work may have used
};

namespace {

nc_status cuda_check(nc_error *err, const char *call, cudaError_t e)
{
    if (e == cudaSuccess)
        return NC_OK;
    return nc_fail(err, e == cudaErrorMemoryAllocation ? NC_ERR_MEMORY : NC_ERR_DEVICE, "%s: %s failed: %s", kWhere,
                   call, cudaGetErrorString(e));
}

// b, at least `bytes` long (its old contents are not kept); `what` names it
// in a failure.
nc_status grow(nc_train_convs *c, grow_buffer *b, size_t bytes, const char *what, nc_error *err)
{
    if (bytes <= b->bytes)
        return NC_OK;
    if (b->p) { // queued work may still use it
        nc_status s = cuda_check(err, "cudaStreamSynchronize", cudaStreamSynchronize(c->stream));
        if (s != NC_OK)
            return s;
        cudaFree(b->p);
        c->frees++;
        b->p = nullptr;
        b->bytes = 0;
    }
    nc_status s = cuda_check(err, what, cudaMalloc(&b->p, bytes));
    if (s == NC_OK)
        b->bytes = bytes;
    return s;
}

// The workspace, at least `bytes` long.
nc_status workspace(nc_train_convs *c, size_t bytes, nc_error *err)
{
    return grow(c, &c->ws, bytes, "cudaMalloc (cuDNN workspace)", err);
}

// A bf16 copy's buffer, at least `bytes` long.
nc_status grow16(nc_train_convs *c, grow_buffer *b, size_t bytes, nc_error *err)
{
    return grow(c, b, bytes, "cudaMalloc (bf16 operands)", err);
}

size_t planning_room()
{
    size_t free_b = 0, total = 0;
    cudaMemGetInfo(&free_b, &total);
    return std::min(kPlanWorkspace, free_b / 8);
}

train_plan *find(nc_train_convs *c, const nc_conv_shape &s)
{
    for (train_plan &p : c->plans)
        if (memcmp(&p.shape, &s, sizeof s) == 0)
            return &p;
    return nullptr;
}

// The plan of shape s, its forward chosen now on in, weight, out (cuDNN's
// operands: fp32 NCHW, or the bf16 mode's channels-last copies) if new.
nc_status plan_for(nc_train_convs *c, const nc_conv_shape &s, nc_conv_math m, const void *in, const void *weight,
                   void *out, train_plan **got, nc_error *err)
{
    if ((*got = find(c, s)))
        return NC_OK;
    train_plan tp;
    memset(&tp, 0, sizeof tp);
    tp.shape = s;
    size_t room = planning_room();
    nc_status st = workspace(c, room, err);
    if (st == NC_OK)
        st = nc_cudnn_plan(c->cudnn, c->stream, &s, m, in, weight, out, c->ws.p, room, &tp.plan, kWhere, err);
    if (st == NC_ERR_UNSUPPORTED) { // no deterministic algorithm: im2col, from now on
        tp.refused = 1;
        st = NC_OK;
    }
    if (st != NC_OK)
        return st;
    c->plans.push_back(tp);
    *got = &c->plans.back();
    return NC_OK;
}

size_t weight_count(const nc_conv_shape &sh)
{
    return (size_t)sh.cout * (sh.c / (sh.groups > 1 ? sh.groups : 1)) * sh.kh * sh.kw;
}

nc_status plan_backward(nc_train_convs *c, train_plan *tp, const void *in, const void *weight, const void *dout,
                        void *din, int need_filter, nc_error *err)
{
    size_t room = planning_room();
    nc_status s = NC_OK;
    if (din && !tp->plan.data_planned && (s = workspace(c, room, err)) == NC_OK)
        s = nc_cudnn_plan_backward_data(c->cudnn, &tp->plan, weight, dout, din, c->ws.p, room, kWhere, err);
    if (s != NC_OK || !need_filter || tp->plan.filter_planned)
        return s;
    // a weight-sized scratch for cuDNN to overwrite while it times
    size_t wbytes = weight_count(tp->shape) * sizeof(float);
    void *scratch = nullptr;
    if ((s = workspace(c, room, err)) != NC_OK ||
        (s = cuda_check(err, "cudaMalloc (weight-gradient scratch)", cudaMalloc(&scratch, wbytes))) != NC_OK)
        return s;
    s = nc_cudnn_plan_backward_filter(c->cudnn, &tp->plan, in, dout, scratch, c->ws.p, room, kWhere, err);
    cudaStreamSynchronize(c->stream);
    cudaFree(scratch);
    return s;
}

// ---- the bf16 mode: channels-last bf16 copies in, fp32 NCHW values out ----
//
// A sample's NCHW [C, H·W] is the transpose of its NHWC [H·W, C], and a KCRS
// filter [K][C, R·S] that of KRSC [K][R·S, C]: each copy is one transposing
// kernel that rounds (or widens) on the way.

// dst = bf16 channels-last copy of the [rows, a, b] fp32 values at src.
nc_status to_bf16(nc_train_convs *c, grow_buffer *dst, int64_t rows, int64_t a, int64_t b, const float *src,
                  nc_error *err)
{
    nc_status s = grow16(c, dst, (size_t)(rows * a * b) * sizeof(nc_bf16), err);
    if (s != NC_OK)
        return s;
    return cuda_check(err, "nc_launch_transpose_rows_to_bf16",
                      nc_launch_transpose_rows_to_bf16(c->stream, rows, a, b, src, (nc_bf16 *)dst->p));
}

// dst (fp32, [rows, b, a]) = (or +=, add) the widened bf16 values [rows, a, b] at src.
nc_status from_bf16(nc_train_convs *c, const grow_buffer *src, int64_t rows, int64_t a, int64_t b, int add,
                    float *dst, nc_error *err)
{
    return cuda_check(err, "nc_launch_transpose_rows_add_bf16",
                      nc_launch_transpose_rows_add_bf16(c->stream, rows, a, b, (const nc_bf16 *)src->p, add, dst));
}

nc_status weight_to_bf16(nc_train_convs *c, const nc_conv_shape &sh, const float *weight, nc_error *err)
{
    int cg = sh.c / (sh.groups > 1 ? sh.groups : 1);
    return to_bf16(c, &c->w16, sh.cout, cg, (int64_t)sh.kh * sh.kw, weight, err);
}

nc_status input_to_bf16(nc_train_convs *c, const nc_conv_shape &sh, const float *in, nc_error *err)
{
    return to_bf16(c, &c->in16, sh.rows, sh.c, (int64_t)sh.h * sh.w, in, err);
}

// The kept copy of input `in` of shape sh (NULL: none).
kept_input *kept_copy(nc_train_convs *c, const float *in, const nc_conv_shape &sh)
{
    for (kept_input &k : c->kept)
        if (k.src == in && memcmp(&k.shape, &sh, sizeof sh) == 0)
            return &k;
    return nullptr;
}

// A bf16 copy of forward input `in`, kept for the weight gradient.
nc_status keep_input_bf16(nc_train_convs *c, const nc_conv_shape &sh, const float *in, kept_input **got,
                          nc_error *err)
{
    if (!(*got = kept_copy(c, in, sh))) {
        if (c->kept.size() >= kMaxKept) { // the oldest goes (queued work may still read it)
            nc_status s = cuda_check(err, "cudaStreamSynchronize", cudaStreamSynchronize(c->stream));
            if (s != NC_OK)
                return s;
            cudaFree(c->kept.front().copy.p);
            c->frees++;
            c->kept.erase(c->kept.begin());
        }
        c->kept.push_back(kept_input{in, sh, grow_buffer()});
        *got = &c->kept.back();
    }
    return to_bf16(c, &(*got)->copy, sh.rows, sh.c, (int64_t)sh.h * sh.w, in, err);
}

nc_status forward_bf16(nc_train_convs *c, const nc_conv_shape &sh, const float *in, const float *weight, float *out,
                       nc_error *err)
{
    kept_input *x16 = nullptr;
    nc_status s = keep_input_bf16(c, sh, in, &x16, err);
    int64_t P = (int64_t)sh.oh * sh.ow;
    if (s == NC_OK)
        s = weight_to_bf16(c, sh, weight, err);
    if (s == NC_OK)
        s = grow16(c, &c->out16, (size_t)(sh.rows * sh.cout * P) * sizeof(nc_bf16), err);
    train_plan *tp = nullptr;
    if (s == NC_OK)
        s = plan_for(c, sh, NC_CONV_BF16, x16->copy.p, c->w16.p, c->out16.p, &tp, err);
    if (s == NC_OK && tp->refused)
        return NC_ERR_UNSUPPORTED;
    if (s == NC_OK)
        s = workspace(c, tp->plan.workspace, err);
    if (s == NC_OK)
        s = nc_cudnn_conv(c->cudnn, &tp->plan, x16->copy.p, c->w16.p, c->out16.p, c->ws.p, 0.0f, kWhere, err);
    if (s == NC_OK)
        s = from_bf16(c, &c->out16, sh.rows, P, sh.cout, 0, out, err);
    return s;
}

// din = the input gradient (overwritten), dweight += the weight gradient;
// the weight gradient is summed in fp32 by cuDNN and rounded to bf16 once.
nc_status backward_bf16(nc_train_convs *c, train_plan *tp, const float *in, const float *weight, const float *dout,
                        float *din, float *dweight, nc_error *err)
{
    const nc_conv_shape &sh = tp->shape;
    int64_t P = (int64_t)sh.oh * sh.ow, HW = (int64_t)sh.h * sh.w;
    int cg = sh.c / (sh.groups > 1 ? sh.groups : 1);
    nc_status s = to_bf16(c, &c->out16, sh.rows, sh.cout, P, dout, err); // out16: dy from here on
    if (s == NC_OK && din) {
        if ((s = weight_to_bf16(c, sh, weight, err)) == NC_OK &&
            (s = grow16(c, &c->in16, (size_t)(sh.rows * sh.c * HW) * sizeof(nc_bf16), err)) == NC_OK)
            s = plan_backward(c, tp, nullptr, c->w16.p, c->out16.p, c->in16.p, 0, err);
        if (s == NC_OK && (s = workspace(c, tp->plan.data_workspace, err)) == NC_OK)
            s = nc_cudnn_backward_data(c->cudnn, &tp->plan, c->w16.p, c->out16.p, c->in16.p, c->ws.p, kWhere, err);
        if (s == NC_OK)
            s = from_bf16(c, &c->in16, sh.rows, HW, sh.c, 0, din, err);
    }
    if (s != NC_OK || !dweight)
        return s;
    // x in bf16: the forward's copy, else made again
    const kept_input *kept = kept_copy(c, in, sh);
    const void *x16 = kept ? kept->copy.p : c->in16.p;
    if ((kept || (s = input_to_bf16(c, sh, in, err)) == NC_OK) &&
        (s = grow16(c, &c->dw16, weight_count(sh) * sizeof(nc_bf16), err)) == NC_OK)
        s = plan_backward(c, tp, x16, nullptr, c->out16.p, nullptr, 1, err);
    if (s == NC_OK && (s = workspace(c, tp->plan.filter_workspace, err)) == NC_OK)
        s = nc_cudnn_backward_filter(c->cudnn, &tp->plan, x16, c->out16.p, c->dw16.p, c->ws.p, 0.0f, kWhere, err);
    if (s == NC_OK)
        s = from_bf16(c, &c->dw16, sh.cout, (int64_t)sh.kh * sh.kw, cg, 1, dweight, err);
    return s;
}

} // namespace

nc_conv_math nc_train_conv_math(void)
{
    const char *p = nc_gpu_options_get().precision;
    if (p && strcmp(p, "bf16") == 0)
        return NC_CONV_BF16;
    if (p && strcmp(p, "tf32") == 0)
        return NC_CONV_TF32;
    return NC_CONV_FP32_ANY; // fp32 and the split modes: fp32 FMA (Winograd and FFT allowed)
}

nc_status nc_train_convs_new(cudaStream_t stream, nc_train_convs **out, nc_error *err)
{
    *out = nullptr;
    const char *conv = nc_gpu_options_get().conv;
    if ((conv && strcmp(conv, "im2col") == 0) || !nc_cudnn_status(nullptr, 0))
        return NC_OK;
    nc_train_convs *c = new (std::nothrow) nc_train_convs();
    if (!c)
        return nc_fail(err, NC_ERR_MEMORY, "%s: out of memory", kWhere);
    c->stream = stream;
    c->math = nc_train_conv_math();
    nc_status s = nc_cudnn_create(stream, &c->cudnn, err);
    if (s != NC_OK) {
        delete c;
        return s;
    }
    *out = c;
    return NC_OK;
}

uint64_t nc_train_convs_frees(const nc_train_convs *c) { return c ? c->frees : 0; }

void nc_train_convs_free(nc_train_convs *c)
{
    if (!c)
        return;
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    for (train_plan &p : c->plans)
        if (!p.refused)
            nc_cudnn_plan_free(&p.plan);
    for (void *p : {c->ws.p, c->in16.p, c->out16.p, c->w16.p, c->dw16.p})
        if (p)
            cudaFree(p);
    for (kept_input &k : c->kept)
        cudaFree(k.copy.p);
    nc_cudnn_destroy(c->cudnn);
    delete c;
}

int nc_train_convs_take(nc_train_convs *c, const nc_window *w, int cout, int groups, int64_t rows)
{
    if (!c || w->pad[0] != w->pad[2] || w->pad[1] != w->pad[3])
        return 0;
    nc_conv_shape s = shape_of(w, cout, groups, rows, math_for(c->math, w->c, cout, groups));
    char why[160];
    if (!nc_cudnn_shape_ok(&s, why, sizeof why))
        return 0;
    const train_plan *p = find(c, s);
    return !p || !p->refused;
}

nc_status nc_train_convs_forward(nc_train_convs *c, const nc_window *w, int cout, int groups, int64_t rows,
                                 const float *in, const float *weight, float *out, nc_error *err)
{
    nc_conv_math m = math_for(c->math, w->c, cout, groups);
    nc_conv_shape shape = shape_of(w, cout, groups, rows, m);
    train_plan *tp = nullptr;
    nc_status s = m == NC_CONV_BF16 ? forward_bf16(c, shape, in, weight, out, err)
                                    : plan_for(c, shape, m, in, weight, out, &tp, err);
    if (s == NC_ERR_UNSUPPORTED || (tp && tp->refused))
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: cuDNN refused this shape (nc_train_convs_take says so)", kWhere);
    if (s != NC_OK || m == NC_CONV_BF16)
        return s;
    if ((s = workspace(c, tp->plan.workspace, err)) != NC_OK)
        return s;
    return nc_cudnn_conv(c->cudnn, &tp->plan, in, weight, out, c->ws.p, 0.0f, kWhere, err);
}

nc_status nc_train_convs_backward(nc_train_convs *c, const nc_window *w, int cout, int groups, int64_t rows,
                                  const float *in, const float *weight, const float *dout, float *din,
                                  float *dweight, nc_error *err)
{
    nc_conv_math m = math_for(c->math, w->c, cout, groups);
    train_plan *tp = find(c, shape_of(w, cout, groups, rows, m));
    if (!tp || tp->refused) // every backward follows its forward
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: backward of a convolution cuDNN did not run forward", kWhere);
    if (m == NC_CONV_BF16)
        return backward_bf16(c, tp, in, weight, dout, din, dweight, err);
    nc_status s = plan_backward(c, tp, in, weight, dout, din, dweight != nullptr, err);
    if (s == NC_OK && din && (s = workspace(c, tp->plan.data_workspace, err)) == NC_OK)
        s = nc_cudnn_backward_data(c->cudnn, &tp->plan, weight, dout, din, c->ws.p, kWhere, err);
    if (s == NC_OK && dweight && (s = workspace(c, tp->plan.filter_workspace, err)) == NC_OK)
        s = nc_cudnn_backward_filter(c->cudnn, &tp->plan, in, dout, dweight, c->ws.p, 1.0f, kWhere, err);
    return s;
}
