/* nc_cpu_dispatch.c — the public fast kernels of nc_cpu_ops.h: each calls
 * the same kernel of the build that fits this CPU (nc_cpu_kernels.h).
 *
 * The choice is made once, at the first call, from what the CPU reports
 * (cpuid, and whether the OS saves the wider registers): AVX-512 F/BW/DQ/VL,
 * else AVX2 + FMA, else the plain x86-64 build.  NC_CPU_PATH=avx512|avx2|
 * baseline asks for one build (the tests run every build this way); a build
 * the CPU cannot run is never taken, and nc_cpu_path_note() says why.
 * Under valgrind, which hides AVX-512 from cpuid, the AVX2 build runs. */
#include "nc_cpu_kernels.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Best first. */
static const nc_cpu_kernels *const cpu_builds[] = {
#if NC_CPU_X86_PATHS
    &nc_cpu_kernels_avx512,
    &nc_cpu_kernels_avx2,
#endif
    &nc_cpu_kernels_baseline,
};
#define N_CPU_BUILDS (sizeof cpu_builds / sizeof cpu_builds[0])

static const nc_cpu_kernels *active_build;
static char active_note[200];
static char requested[16]; /* nc_cpu_path_request before the choice */
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

int nc_cpu_path_supported(const char *isa)
{
#if NC_CPU_X86_PATHS
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (strcmp(isa, "avx512") == 0)
        return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    if (strcmp(isa, "avx2") == 0)
        return avx2;
#endif
    return strcmp(isa, "baseline") == 0;
}

static const nc_cpu_kernels *build_named(const char *isa)
{
    for (size_t i = 0; i < N_CPU_BUILDS; i++)
        if (strcmp(cpu_builds[i]->isa, isa) == 0)
            return cpu_builds[i];
    return NULL;
}

static void choose_build(void)
{
    for (size_t i = 0; i < N_CPU_BUILDS && !active_build; i++)
        if (nc_cpu_path_supported(cpu_builds[i]->isa))
            active_build = cpu_builds[i];
    const char *wanted = requested[0] ? requested : getenv("NC_CPU_PATH");
    if (!wanted || !*wanted)
        return;
    const nc_cpu_kernels *b = build_named(wanted);
    if (!b)
        snprintf(active_note, sizeof active_note,
                 "NC_CPU_PATH=%.40s is not a CPU path of this build (avx512, avx2, baseline): using %s", wanted,
                 active_build->isa);
    else if (!nc_cpu_path_supported(wanted))
        snprintf(active_note, sizeof active_note, "NC_CPU_PATH=%s: this CPU cannot run it; using %s", wanted,
                 active_build->isa);
    else
        active_build = b;
}

const nc_cpu_kernels *nc_cpu_kernels_active(void)
{
    pthread_once(&choose_once, choose_build);
    return active_build;
}

const char *nc_cpu_path(void) { return nc_cpu_kernels_active()->isa; }

int nc_cpu_path_request(const char *isa, char *why, size_t why_size)
{
    if (!active_build) /* not chosen yet: the request decides (a single-threaded start-up) */
        snprintf(requested, sizeof requested, "%s", isa);
    const nc_cpu_kernels *k = nc_cpu_kernels_active();
    if (strcmp(k->isa, isa) == 0)
        return 0;
    if (*active_note)
        snprintf(why, why_size, "%s", active_note);
    else
        snprintf(why, why_size, "the %s build of the CPU kernels already runs in this process", k->isa);
    return -1;
}

const char *nc_cpu_path_note(void)
{
    nc_cpu_kernels_active();
    return active_note;
}

/* ---- the kernels of nc_cpu_ops.h, through the chosen build -------------- */

size_t nc_conv2d_work_floats(const nc_window *g, int cout, int groups, int64_t rows)
{
    return nc_cpu_kernels_active()->conv2d_work_floats(g, cout, groups, rows);
}

void nc_conv2d(const nc_window *g, int cout, int groups, int64_t rows, const float *in, const float *weight,
               const float *bias, float *out, float *work, size_t work_floats)
{
    nc_cpu_kernels_active()->conv2d(g, cout, groups, rows, in, weight, bias, out, work, work_floats);
}

int64_t nc_count_nonzero(int64_t n, const float *x)
{
    return nc_cpu_kernels_active()->count_nonzero(n, x);
}

void nc_conv2d_events_weight(const nc_window *g, int cout, const float *weight, float *wt)
{
    nc_cpu_kernels_active()->conv2d_events_weight(g, cout, weight, wt);
}

size_t nc_conv2d_events_work_floats(const nc_window *g, int cout)
{
    return nc_cpu_kernels_active()->conv2d_events_work_floats(g, cout);
}

void nc_conv2d_events(const nc_window *g, int cout, int64_t rows, const float *in, const float *wt,
                      const float *bias, float *out, float *work)
{
    nc_cpu_kernels_active()->conv2d_events(g, cout, rows, in, wt, bias, out, work);
}

void nc_dense_events_weight(int fin, int fout, const float *weight, float *wt)
{
    nc_cpu_kernels_active()->dense_events_weight(fin, fout, weight, wt);
}

