/* test_gpu_common.h — helpers shared by the GPU tests (test_gpu_*.c): the
 * skip rule, random data, small hand-built nets, comparisons that print the
 * first mismatches and the max error (llm.c style), and an observer that
 * keeps every node's output.
 *
 * Without a usable GPU (or without CUDA in the build) every test prints
 *   ok N - name # SKIP no CUDA device: <reason>
 * and the program passes, as in CI. */
#ifndef TEST_GPU_COMMON_H
#define TEST_GPU_COMMON_H

#include "nc_test.h"
#include "nc_test_util.h"

#include "nc_config.h"

#include "../sim/nc_cpu_ops.h"
#include "../sim/nc_engine.h"
#if NC_HAVE_CUDA
#include "../gpu/nc_gpu.h"
#endif

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- skipping ------------------------------------------------------------- */

static const char *gpu_skip_reason(void)
{
    static char buf[700];
#if !NC_HAVE_CUDA
    snprintf(buf, sizeof buf, "no CUDA device: this build has no CUDA engine (configured without nvcc or with -Dcuda=disabled)");
    return buf;
#else
    nc_gpu_info info;
    nc_gpu_query(&info);
    if (info.available) {
        printf("# GPU: %s, %.1f GiB, %d SMs, compute %d.%d, driver %d, runtime %d\n", info.name,
               (double)info.total_memory / (1 << 30), info.sm_count, info.cc_major, info.cc_minor,
               info.driver_version, info.runtime_version);
        return NULL;
    }
    snprintf(buf, sizeof buf, "no CUDA device: %s", info.reason);
    return buf;
#endif
}

/* NC_GPU_TESTS="name name ...": run only these tests of the program (the
 * others report a skip that says so) — for compute-sanitizer runs that
 * cannot take the whole program (tools/gpu-run.sh). */
static const char *gpu_not_selected(const char *name)
{
    const char *only = getenv("NC_GPU_TESTS");
    if (!only || !*only)
        return NULL;
    size_t n = strlen(name);
    for (const char *p = strstr(only, name); p; p = strstr(p + 1, name))
        if ((p == only || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0))
            return NULL;
    return "not selected by NC_GPU_TESTS";
}

