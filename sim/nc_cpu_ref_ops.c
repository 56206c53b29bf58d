/* nc_cpu_ref_ops.c — the references of the fast CPU kernels: textbook loops
 * in plain C (double sums where a kernel sums), built once, with the
 * baseline instruction set.  Every build of nc_cpu_ops.c and every CUDA
 * kernel is tested against these (see nc_cpu_ops.h). */
#include "nc_cpu_ops.h"

#include <math.h>

void nc_ref_conv2d(const nc_window *g, int cout, int groups, int64_t rows, const float *in,
                   const float *weight, const float *bias, float *out)
{
    int cg = g->c / groups, mg = cout / groups, kh = g->kernel[0], kw = g->kernel[1];
    for (int64_t r = 0; r < rows; r++)
        for (int m = 0; m < cout; m++)
            for (int oy = 0; oy < g->oh; oy++)
                for (int ox = 0; ox < g->ow; ox++) {
                    double acc = bias ? bias[m] : 0.0;
                    int grp = m / mg;
                    for (int ci = 0; ci < cg; ci++)
                        for (int ki = 0; ki < kh; ki++)
                            for (int kj = 0; kj < kw; kj++) {
                                int iy = oy * g->stride[0] - g->pad[0] + ki * g->dilation[0];
                                int ix = ox * g->stride[1] - g->pad[1] + kj * g->dilation[1];
                                if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w)
                                    continue;
                                double x = in[((r * g->c + grp * cg + ci) * g->h + iy) * g->w + ix];
                                double wv = weight[(((int64_t)m * cg + ci) * kh + ki) * kw + kj];
                                acc += x * wv;
                            }
                    out[((r * cout + m) * g->oh + oy) * g->ow + ox] = (float)acc;
                }
}

void nc_ref_dense(int64_t rows, int fin, int fout, const float *in, const float *weight,
                  const float *bias, float *out)
{
    for (int64_t r = 0; r < rows; r++)
        for (int o = 0; o < fout; o++) {
            double acc = bias ? bias[o] : 0.0;
            for (int i = 0; i < fin; i++)
                acc += (double)in[r * fin + i] * weight[(int64_t)o * fin + i];
            out[r * fout + o] = (float)acc;
        }
}

void nc_ref_avgpool(const nc_window *g, int count_include_pad, int64_t rows, const float *in,
                    float *out)
{
    for (int64_t pl = 0; pl < rows * g->c; pl++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                double sum = 0.0;
                int count = 0;
                for (int ki = 0; ki < g->kernel[0]; ki++)
                    for (int kj = 0; kj < g->kernel[1]; kj++) {
                        int iy = oy * g->stride[0] - g->pad[0] + ki * g->dilation[0];
                        int ix = ox * g->stride[1] - g->pad[1] + kj * g->dilation[1];
                        int real = iy >= 0 && iy < g->h && ix >= 0 && ix < g->w;
                        int padded = iy < g->h + g->pad[2] && ix < g->w + g->pad[3];
                        if (real)
                            sum += in[(pl * g->h + iy) * g->w + ix];
                        count += count_include_pad ? padded : real;
                    }
                out[(pl * g->oh + oy) * g->ow + ox] = count ? (float)(sum / count) : 0.0f;
            }
}

void nc_ref_maxpool(const nc_window *g, int64_t rows, const float *in, float *out)
{
    for (int64_t pl = 0; pl < rows * g->c; pl++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                float best = -INFINITY;
                int any = 0;
                for (int ki = 0; ki < g->kernel[0]; ki++)
                    for (int kj = 0; kj < g->kernel[1]; kj++) {
                        int iy = oy * g->stride[0] - g->pad[0] + ki * g->dilation[0];
                        int ix = ox * g->stride[1] - g->pad[1] + kj * g->dilation[1];
                        if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w)
                            continue;
                        float v = in[(pl * g->h + iy) * g->w + ix];
                        if (!any || v > best)
                            best = v;
                        any = 1;
                    }
                out[(pl * g->oh + oy) * g->ow + ox] = any ? best : 0.0f;
            }
}

void nc_ref_if_run(const nc_if_params *p, int T, int64_t n, int c, int64_t inner, const float *in,
                   int64_t in_step, float *out, int64_t out_step, float *v)
{
    int64_t total = n * c * inner;
    for (int64_t e = 0; e < total; e++)
        v[e] = p->v0_fraction * p->threshold[p->n_threshold == c ? (e / inner) % c : 0];
    for (int t = 0; t < T; t++)
        for (int64_t e = 0; e < total; e++) {
            float th = p->threshold[p->n_threshold == c ? (e / inner) % c : 0];
            float m = v[e] + in[t * in_step + e];
            int fire = p->compare == NC_FIRE_GE ? m >= th : m > th;
            out[t * out_step + e] = fire ? th : 0.0f;
            if (fire)
                v[e] = p->reset == NC_RESET_SUBTRACT ? m - th : 0.0f;
            else
                v[e] = m;
        }
}

void nc_ref_step_sums(int T, int64_t n, int64_t step, const float *in, int nonzero, float *out)
{
    for (int64_t j = 0; j < n; j++) {
        float sum = 0.0f;
        for (int t = 0; t < T; t++) {
            float x = in[t * step + j];
            sum += nonzero ? (x != 0.0f) : x;
        }
        out[j] = sum;
    }
}
