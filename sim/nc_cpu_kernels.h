/* nc_cpu_kernels.h — one instruction set's build of the fast CPU kernels.
 *
 * sim/nc_cpu_ops.c is compiled once per instruction set (meson: plain x86-64,
 * AVX2 + FMA, AVX-512), each build exporting one table of its kernels.  The
 * public functions of nc_cpu_ops.h (sim/nc_cpu_dispatch.c) call through the
 * table that fits the CPU the program runs on, chosen once at the first call:
 * the default binary runs on any x86-64 machine and still uses the vector
 * units of the one it is on.  The references (nc_ref_*) and the window
 * geometry are plain C outside the tables: they are the truth every build of
 * the kernels is tested against. */
#ifndef NC_CPU_KERNELS_H
#define NC_CPU_KERNELS_H

#include "nc_cpu_ops.h"

/* Members: the functions of nc_cpu_ops.h of the same name without "nc_". */
typedef struct nc_cpu_kernels {
    const char *isa; /* "avx512", "avx2" or "baseline" */
    size_t (*conv2d_work_floats)(const nc_window *g, int cout, int groups, int64_t rows);
    void (*conv2d)(const nc_window *g, int cout, int groups, int64_t rows, const float *in,
                   const float *weight, const float *bias, float *out, float *work, size_t work_floats);
    int64_t (*count_nonzero)(int64_t n, const float *x);
    void (*conv2d_events_weight)(const nc_window *g, int cout, const float *weight, float *wt);
    size_t (*conv2d_events_work_floats)(const nc_window *g, int cout);
    void (*conv2d_events)(const nc_window *g, int cout, int64_t rows, const float *in, const float *wt,
                          const float *bias, float *out, float *work);
    void (*dense_events_weight)(int fin, int fout, const float *weight, float *wt);
    size_t (*dense_events_work_floats)(int fin);
    void (*dense_events)(int64_t rows, int fin, int fout, const float *in, const float *wt, const float *bias,
                         float *out, float *work);
    void (*dense)(int64_t rows, int fin, int fout, const float *in, const float *weight, const float *bias,
                  float *out);
    void (*dense_cols)(int64_t rows, int fin, int fout, int o0, int o1, const float *in, const float *weight,
                       const float *bias, float *out);
    void (*avgpool)(const nc_window *g, int count_include_pad, int64_t rows, const float *in, float *out);
    void (*maxpool)(const nc_window *g, int64_t rows, const float *in, float *out);
    void (*maxpool_running)(const nc_window *g, int T, int64_t n, const float *in, int64_t in_step,
                            float *out, int64_t out_step, float *work);
    size_t (*conv2d_events_maxpool_work_floats)(const nc_window *conv, int cout, const nc_window *pool);
    void (*conv2d_events_maxpool)(const nc_window *conv, int cout, const nc_window *pool, int T, int64_t n,
                                  const float *in, int64_t in_step, const float *wt, const float *bias,
                                  float *out, int64_t out_step, float *work);
    void (*maxpool_gated)(const nc_window *g, int T, int64_t n, const float *in, int64_t in_step, float *out,
                          int64_t out_step, int *counts);
    void (*global_avgpool)(int64_t rows, int c, int64_t hw, const float *in, float *out);
    void (*affine)(int64_t rows, int c, int64_t inner, const float *scale, const float *shift,
                   const float *in, float *out);
    void (*scale)(int64_t rows, int64_t numel, const float *w, int64_t n_w, const float *in, float *out);
    void (*add)(int64_t n, const float *a, const float *b, float *out);
    void (*concat)(int64_t rows, int n_inputs, const float *const *in, const int64_t *per_row, float *out);
    void (*relu)(int64_t n, const float *in, float *out);
    void (*clip)(int64_t n, float lo, float hi, const float *in, float *out);
    void (*qcfs)(int64_t rows, int c, int64_t inner, const float *lambda, int n_lambda, int levels,
                 float shift, const float *in, float *out);
    void (*if_run)(const nc_if_params *p, int T, int64_t n, int c, int64_t inner, const float *in,
                   int64_t in_step, float *out, int64_t out_step, float *v_final);
    void (*if_state_init)(const nc_if_params *p, int64_t n, int c, int64_t inner, float *v);
    void (*if_run_state)(const nc_if_params *p, int T, int64_t n, int c, int64_t inner, const float *in,
                         int64_t in_step, float *out, int64_t out_step, float *v);
    void (*poisson_encode)(uint64_t seed, int first_step, int T, int64_t n, const float *in, float *out);
} nc_cpu_kernels;

/* The builds (those of another architecture than x86-64 have baseline only). */
extern const nc_cpu_kernels nc_cpu_kernels_baseline;
extern const nc_cpu_kernels nc_cpu_kernels_avx2;
extern const nc_cpu_kernels nc_cpu_kernels_avx512;

/* The table in use (chosen at the first call; see nc_cpu_path in nc_cpu_ops.h). */
const nc_cpu_kernels *nc_cpu_kernels_active(void);

#endif
