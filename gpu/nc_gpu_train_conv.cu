// nc_gpu_train_conv.cu — the GPU trainer's convolutions through cuDNN (see
// nc_gpu_train_conv.h).
#include "gpu/nc_gpu_train_conv.h"

#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <vector>

#include "gpu/nc_gpu_cudnn.h"

namespace {

// Room cuDNN may use while it times its algorithms (less when memory is short).
constexpr size_t kPlanWorkspace = (size_t)256 << 20;
const char *const kWhere = "gpu trainer: conv2d";

struct train_plan {
    nc_conv_shape shape; // memset, then filled: compared with memcmp
    nc_conv_plan plan;
    int refused; // cuDNN has no deterministic algorithm: im2col runs it
};

nc_conv_shape shape_of(const nc_window *w, int cout, int groups, int64_t rows)
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
    s.nchw = 1;
    return s;
}

} // namespace

struct nc_train_convs {
    cudaStream_t stream = nullptr;
    void *cudnn = nullptr;
    std::vector<train_plan> plans; // grows at the first pass of each shape; never shrinks
    void *ws = nullptr;            // the workspace, grown on demand
    size_t ws_bytes = 0;
    nc_conv_math math = NC_CONV_FP32_ANY; // fp32 FMA; Winograd and FFT allowed (fp32-accurate, deterministic)
};

namespace {

nc_status cuda_check(nc_error *err, const char *call, cudaError_t e)
{
    if (e == cudaSuccess)
        return NC_OK;
    return nc_fail(err, e == cudaErrorMemoryAllocation ? NC_ERR_MEMORY : NC_ERR_DEVICE, "%s: %s failed: %s", kWhere,
                   call, cudaGetErrorString(e));
}

// The workspace, at least `bytes` long.
nc_status workspace(nc_train_convs *c, size_t bytes, nc_error *err)
{
    if (bytes <= c->ws_bytes)
        return NC_OK;
    if (c->ws) { // queued work may still use it
        nc_status s = cuda_check(err, "cudaStreamSynchronize", cudaStreamSynchronize(c->stream));
        if (s != NC_OK)
            return s;
        cudaFree(c->ws);
        c->ws = nullptr;
        c->ws_bytes = 0;
    }
    nc_status s = cuda_check(err, "cudaMalloc (cuDNN workspace)", cudaMalloc(&c->ws, bytes));
    if (s == NC_OK)
        c->ws_bytes = bytes;
    return s;
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

// The plan of shape s, its forward chosen now on in, weight, out if new.
nc_status plan_for(nc_train_convs *c, const nc_conv_shape &s, const float *in, const float *weight, float *out,
                   train_plan **got, nc_error *err)
{
    if ((*got = find(c, s)))
        return NC_OK;
    train_plan tp;
    memset(&tp, 0, sizeof tp);
    tp.shape = s;
    size_t room = planning_room();
    nc_status st = workspace(c, room, err);
    if (st == NC_OK)
        st = nc_cudnn_plan(c->cudnn, c->stream, &s, c->math, in, weight, out, c->ws, room, &tp.plan, kWhere, err);
    if (st == NC_ERR_UNSUPPORTED) { // no deterministic fp32 algorithm: im2col, from now on
        tp.refused = 1;
        st = NC_OK;
    }
    if (st != NC_OK)
        return st;
    c->plans.push_back(tp);
    *got = &c->plans.back();
    return NC_OK;
}

nc_status plan_backward(nc_train_convs *c, train_plan *tp, const float *in, const float *weight, const float *dout,
                        float *din, int need_filter, nc_error *err)
{
    size_t room = planning_room();
    nc_status s = NC_OK;
    if (din && !tp->plan.data_planned && (s = workspace(c, room, err)) == NC_OK)
        s = nc_cudnn_plan_backward_data(c->cudnn, &tp->plan, weight, dout, din, c->ws, room, kWhere, err);
    if (s != NC_OK || !need_filter || tp->plan.filter_planned)
        return s;
    // a weight-sized scratch for cuDNN to overwrite while it times
    const nc_conv_shape &sh = tp->shape;
    size_t wbytes = (size_t)sh.cout * (sh.c / (sh.groups > 1 ? sh.groups : 1)) * sh.kh * sh.kw * sizeof(float);
    void *scratch = nullptr;
    if ((s = workspace(c, room, err)) != NC_OK ||
        (s = cuda_check(err, "cudaMalloc (weight-gradient scratch)", cudaMalloc(&scratch, wbytes))) != NC_OK)
        return s;
    s = nc_cudnn_plan_backward_filter(c->cudnn, &tp->plan, in, dout, scratch, c->ws, room, kWhere, err);
    cudaStreamSynchronize(c->stream);
    cudaFree(scratch);
    return s;
}

} // namespace

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
    nc_status s = nc_cudnn_create(stream, &c->cudnn, err);
    if (s != NC_OK) {
        delete c;
        return s;
    }
    *out = c;
    return NC_OK;
}

void nc_train_convs_free(nc_train_convs *c)
{
    if (!c)
        return;
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    for (train_plan &p : c->plans)
        if (!p.refused)
            nc_cudnn_plan_free(&p.plan);
    if (c->ws)
        cudaFree(c->ws);
    nc_cudnn_destroy(c->cudnn);
    delete c;
}

int nc_train_convs_take(nc_train_convs *c, const nc_window *w, int cout, int groups, int64_t rows)
{
    if (!c || w->pad[0] != w->pad[2] || w->pad[1] != w->pad[3])
        return 0;
    nc_conv_shape s = shape_of(w, cout, groups, rows);
    char why[160];
    if (!nc_cudnn_shape_ok(&s, why, sizeof why))
        return 0;
    const train_plan *p = find(c, s);
    return !p || !p->refused;
}

nc_status nc_train_convs_forward(nc_train_convs *c, const nc_window *w, int cout, int groups, int64_t rows,
                                 const float *in, const float *weight, float *out, nc_error *err)
{
    train_plan *tp = nullptr;
    nc_status s = plan_for(c, shape_of(w, cout, groups, rows), in, weight, out, &tp, err);
    if (s != NC_OK)
        return s;
    if (tp->refused)
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: cuDNN refused this shape (nc_train_convs_take says so)", kWhere);
    if ((s = workspace(c, tp->plan.workspace, err)) != NC_OK)
        return s;
    return nc_cudnn_conv(c->cudnn, &tp->plan, in, weight, out, c->ws, 0.0f, kWhere, err);
}

nc_status nc_train_convs_backward(nc_train_convs *c, const nc_window *w, int cout, int groups, int64_t rows,
                                  const float *in, const float *weight, const float *dout, float *din,
                                  float *dweight, nc_error *err)
{
    nc_conv_shape shape = shape_of(w, cout, groups, rows);
    train_plan *tp = find(c, shape);
    if (!tp || tp->refused) // every backward follows its forward
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: backward of a convolution cuDNN did not run forward", kWhere);
    nc_status s = plan_backward(c, tp, in, weight, dout, din, dweight != nullptr, err);
    if (s == NC_OK && din && (s = workspace(c, tp->plan.data_workspace, err)) == NC_OK)
        s = nc_cudnn_backward_data(c->cudnn, &tp->plan, weight, dout, din, c->ws, kWhere, err);
    if (s == NC_OK && dweight && (s = workspace(c, tp->plan.filter_workspace, err)) == NC_OK)
        s = nc_cudnn_backward_filter(c->cudnn, &tp->plan, in, dout, dweight, c->ws, kWhere, err);
    return s;
}