size_t nc_dense_events_work_floats(int fin)
{
    return nc_cpu_kernels_active()->dense_events_work_floats(fin);
}

void nc_dense_events(int64_t rows, int fin, int fout, const float *in, const float *wt, const float *bias,
                     float *out, float *work)
{
    nc_cpu_kernels_active()->dense_events(rows, fin, fout, in, wt, bias, out, work);
}

void nc_dense(int64_t rows, int fin, int fout, const float *in, const float *weight, const float *bias,
              float *out)
{
    nc_cpu_kernels_active()->dense(rows, fin, fout, in, weight, bias, out);
}

void nc_dense_cols(int64_t rows, int fin, int fout, int o0, int o1, const float *in, const float *weight,
                   const float *bias, float *out)
{
    nc_cpu_kernels_active()->dense_cols(rows, fin, fout, o0, o1, in, weight, bias, out);
}

void nc_avgpool(const nc_window *g, int count_include_pad, int64_t rows, const float *in, float *out)
{
    nc_cpu_kernels_active()->avgpool(g, count_include_pad, rows, in, out);
}

void nc_maxpool(const nc_window *g, int64_t rows, const float *in, float *out)
{
    nc_cpu_kernels_active()->maxpool(g, rows, in, out);
}

void nc_maxpool_running(const nc_window *g, int T, int64_t n, const float *in, int64_t in_step, float *out,
                        int64_t out_step, float *work)
{
    nc_cpu_kernels_active()->maxpool_running(g, T, n, in, in_step, out, out_step, work);
}

size_t nc_conv2d_events_maxpool_work_floats(const nc_window *conv, int cout, const nc_window *pool)
{
    return nc_cpu_kernels_active()->conv2d_events_maxpool_work_floats(conv, cout, pool);
}

void nc_conv2d_events_maxpool(const nc_window *conv, int cout, const nc_window *pool, int T, int64_t n,
                              const float *in, int64_t in_step, const float *wt, const float *bias,
                              float *out, int64_t out_step, float *work)
{
    nc_cpu_kernels_active()->conv2d_events_maxpool(conv, cout, pool, T, n, in, in_step, wt, bias, out,
                          out_step, work);
}

void nc_maxpool_gated(const nc_window *g, int T, int64_t n, const float *in, int64_t in_step, float *out,
                      int64_t out_step, int *counts)
{
    nc_cpu_kernels_active()->maxpool_gated(g, T, n, in, in_step, out, out_step, counts);
}

void nc_global_avgpool(int64_t rows, int c, int64_t hw, const float *in, float *out)
{
    nc_cpu_kernels_active()->global_avgpool(rows, c, hw, in, out);
}

void nc_affine(int64_t rows, int c, int64_t inner, const float *scale, const float *shift, const float *in,
               float *out)
{
    nc_cpu_kernels_active()->affine(rows, c, inner, scale, shift, in, out);
}

void nc_scale(int64_t rows, int64_t numel, const float *w, int64_t n_w, const float *in, float *out)
{
    nc_cpu_kernels_active()->scale(rows, numel, w, n_w, in, out);
}

void nc_add(int64_t n, const float *a, const float *b, float *out)
{
    nc_cpu_kernels_active()->add(n, a, b, out);
}

void nc_concat(int64_t rows, int n_inputs, const float *const *in, const int64_t *per_row, float *out)
{
    nc_cpu_kernels_active()->concat(rows, n_inputs, in, per_row, out);
}

void nc_relu(int64_t n, const float *in, float *out)
{
    nc_cpu_kernels_active()->relu(n, in, out);
}

void nc_clip(int64_t n, float lo, float hi, const float *in, float *out)
{
    nc_cpu_kernels_active()->clip(n, lo, hi, in, out);
}

void nc_qcfs(int64_t rows, int c, int64_t inner, const float *lambda, int n_lambda, int levels, float shift,
             const float *in, float *out)
{
    nc_cpu_kernels_active()->qcfs(rows, c, inner, lambda, n_lambda, levels, shift, in, out);
}

void nc_if_run(const nc_if_params *p, int T, int64_t n, int c, int64_t inner, const float *in,
               int64_t in_step, float *out, int64_t out_step, float *v_final)
{
    nc_cpu_kernels_active()->if_run(p, T, n, c, inner, in, in_step, out, out_step, v_final);
}

void nc_if_state_init(const nc_if_params *p, int64_t n, int c, int64_t inner, float *v)
{
    nc_cpu_kernels_active()->if_state_init(p, n, c, inner, v);
}

void nc_if_run_state(const nc_if_params *p, int T, int64_t n, int c, int64_t inner, const float *in,
                     int64_t in_step, float *out, int64_t out_step, float *v)
{
    nc_cpu_kernels_active()->if_run_state(p, T, n, c, inner, in, in_step, out, out_step, v);
}

void nc_poisson_encode(uint64_t seed, int first_step, int T, int64_t n, const float *in, float *out)
{
    nc_cpu_kernels_active()->poisson_encode(seed, first_step, T, n, in, out);
}
