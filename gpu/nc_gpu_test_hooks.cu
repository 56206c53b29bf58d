// nc_gpu_test_hooks.cu — single kernels of the GPU engine on host data
// (nc_gpu.h, "test hooks"): the tests compare them with the CPU references.
#include "gpu/nc_gpu_engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <string>
#include <vector>

using namespace ncg;

// ---- test hooks -------------------------------------------------------------------------------


struct dev_buffers {
    std::vector<void *> p;
    ~dev_buffers()
    {
        for (void *q : p)
            cudaFree(q);
    }
    cudaError_t get(size_t bytes, void **out)
    {
        *out = nullptr;
        cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
        if (e == cudaSuccess)
            p.push_back(*out);
        return e;
    }
    // A device copy of `bytes` of host memory.
    cudaError_t put(const void *host, size_t bytes, void **out)
    {
        cudaError_t e = get(bytes, out);
        return e == cudaSuccess ? cudaMemcpy(*out, host, bytes, cudaMemcpyHostToDevice) : e;
    }
};


extern "C" nc_status nc_gpu_test_if(int form, int T, long long n, int c, long long inner, const float *threshold,
                                    int n_threshold, float v0_fraction, int reset_zero, int fire_gt,
                                    const float *bias, const float *in, long long in_step, float *out,
                                    long long out_step, nc_error *err)
{
    const char *where = form == NC_GPU_TEST_IF_BF16      ? "gpu bf16 IF test"
                        : form == NC_GPU_TEST_IF_COUNTS8 ? "gpu uint8-count IF test"
                                                         : "gpu IF test";
    long long total = n * c * inner;
    size_t in_n = (size_t)((T - 1) * in_step + total), out_n = (size_t)((T - 1) * out_step + total);
    dev_buffers d;
    float *dth, *db = nullptr, *din, *dout;
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, d.put(threshold, (size_t)n_threshold * 4, (void **)&dth));
    NC_CUDA_TRY(err, where, d.put(in, in_n * 4, (void **)&din));
    NC_CUDA_TRY(err, where, d.get(out_n * 4, (void **)&dout));
    if (bias) {
        NC_CUDA_TRY(err, where, d.put(bias, (size_t)c * 4, (void **)&db));
    }
    if (form == NC_GPU_TEST_IF_COUNTS8) {
        uint8_t *dcounts8;
        std::vector<uint8_t> counts(out_n);
        NC_CUDA_TRY(err, where, d.get(out_n, (void **)&dcounts8));
        NC_CUDA_TRY(err, where, cudaMemset(dcounts8, 0xff, out_n)); /* poison: every output must be written */
        nc_if_io io = {din, nullptr, nullptr, nullptr, nullptr, nullptr, dcounts8};
        NC_CUDA_TRY(err, where, nc_launch_if_io(0, T, total, c, inner, dth, n_threshold, v0_fraction, reset_zero,
                                                fire_gt, db, &io, in_step, out_step));
        NC_CUDA_TRY(err, where, cudaMemcpy(counts.data(), dcounts8, out_n, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < out_n; i++)
            out[i] = counts[i] == 0xff ? NAN : (float)counts[i];
        return NC_OK;
    }
    if (form == NC_GPU_TEST_IF_VALUES) {
        NC_CUDA_TRY(err, where, cudaMemset(dout, 0xff, out_n * 4)); /* poison: every output must be written */
        NC_CUDA_TRY(err, where, nc_launch_if(0, T, total, c, inner, dth, n_threshold, v0_fraction, reset_zero, fire_gt,
                                             db, din, in_step, dout, out_step));
    } else {
        nc_bf16 *din16, *dcounts;
        NC_CUDA_TRY(err, where, d.get(in_n * 2, (void **)&din16));
        NC_CUDA_TRY(err, where, d.get(out_n * 2, (void **)&dcounts));
        NC_CUDA_TRY(err, where, cudaMemset(dcounts, 0xff, out_n * 2)); /* poison: every output must be written */
        NC_CUDA_TRY(err, where, nc_launch_to_bf16(0, 1, (int64_t)in_n, din, nullptr, 1, 1, din16));
        nc_if_io io = {nullptr, din16, nullptr, dcounts};
        NC_CUDA_TRY(err, where, nc_launch_if_io(0, T, total, c, inner, dth, n_threshold, v0_fraction, reset_zero,
                                                fire_gt, db, &io, in_step, out_step));
        NC_CUDA_TRY(err, where, nc_launch_bf16_to_f32(0, (int64_t)out_n, dcounts, dout));
    }
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(out, dout, out_n * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}

extern "C" nc_status nc_gpu_test_exact_operands(long long pixels, int c, const float *threshold,
                                                 const float *current, float *counts, const float *x,
                                                 const float *scale, float *x_counts, int cout, int taps,
                                                 const float *w, const float *mul, float *w_parts, nc_error *err)
{
    const char *where = "gpu exact-operand test";
    size_t n = (size_t)(pixels * c), wn = (size_t)cout * taps * c;
    dev_buffers d;
    float *dth, *dcur, *dx, *dscale, *dw, *dmul, *dout;
    nc_bf16 *dcounts, *dxc, *dparts;
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, d.put(threshold, (size_t)c * 4, (void **)&dth));
    NC_CUDA_TRY(err, where, d.put(current, n * 4, (void **)&dcur));
    NC_CUDA_TRY(err, where, d.put(x, n * 4, (void **)&dx));
    NC_CUDA_TRY(err, where, d.put(scale, (size_t)c * 4, (void **)&dscale));
    NC_CUDA_TRY(err, where, d.put(w, wn * 4, (void **)&dw));
    NC_CUDA_TRY(err, where, d.put(mul, (size_t)c * 4, (void **)&dmul));
    NC_CUDA_TRY(err, where, d.get(n * 3 * 2, (void **)&dcounts));
    NC_CUDA_TRY(err, where, d.get(n * 3 * 2, (void **)&dxc));
    NC_CUDA_TRY(err, where, d.get(wn * 3 * 2, (void **)&dparts));
    NC_CUDA_TRY(err, where, d.get(std::max(n, wn) * 3 * 4, (void **)&dout));
    NC_CUDA_TRY(err, where, cudaMemset(dcounts, 0xff, n * 3 * 2)); /* poison: every output must be written */
    NC_CUDA_TRY(err, where, cudaMemset(dxc, 0xff, n * 3 * 2));
    NC_CUDA_TRY(err, where, cudaMemset(dparts, 0xff, wn * 3 * 2));
    // one IF step over channels-last pixels: counts, then their pairs
    nc_if_io io = {dcur, nullptr, nullptr, dcounts, nullptr, dcounts + n};
    NC_CUDA_TRY(err, where, nc_launch_if_io(0, 1, (int64_t)n, c, 1, dth, c, 0.5f, 0, 0, nullptr, &io, 0, (int64_t)n));
    NC_CUDA_TRY(err, where, nc_launch_bf16_to_f32(0, (int64_t)n * 3, dcounts, dout));
    NC_CUDA_TRY(err, where, cudaMemcpy(counts, dout, n * 3 * 4, cudaMemcpyDeviceToHost));
    // the conv's own conversion to counts and pairs
    NC_CUDA_TRY(err, where, nc_launch_to_counts_exact(0, pixels, c, dx, dscale, dxc, dxc + n));
    NC_CUDA_TRY(err, where, nc_launch_bf16_to_f32(0, (int64_t)n * 3, dxc, dout));
    NC_CUDA_TRY(err, where, cudaMemcpy(x_counts, dout, n * 3 * 4, cudaMemcpyDeviceToHost));
    // the weight parts: hi, then mid and lo side by side
    NC_CUDA_TRY(err, where, nc_launch_weight_parts_exact(0, cout, (int64_t)taps * c, dw, dmul, c, dparts, dparts + wn));
    NC_CUDA_TRY(err, where, nc_launch_bf16_to_f32(0, (int64_t)wn * 3, dparts, dout));
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(w_parts, dout, wn * 3 * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}

extern "C" nc_status nc_gpu_test_spike_conv(long long images, int c, int h, int w, int cout, const float *counts,
                                            const float *hi, const float *mid, float *out, nc_error *err)
{
    const char *where = "gpu spike conv test";
    nc_gwin win = {c, h, w, h, w, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
    char why[160];
    if (!nc_spike_conv_fits(&win, cout, 1, why, sizeof why))
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: %s", where, why);
    size_t xn = (size_t)images * h * w * c, wn = (size_t)cout * 9 * c, yn = (size_t)images * h * w * cout;
    dev_buffers d;
    float *dcounts, *dhi, *dmid, *dout;
    nc_bf16 *x16, *w16;
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, d.put(counts, xn * 4, (void **)&dcounts));
    NC_CUDA_TRY(err, where, d.put(hi, wn * 4, (void **)&dhi));
    NC_CUDA_TRY(err, where, d.put(mid, wn * 4, (void **)&dmid));
    NC_CUDA_TRY(err, where, d.get(xn * 2, (void **)&x16));
    NC_CUDA_TRY(err, where, d.get(wn * 2 * 2, (void **)&w16));
    NC_CUDA_TRY(err, where, d.get(yn * 4, (void **)&dout));
    NC_CUDA_TRY(err, where, cudaMemset(dout, 0xff, yn * 4)); /* poison: every output must be written */
    NC_CUDA_TRY(err, where, nc_launch_to_bf16(0, 1, (int64_t)xn, dcounts, nullptr, 1, 1, x16));
    NC_CUDA_TRY(err, where, nc_launch_to_bf16(0, 1, (int64_t)wn, dhi, nullptr, 1, 1, w16));
    NC_CUDA_TRY(err, where, nc_launch_to_bf16(0, 1, (int64_t)wn, dmid, nullptr, 1, 1, w16 + wn));
    NC_CUDA_TRY(err, where, nc_launch_spike_conv3x3(0, images, &win, cout, x16, w16, w16 + wn, dout));
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(out, dout, yn * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}

// Counts given as floats, as uint8 on the device (nc_launch_to_counts8 with a
// scale of 1: the engine's conversion of spike values).
static cudaError_t counts8_on_device(dev_buffers &d, const float *counts, size_t n, uint8_t **x8)
{
    float *dcounts, *one;
    const float host_one = 1.0f;
    cudaError_t e = d.put(counts, n * 4, (void **)&dcounts);
    if (e == cudaSuccess)
        e = d.put(&host_one, 4, (void **)&one);
    if (e == cudaSuccess)
        e = d.get(n, (void **)x8);
    if (e == cudaSuccess)
        e = nc_launch_to_counts8(0, (int64_t)n, 1, dcounts, one, 1, 1, *x8);
    return e;
}

extern "C" nc_status nc_gpu_test_spike_conv_fx16(long long images, int c, int h, int w, int cout,
                                                 const float *counts, const float *weight, float *step, float *out,
                                                 nc_error *err)
{
    const char *where = "gpu fixed-point spike conv test";
    nc_gwin win = {c, h, w, h, w, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
    if (!nc_spike_conv_fx16_fits(&win, cout, 1))
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: %d input channels, %d outputs, %dx%d: not a shape it takes",
                       where, c, cout, h, w);
    size_t xn = (size_t)images * h * w * c, wn = (size_t)cout * 9 * c, yn = (size_t)images * h * w * cout;
    dev_buffers d;
    float *dw, *dstep, *dout;
    uint8_t *x8, *db;
    int8_t *da;
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, counts8_on_device(d, counts, xn, &x8));
    NC_CUDA_TRY(err, where, d.put(weight, wn * 4, (void **)&dw));
    NC_CUDA_TRY(err, where, d.get(wn, (void **)&da));
    NC_CUDA_TRY(err, where, d.get(wn, (void **)&db));
    NC_CUDA_TRY(err, where, d.get((size_t)cout * 4, (void **)&dstep));
    NC_CUDA_TRY(err, where, d.get(yn * 4, (void **)&dout));
    NC_CUDA_TRY(err, where, cudaMemset(dout, 0xff, yn * 4)); /* poison: every output must be written */
    NC_CUDA_TRY(err, where, nc_launch_fx16_parts(0, cout, 9 * c, dw, nullptr, c, da, db, dstep));
    NC_CUDA_TRY(err, where, nc_launch_spike_conv3x3_fx16(0, images, &win, cout, x8, da, db, dstep, dout));
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(out, dout, yn * 4, cudaMemcpyDeviceToHost));
    NC_CUDA_TRY(err, where, cudaMemcpy(step, dstep, (size_t)cout * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}

extern "C" nc_status nc_gpu_test_spike_conv_if(int T, long long n, int c, int h, int w, int cout,
                                              const float *counts, const float *weight, const float *bias,
                                              const float *threshold, int n_threshold, float v0_fraction,
                                              int reset_zero, int fire_gt, int pool, int as_counts, float *step,
                                              float *out, nc_error *err)
{
    const char *where = "gpu spike conv + IF test";
    nc_gwin win = {c, h, w, h, w, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
    if (!nc_spike_conv_if_fits(&win, cout, pool))
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: %d input channels, %d outputs, %dx%d: not a shape it takes",
                       where, c, cout, h, w);
    size_t rows = (size_t)T * n, xn = rows * h * w * c, wn = (size_t)cout * 9 * c;
    size_t yn = rows * (pool ? (h / 2) * (w / 2) : h * w) * cout, elt = as_counts ? 1 : 4;
    dev_buffers d;
    float *dw, *dstep, *dth, *dbias = nullptr;
    uint8_t *x8, *db;
    int8_t *da;
    void *dout;
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, counts8_on_device(d, counts, xn, &x8));
    NC_CUDA_TRY(err, where, d.put(weight, wn * 4, (void **)&dw));
    NC_CUDA_TRY(err, where, d.put(threshold, (size_t)n_threshold * 4, (void **)&dth));
    if (bias)
        NC_CUDA_TRY(err, where, d.put(bias, (size_t)cout * 4, (void **)&dbias));
    NC_CUDA_TRY(err, where, d.get(wn, (void **)&da));
    NC_CUDA_TRY(err, where, d.get(wn, (void **)&db));
    NC_CUDA_TRY(err, where, d.get((size_t)cout * 4, (void **)&dstep));
    NC_CUDA_TRY(err, where, d.get(yn * elt, &dout));
    NC_CUDA_TRY(err, where, cudaMemset(dout, 0xff, yn * elt)); /* poison: every output must be written */
    NC_CUDA_TRY(err, where, nc_launch_fx16_parts(0, cout, 9 * c, dw, nullptr, c, da, db, dstep));
    nc_conv_if p = {T, n, dth, n_threshold, v0_fraction, reset_zero, fire_gt, dbias, pool, as_counts, dout};
    NC_CUDA_TRY(err, where, nc_launch_spike_conv3x3_fx16_if(0, &win, cout, &p, x8, da, db, dstep));
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(step, dstep, (size_t)cout * 4, cudaMemcpyDeviceToHost));
    if (!as_counts) {
        NC_CUDA_TRY(err, where, cudaMemcpy(out, dout, yn * 4, cudaMemcpyDeviceToHost));
        return NC_OK;
    }
    std::vector<uint8_t> host(yn);
    NC_CUDA_TRY(err, where, cudaMemcpy(host.data(), dout, yn, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < yn; i++)
        out[i] = host[i] == 0xff ? -1.0f : (float)host[i]; /* -1: never written */
    return NC_OK;
}

extern "C" nc_status nc_gpu_test_pool_nhwc(int max, long long rows, int c, int h, int w, const int kernel[2],
                                           const int stride[2], const int pad[4], const int dilation[2], int ceil_mode,
                                           int count_include_pad, const float *in, float *out, nc_error *err)
{
    const char *where = max ? "gpu channels-last maxpool test" : "gpu channels-last avgpool test";
    nc_gwin g = {c, h, w, 0, 0, kernel[0], kernel[1], stride[0], stride[1], dilation[0], dilation[1],
                 pad[0], pad[1], pad[2], pad[3]};
    g.oh = nc_window_out_size(h, g.kh, g.sh, g.pt, g.pb, g.dh, ceil_mode);
    g.ow = nc_window_out_size(w, g.kw, g.sw, g.pl, g.pr, g.dw, ceil_mode);
    if (rows < 1 || g.oh < 1 || g.ow < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: no window fits", where);
    size_t in_n = (size_t)(rows * c * h * w), out_n = (size_t)(rows * c * g.oh * g.ow);
    dev_buffers d;
    float *din, *dnhwc, *dpool, *dout;
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, d.put(in, in_n * 4, (void **)&din));
    NC_CUDA_TRY(err, where, d.get(in_n * 4, (void **)&dnhwc));
    NC_CUDA_TRY(err, where, d.get(out_n * 4, (void **)&dpool));
    NC_CUDA_TRY(err, where, d.get(out_n * 4, (void **)&dout));
    NC_CUDA_TRY(err, where, cudaMemset(dpool, 0xff, out_n * 4)); /* poison: every output must be written */
    NC_CUDA_TRY(err, where, nc_launch_transpose_rows(0, rows, c, (int64_t)h * w, din, dnhwc));
    NC_CUDA_TRY(err, where, max ? nc_launch_maxpool_nhwc(0, &g, rows, dnhwc, dpool)
                                : nc_launch_avgpool_nhwc(0, &g, count_include_pad, rows, dnhwc, dpool));
    NC_CUDA_TRY(err, where, nc_launch_transpose_rows(0, rows, (int64_t)g.oh * g.ow, c, dpool, dout));
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(out, dout, out_n * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}

extern "C" nc_status nc_gpu_test_prespike_max(int nhwc, int T, long long n, int c, int h, int w, const int kernel[2],
                                              const int stride[2], const int pad[4], const int dilation[2],
                                              int ceil_mode, const float *bias, const float *in, float *out,
                                              nc_error *err)
{
    const char *where = "gpu pre-spike max pool test";
    nc_gwin g = {c, h, w, 0, 0, kernel[0], kernel[1], stride[0], stride[1], dilation[0], dilation[1],
                 pad[0], pad[1], pad[2], pad[3]};
    g.oh = nc_window_out_size(h, g.kh, g.sh, g.pt, g.pb, g.dh, ceil_mode);
    g.ow = nc_window_out_size(w, g.kw, g.sw, g.pl, g.pr, g.dw, ceil_mode);
    if (T < 1 || n < 1 || g.oh < 1 || g.ow < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: no window fits", where);
    if (!nc_prespike_max_fits(&g))
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: a %dx%d window is more than the kernel's %d taps", where, g.kh,
                       g.kw, kPrespikeTaps);
    int64_t rows = (int64_t)T * n;
    size_t in_n = (size_t)(rows * c * h * w), out_n = (size_t)(rows * c * g.oh * g.ow);
    dev_buffers d;
    float *din, *dlaid, *dpool, *dout, *dbias = nullptr;
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, d.put(in, in_n * 4, (void **)&din));
    if (bias)
        NC_CUDA_TRY(err, where, d.put(bias, (size_t)c * 4, (void **)&dbias));
    NC_CUDA_TRY(err, where, d.get(in_n * 4, (void **)&dlaid));
    NC_CUDA_TRY(err, where, d.get(out_n * 4, (void **)&dpool));
    NC_CUDA_TRY(err, where, d.get(out_n * 4, (void **)&dout));
    NC_CUDA_TRY(err, where, cudaMemset(dpool, 0xff, out_n * 4)); /* poison: every output must be written */
    if (nhwc)
        NC_CUDA_TRY(err, where, nc_launch_transpose_rows(0, rows, c, (int64_t)h * w, din, dlaid));
    NC_CUDA_TRY(err, where, nc_launch_prespike_max(0, &g, nhwc, T, n, dbias, nhwc ? dlaid : din, dpool));
    if (nhwc)
        NC_CUDA_TRY(err, where, nc_launch_transpose_rows(0, rows, (int64_t)g.oh * g.ow, c, dpool, dout));
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(out, nhwc ? dout : dpool, out_n * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}

extern "C" nc_status nc_gpu_test_gemm(nc_gpu_precision p, long long rows, int fin, int fout, const float *in,
                                      const float *weight, const float *spike_scale, float *out, nc_error *err)
{
    const char *where = "gpu GEMM test";
    if ((unsigned)p >= NC_GPU_PRECISION_COUNT)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: unknown precision", where);
    dev_buffers d;
    float *din, *dw, *dout, *dmul = nullptr, *dop = nullptr, *dth = nullptr;
    nc_bf16 *parts[3] = {}, *conv = nullptr;
    size_t nin = (size_t)(rows * fin), nw = (size_t)fin * fout, nout = (size_t)(rows * fout);
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, d.put(in, nin * 4, (void **)&din));
    NC_CUDA_TRY(err, where, d.put(weight, nw * 4, (void **)&dw));
    NC_CUDA_TRY(err, where, d.get(nout * 4, (void **)&dout));
    NC_CUDA_TRY(err, where, cudaMemset(dout, 0xff, nout * 4));
    gemm_mode m = mode_for(p, spike_scale != nullptr);
    const void *wp[3] = {dw, dw, dw};
    const void *op = din;
    if (m.kind == NC_GEMM_BF16) {
        for (int k = 0; k < m.parts; k++)
            NC_CUDA_TRY(err, where, d.get(nw * 2, (void **)&parts[k]));
        NC_CUDA_TRY(err, where, d.get(nin * 2, (void **)&conv));
        if (m.spike) {
            NC_CUDA_TRY(err, where, d.put(spike_scale, (size_t)fin * 4, (void **)&dth));
            NC_CUDA_TRY(err, where, d.get((size_t)fin * 4, (void **)&dmul));
            NC_CUDA_TRY(err, where, d.get((size_t)fin * 4, (void **)&dop));
            NC_CUDA_TRY(err, where, nc_launch_scale(0, fin, dth, fin, 1.0f, dmul));
            NC_CUDA_TRY(err, where, nc_launch_inv_scale(0, fin, dth, fin, 1.0f, dop));
        }
        NC_CUDA_TRY(err, where, nc_launch_weight_parts(0, fout, fin, dw, dmul, fout, fin, 1, m.parts, parts));
        NC_CUDA_TRY(err, where, nc_launch_to_bf16(0, rows, fin, din, dop, fin, 1, conv));
        for (int k = 0; k < m.parts; k++)
            wp[k] = parts[m.parts - 1 - k];
        op = conv;
    }
    cublasHandle_t h = nullptr;
    NC_CUBLAS_TRY(err, where, cublasCreate(&h));
    nc_status s = NC_OK;
    cublasStatus_t bs = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    if (bs != CUBLAS_STATUS_SUCCESS)
        s = nc_gpu_fail_cublas(err, where, "cublasSetMathMode", bs);
    if (s == NC_OK)
        s = dense_gemm(h, m, rows, fin, fout, op, wp, dout, where, err);
    cublasDestroy(h);
    if (s != NC_OK)
        return s;
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(out, dout, nout * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}

extern "C" nc_status nc_gpu_test_poisson(unsigned long long seed, int T, long long n, const float *in, float *out,
                                         nc_error *err)
{
    const char *where = "gpu Poisson test";
    dev_buffers d;
    float *din, *dout;
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, d.put(in, (size_t)n * 4, (void **)&din));
    NC_CUDA_TRY(err, where, d.get((size_t)(T * n) * 4, (void **)&dout));
    NC_CUDA_TRY(err, where, nc_launch_poisson(0, seed, T, n, din, dout));
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(out, dout, (size_t)(T * n) * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}

extern "C" nc_status nc_gpu_test_transpose_bf16(long long rows, long long a, long long b, const float *in,
                                                const float *base, float *narrowed, float *widened, nc_error *err)
{
    const char *where = "gpu bf16 transpose test";
    if (rows < 1 || a < 1 || b < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: empty shape", where);
    size_t n = (size_t)(rows * a * b);
    dev_buffers d;
    float *din, *dsum;
    nc_bf16 *d16;
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, d.put(in, n * 4, (void **)&din));
    NC_CUDA_TRY(err, where, d.put(base, n * 4, (void **)&dsum));
    NC_CUDA_TRY(err, where, d.get(n * 2, (void **)&d16));
    NC_CUDA_TRY(err, where, cudaMemset(d16, 0xff, n * 2)); /* poison: every output must be written */
    NC_CUDA_TRY(err, where, nc_launch_transpose_rows_to_bf16(0, rows, a, b, din, d16));
    NC_CUDA_TRY(err, where, nc_launch_transpose_rows_add_bf16(0, rows, b, a, d16, 1, dsum));
    /* the bf16 values themselves, widened without a transpose: [rows, b, a] */
    NC_CUDA_TRY(err, where, nc_launch_transpose_rows_add_bf16(0, rows * b, a, 1, d16, 0, din));
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(narrowed, din, n * 4, cudaMemcpyDeviceToHost));
    NC_CUDA_TRY(err, where, cudaMemcpy(widened, dsum, n * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}

extern "C" nc_status nc_gpu_test_step_sums(int T, long long n, long long step, const float *in, int nonzero,
                                           float *out, nc_error *err)
{
    const char *where = "gpu step sums test";
    if (T < 1 || n < 1 || step < 0)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: bad shape", where);
    size_t in_n = (size_t)((T - 1) * step + n);
    dev_buffers d;
    float *din, *dout;
    NC_CUDA_TRY(err, where, cudaSetDevice(0));
    NC_CUDA_TRY(err, where, d.put(in, in_n * 4, (void **)&din));
    NC_CUDA_TRY(err, where, d.get((size_t)n * 4, (void **)&dout));
    NC_CUDA_TRY(err, where, nc_launch_step_sums(0, T, n, step, din, nonzero, dout));
    NC_CUDA_TRY(err, where, cudaDeviceSynchronize());
    NC_CUDA_TRY(err, where, cudaMemcpy(out, dout, (size_t)n * 4, cudaMemcpyDeviceToHost));
    return NC_OK;
}