/* Runs fn, or reports it skipped. */
#define GPU_RUN(fn, skip)                                                                         \
    do {                                                                                          \
        const char *nc_why_ = (skip) ? (skip) : gpu_not_selected(#fn);                            \
        if (nc_why_)                                                                              \
            nc_test_report(#fn, 0, nc_why_);                                                      \
        else                                                                                      \
            NC_RUN(fn);                                                                           \
    } while (0)

/* ---- comparisons ------------------------------------------------------------ */

/* Elementwise |got − ref| ≤ atol + rtol·|ref|: prints the first 5 mismatches,
 * the max error and the relative Frobenius error; returns the mismatches
 * (NaN counts as a mismatch). */
static inline int64_t compare_report(const char *what, const float *got, const float *ref, int64_t n, double atol,
                              double rtol)
{
    int64_t bad = 0;
    double max_err = 0, num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (e != e)
            e = INFINITY;
        max_err = e > max_err ? e : max_err;
        num += e * e;
        den += (double)ref[i] * ref[i];
        if (!(e <= atol + rtol * fabs(ref[i])) && bad++ < 5)
            printf("#   %s: [%lld] got %.9g, expected %.9g\n", what, (long long)i, got[i], ref[i]);
    }
    printf("# %s: %lld values, max |error| %.3g, relative error %.3g, %lld beyond %.0e + %.0e·|ref|\n", what,
           (long long)n, max_err, den > 0 ? sqrt(num / den) : sqrt(num), (long long)bad, atol, rtol);
    return bad;
}

/* Relative Frobenius error ‖got − ref‖ / ‖ref‖ (NaN → infinity). */
static inline double rel_error(const float *got, const float *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = (double)got[i] - ref[i];
        if (e != e)
            return INFINITY;
        num += e * e;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---- net building (add1, add_input, add_neuron, infer and the random data
 * come from nc_test_util.h) ---------------------------------------------------- */

static inline int add_conv_full(nc_net *net, const char *name, int in, int cout, int cin_per_group, int kh, int kw,
                         const int stride[2], const int pad[4], const int dil[2], int groups, float wscale)
{
    int i = add1(net, NC_NODE_CONV2D, name, in);
    nc_node *n = &net->nodes[i];
    int64_t ws[4] = {cout, cin_per_group, kh, kw};
    n->weight = rnd_tensor(4, ws, -wscale, wscale);
    n->bias = rnd_tensor(1, ws, -0.1f, 0.1f);
    n->kernel[0] = kh;
    n->kernel[1] = kw;
    for (int k = 0; k < 2; k++) {
        n->stride[k] = stride ? stride[k] : 1;
        n->dilation[k] = dil ? dil[k] : 1;
    }
    for (int k = 0; k < 4; k++)
        n->pad[k] = pad ? pad[k] : 0;
    n->groups = groups;
    return i;
}

static inline int add_conv(nc_net *net, const char *name, int in, int cout, int cin, int k, int pad)
{
    int p[4] = {pad, pad, pad, pad};
    return add_conv_full(net, name, in, cout, cin, k, k, NULL, p, NULL, 1, 1.5f / sqrtf((float)(cin * k * k)));
}

static inline int add_dense(nc_net *net, const char *name, int in, int fout, int fin)
{
    int i = add1(net, NC_NODE_DENSE, name, in);
    int64_t ws[2] = {fout, fin};
    float s = 1.5f / sqrtf((float)fin);
    net->nodes[i].weight = rnd_tensor(2, ws, -s, s);
    net->nodes[i].bias = rnd_tensor(1, ws, -0.05f, 0.05f);
    return i;
}

/* An IF neuron with n thresholds drawn from [lo, hi]. */
static inline int add_if(nc_net *net, const char *name, int in, int n, float lo, float hi, nc_reset reset, nc_compare cmp)
{
    int i = add_neuron(net, name, in, NC_NEURON_IF);
    float th[4096];
    for (int k = 0; k < n && k < 4096; k++)
        th[k] = rnd_range(lo, hi);
    nc_neuron *nr = &net->nodes[i].neuron;
    nc_neuron_set_threshold(nr, n, th, NULL);
    nr->reset = reset;
    nr->compare = cmp;
    return i;
}

/* ---- engines -------------------------------------------------------------------- */

/* A new engine by name with `net` loaded, or NULL (message printed). */
static inline nc_engine *engine_with(const char *name, const nc_net *net)
{
    nc_engine *e = NULL;
    nc_error err = {0};
    nc_status s = nc_engine_new(name, &e, &err);
    if (s == NC_OK)
        s = nc_engine_load(e, net, &err);
    if (s != NC_OK) {
        printf("# %s engine: %s\n", name, err.message);
        nc_engine_free(e);
        return NULL;
    }
    return e;
}

/* One forward pass of a fresh engine; NULL on failure (message printed). */
static inline nc_tensor *run_on(const char *name, const nc_net *net, const nc_tensor *x, const nc_run_options *o)
{
    nc_engine *e = engine_with(name, net);
    nc_tensor *out = NULL;
    nc_error err = {0};
    if (e && nc_engine_forward(e, x, o, &out, &err) != NC_OK)
        printf("# %s forward: %s\n", name, err.message);
    nc_engine_free(e);
    return out;
}

/* ---- an observer that keeps everything ------------------------------------------- */

#define KEEP_MAX_NODES 64

typedef struct keep_obs {
    float *out[KEEP_MAX_NODES], *in[KEEP_MAX_NODES];
    int64_t out_rows[KEEP_MAX_NODES], in_rows[KEEP_MAX_NODES], per_row[KEEP_MAX_NODES];
    int calls[KEEP_MAX_NODES];
    int bad; /* a call whose rows were not whole steps */
    int64_t step_rows; /* N: every call must deliver a multiple of it */
} keep_obs;

static inline void keep_append(float **buf, int64_t *rows, const float *data, int64_t n_rows, int64_t per_row)
{
    float *grown = realloc(*buf, (size_t)((*rows + n_rows) * per_row) * sizeof(float));
    if (!grown)
        return;
    memcpy(grown + *rows * per_row, data, (size_t)(n_rows * per_row) * sizeof(float));
    *buf = grown;
    *rows += n_rows;
}

/* The node's slot for a call of `rows` rows, or NULL (an unkept node);
 * marks the observer bad when the rows are not whole steps. */
static inline keep_obs *keep_slot(void *user, int node, int64_t rows)
{
    keep_obs *k = user;
    if (node < 0 || node >= KEEP_MAX_NODES)
        return NULL;
    if (k->step_rows && rows % k->step_rows)
        k->bad = 1;
    return k;
}

static inline void keep_out(void *user, int node, const float *data, int64_t rows, int64_t per_row)
{
    keep_obs *k = keep_slot(user, node, rows);
    if (!k)
        return;
    k->per_row[node] = per_row;
    k->calls[node]++;
    keep_append(&k->out[node], &k->out_rows[node], data, rows, per_row);
}

static inline void keep_in(void *user, int node, const float *data, int64_t rows, int64_t per_row)
{
    keep_obs *k = keep_slot(user, node, rows);
    if (k)
        keep_append(&k->in[node], &k->in_rows[node], data, rows, per_row);
}

static inline void keep_free(keep_obs *k)
{
    for (int i = 0; i < KEEP_MAX_NODES; i++) {
        free(k->out[i]);
        free(k->in[i]);
    }
    memset(k, 0, sizeof *k);
}

/* Spikes (non-zero values) that differ between two observed IF outputs. */
static inline int64_t spike_mismatches(const float *a, const float *b, int64_t n, int64_t *spikes)
{
    int64_t bad = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        bad += (a[i] != 0.0f) != (b[i] != 0.0f);
        s += b[i] != 0.0f;
    }
    if (spikes)
        *spikes = s;
    return bad;
}

#endif
