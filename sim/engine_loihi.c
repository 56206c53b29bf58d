/* engine_loihi.c — the Loihi-2-style fixed-point engine (see
 * nc_engine_loihi.h for the arithmetic and the options, core/nc_loihi.h for
 * the quantisation).
 *
 * Values.  Every node's output is one int32 buffer of rows × numel: payloads
 * (input, spikes, pooled spikes) and synaptic accumulations, time-major
 * [T, N, …] like the cpu engine, except that a value that is the same at
 * every step (the direct-encoded input and the first layer's currents, up to
 * its neurons) is computed once with rows = N.  A conv or dense node adds
 * up weight columns for the non-zero inputs only (event-driven; exact:
 * integers), after checking that Σ|weight| · max payload (· the target
 * path's pool areas) stays below 2^31.  A pre-spike MaxPool keeps int64
 * running sums.  Neuron states are integers too; floats appear only for the
 * observers and the output.
 *
 * Threads: rows (sample-steps) of a conv or dense layer, samples of a neuron
 * layer or a max pool, split over pthreads taking chunks from a counter. */
#include "nc_engine_loihi.h"

#include "nc_cpu_ops.h"
#include "nc_workers.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOIHI_PARALLEL_MIN (1 << 15) /* below this much work, one thread */

typedef struct node_dq {   /* float value of element j = int·scale·θ[ch] + add[ch] */
    double scale;
    const float *theta;
    int n_theta;
    double *add;
    int n_add;
} node_dq;

typedef struct loihi_state {
    nc_engine *cpu;         /* ANN and QCFS modes                              */
    nc_loihi_options opts;
    const nc_net *net;
    nc_loihi_net *q;        /* NULL: an ANN (no IF neurons)                    */
    int has_if;
    nc_error q_err;         /* why q is NULL for a net with IF neurons         */
    int n_nodes;
    nc_window *win;         /* per node: conv and pool geometry               */
    int32_t **wt;           /* per weighted node: event layout of the weights */
    int32_t **bias_v;       /* per layer: bias per channel in v units          */
    node_dq *dq;            /* per node                                         */
    nc_loihi_layer_stats *stats; /* per layer                                   */
    nc_workers *workers;    /* started on the first parallel job                */
} loihi_state;

typedef struct lvalue {
    int32_t *data;
    int64_t rows;   /* N (constant) or T·N */
    int constant;
} lvalue;

/* ---- small helpers ------------------------------------------------------------- */

static int64_t asr(int64_t x, int k) { return x >= 0 ? x >> k : ~(~x >> k); } /* ⌊x / 2^k⌋ */

static int64_t shift_acc(int64_t acc, int s) { return s >= 0 ? acc * ((int64_t)1 << s) : asr(acc, -s); }

/* sign(x)·((|x|·(4096 − d)) >> 12) */
static int64_t decay(int64_t x, int d)
{
    int64_t m = ((x < 0 ? -x : x) * (NC_LOIHI_DECAY_UNITY - d)) >> 12;
    return x < 0 ? -m : m;
}

/* Into (−2^23, 2^23]: Lava's "u > 2^23: u −= 2^24; u <= −2^23: u += 2^24",
 * taken modulo 2^24 so that it also holds further out. */
static int64_t wrap24(int64_t u)
{
    const int64_t span = (int64_t)1 << 24, half = (int64_t)1 << 23;
    if (u > -half && u <= half)
        return u;
    int64_t r = (u + half - 1) % span;
    if (r < 0)
        r += span;
    return r - half + 1;
}

static int thread_count(const nc_engine *e) { return nc_workers_count(e->threads); }

static int par_threads(int threads, int64_t rows, int64_t cost)
{
    if (threads > rows)
        threads = (int)rows;
    return threads < 1 || cost < LOIHI_PARALLEL_MIN ? 1 : threads;
}

/* Runs fn over [0, rows) on `threads` threads (slots 0 … threads−1), the
 * engine's workers (nc_workers.h) and the caller's, about 4 chunks each. */
static void parallel_rows(loihi_state *st, int threads, int64_t rows, nc_rows_fn fn, void *ctx)
{
    if (rows <= 0)
        return;
    if (threads > 1 && !st->workers)
        st->workers = nc_workers_new(); /* NULL: this thread does it all */
    if (threads <= 1 || !st->workers) {
        fn(ctx, 0, rows, 0);
        return;
    }
    nc_workers_run(st->workers, threads, rows, (rows + 4 * threads - 1) / (4 * threads), fn, ctx);
}

/* ---- run context ----------------------------------------------------------------- */

typedef struct run_ctx {
    nc_engine *e;
    loihi_state *st;
    const nc_net *net;
    const nc_loihi_net *q;
    const nc_run_options *opts;
    int T;
    int64_t N;
    int seq;
    int threads;
    lvalue *val;
    float *output;   /* [T, N, F] */
    nc_error *err;
} run_ctx;

#define node_fail(c, i, code, ...) nc_node_fail((c)->err, (code), "loihi engine", &(c)->net->nodes[i], __VA_ARGS__)


static int64_t numel_of(const run_ctx *c, int i) { return nc_node_numel(&c->net->nodes[i]); }

static nc_status value_alloc(run_ctx *c, int i, int64_t rows, int constant, lvalue *v)
{
    size_t n, bytes;
    if (nc_mul_size((size_t)rows, (size_t)numel_of(c, i), &n) || nc_mul_size(n, sizeof(int32_t), &bytes))
        return node_fail(c, i, NC_ERR_MEMORY, "the output size overflows; use a smaller batch or fewer steps");
    v->data = malloc(bytes ? bytes : 1);
    if (!v->data)
        return node_fail(c, i, NC_ERR_MEMORY, "out of memory for %zu bytes (%lld rows); use a smaller batch", bytes,
                         (long long)rows);
    v->rows = rows;
    v->constant = constant;
    return NC_OK;
}

static void value_free(lvalue *v)
{
    free(v->data);
    memset(v, 0, sizeof *v);
}

/* ---- input ------------------------------------------------------------------------- */

static nc_status run_input(run_ctx *c, int i, const nc_tensor *input, lvalue *out)
{
    int64_t numel = numel_of(c, i);
    int poisson = !c->seq && c->opts->encoding == NC_ENCODING_POISSON;
    int constant = !c->seq && !poisson;
    int64_t rows = constant ? c->N : (int64_t)c->T * c->N;
    nc_status s = value_alloc(c, i, rows, constant, out);
    if (s != NC_OK)
        return s;
    const float *src = input->data;
    float *enc = NULL;
    if (poisson) {
        size_t n;
        if (nc_mul_size((size_t)rows, (size_t)numel, &n) || !(enc = malloc(n * sizeof *enc)))
            return node_fail(c, i, NC_ERR_MEMORY, "out of memory for the Poisson spikes");
        nc_poisson_encode(c->opts->seed, 0, c->T, c->N * numel, input->data, enc);
        src = enc;
    }
    double scale = ldexp(1.0, c->q->opts.input_frac_bits), lim = NC_LOIHI_UV_MAX - 1;
    int64_t clipped = 0, total = rows * numel;
    for (int64_t k = 0; k < total; k++) {
        double x = (double)src[k] * scale;
        if (isnan(x)) {
            free(enc);
            return node_fail(c, i, NC_ERR_ARGUMENT, "input value %lld is NaN", (long long)k);
        }
        double r = x < 0 ? -floor(-x + 0.5) : floor(x + 0.5);
        if (r > lim || r < -lim) {
            r = r > lim ? lim : -lim;
            clipped++;
        }
        out->data[k] = (int32_t)r;
    }
    free(enc);
    for (int l = 0; l < c->q->n_layers; l++)
        if (c->q->layers[l].source == i)
            c->st->stats[l].payload_clipped += clipped;
    return NC_OK;
}

/* ---- pools ------------------------------------------------------------------------- */

typedef struct pool_job {
    const nc_window *g;
    const int32_t *in;
    int32_t *out;
    int64_t in_row, out_row;
    int gap_c;
    int64_t gap_hw;
    int T;
    int64_t N;
    int max;               /* running max (0: sum pool) */
} pool_job;

static void sum_pool_rows(void *ctx, int64_t r0, int64_t r1, int slot)
{
    (void)slot;
    const pool_job *j = ctx;
    for (int64_t r = r0; r < r1; r++) {
        const int32_t *in = j->in + r * j->in_row;
        int32_t *out = j->out + r * j->out_row;
        if (!j->g) { /* global average pool */
            for (int ch = 0; ch < j->gap_c; ch++) {
                int64_t s = 0;
                for (int64_t k = 0; k < j->gap_hw; k++)
                    s += in[ch * j->gap_hw + k];
                out[ch] = (int32_t)s;
            }
            continue;
        }
        const nc_window *g = j->g;
        for (int ch = 0; ch < g->c; ch++)
            for (int oy = 0; oy < g->oh; oy++)
                for (int ox = 0; ox < g->ow; ox++) {
                    /* the taps inside the input: padding adds zeros */
                    nc_axis_taps ty = nc_row_taps(g, oy), tx = nc_col_taps(g, ox);
                    const int32_t *plane = in + (int64_t)ch * g->h * g->w;
                    int64_t s = 0;
                    for (int ky = ty.lo; ky < ty.hi; ky++) {
                        const int32_t *row = plane + (int64_t)(ty.start + ky * g->dilation[0]) * g->w + tx.start;
                        for (int kx = tx.lo; kx < tx.hi; kx++)
                            s += row[kx * g->dilation[1]];
                    }
                    out[((int64_t)ch * g->oh + oy) * g->ow + ox] = (int32_t)s;
                }
    }
}

/* Max over each window of `v` (int64 per input value), padding never chosen. */
static void window_max(const nc_window *g, const int64_t *v, int64_t *m)
{
    for (int ch = 0; ch < g->c; ch++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                nc_axis_taps ty = nc_row_taps(g, oy), tx = nc_col_taps(g, ox);
                const int64_t *plane = v + (int64_t)ch * g->h * g->w;
                int64_t best = INT64_MIN;
                for (int ky = ty.lo; ky < ty.hi; ky++) {
                    const int64_t *row = plane + (int64_t)(ty.start + ky * g->dilation[0]) * g->w + tx.start;
                    for (int kx = tx.lo; kx < tx.hi; kx++)
                        best = row[kx * g->dilation[1]] > best ? row[kx * g->dilation[1]] : best;
                }
                m[((int64_t)ch * g->oh + oy) * g->ow + ox] = best == INT64_MIN ? 0 : best;
            }
}

/* Pre-spike MaxPool over steps: out(t) = max S(t) − max S(t−1) of the
 * running sums S (conversion.md §2.1, the cpu engine's rule); rows of this
 * job are samples. */
static void max_pool_samples(void *ctx, int64_t r0, int64_t r1, int slot)
{
    (void)slot;
    const pool_job *j = ctx;
    int64_t *S = malloc((size_t)j->in_row * sizeof *S), *M = malloc((size_t)j->out_row * sizeof *M);
    int64_t *prev = malloc((size_t)j->out_row * sizeof *prev);
    if (!S || !M || !prev) { /* the caller checked the sizes; give zeros rather than crash */
        for (int64_t n = r0; n < r1; n++)
            for (int t = 0; t < j->T; t++)
                memset(j->out + ((int64_t)t * j->N + n) * j->out_row, 0, (size_t)j->out_row * sizeof(int32_t));
        free(S), free(M), free(prev);
        return;
    }
    for (int64_t n = r0; n < r1; n++) {
        memset(S, 0, (size_t)j->in_row * sizeof *S);
        memset(prev, 0, (size_t)j->out_row * sizeof *prev);
        for (int t = 0; t < j->T; t++) {
            const int32_t *in = j->in + ((int64_t)t * j->N + n) * j->in_row;
            int32_t *out = j->out + ((int64_t)t * j->N + n) * j->out_row;
            for (int64_t k = 0; k < j->in_row; k++)
                S[k] += in[k];
            window_max(j->g, S, M);
            for (int64_t k = 0; k < j->out_row; k++) {
                out[k] = (int32_t)(M[k] - (t ? prev[k] : 0));
                prev[k] = M[k];
            }
        }
    }
    free(S), free(M), free(prev);
}

/* A constant input: the max of the one step (= the running rule's result). */
static void max_pool_rows(void *ctx, int64_t r0, int64_t r1, int slot)
{
    (void)slot;
    const pool_job *j = ctx;
    int64_t *v = malloc((size_t)j->in_row * sizeof *v), *m = malloc((size_t)j->out_row * sizeof *m);
    for (int64_t r = r0; r < r1; r++) {
        if (!v || !m) {
            memset(j->out + r * j->out_row, 0, (size_t)j->out_row * sizeof(int32_t));
            continue;
        }
        for (int64_t k = 0; k < j->in_row; k++)
            v[k] = j->in[r * j->in_row + k];
        window_max(j->g, v, m);
        for (int64_t k = 0; k < j->out_row; k++)
            j->out[r * j->out_row + k] = (int32_t)m[k];
    }
    free(v), free(m);
}

static nc_status run_pool(run_ctx *c, int i, lvalue *out)
{
    const nc_node *n = &c->net->nodes[i];
    lvalue *in = &c->val[n->inputs[0]];
    if (n->kind == NC_NODE_FLATTEN) { /* the same values: take the buffer over */
        *out = *in;
        in->data = NULL;
        return NC_OK;
    }
    nc_status s = value_alloc(c, i, in->rows, in->constant, out);
    if (s != NC_OK)
        return s;
    pool_job j = {.g = n->kind == NC_NODE_GLOBAL_AVGPOOL ? NULL : &c->st->win[i], .in = in->data,
                  .out = out->data, .in_row = numel_of(c, n->inputs[0]), .out_row = numel_of(c, i),
                  .T = c->T, .N = c->N};
    if (n->kind == NC_NODE_GLOBAL_AVGPOOL) {
        j.gap_c = (int)n->shape[0];
        j.gap_hw = j.in_row / j.gap_c;
    }
    int64_t work = in->rows * j.in_row;
    if (n->kind == NC_NODE_MAXPOOL && n->maxpool_strategy != NC_MAXPOOL_AVG) {
        if (in->constant)
            parallel_rows(c->st, par_threads(c->threads, in->rows, work), in->rows, max_pool_rows, &j);
        else
            parallel_rows(c->st, par_threads(c->threads, c->N, work), c->N, max_pool_samples, &j);
    } else {
        parallel_rows(c->st, par_threads(c->threads, in->rows, work), in->rows, sum_pool_rows, &j);
    }
    return NC_OK;
}

/* ---- synapses --------------------------------------------------------------------- */

/* acc[0..n) += p·w[0..n), eight lanes at a time (GCC/Clang vector
 * extensions: AVX2 with -march=native, SSE2 pairs otherwise). */
typedef int32_t v8i __attribute__((vector_size(32)));

static inline void madd_row(int32_t *restrict acc, const int32_t *restrict w, int32_t p, int64_t n)
{
    int64_t k = 0;
    v8i pv = {p, p, p, p, p, p, p, p};
    for (; k + 8 <= n; k += 8) {
        v8i a, b;
        memcpy(&a, acc + k, sizeof a);
        memcpy(&b, w + k, sizeof b);
        a += p == 1 ? b : b * pv;
        memcpy(acc + k, &a, sizeof a);
    }
    for (; k < n; k++)
        acc[k] += p * w[k];
}

typedef struct syn_job {
    const nc_node *node;
    const nc_window *g;
    const int32_t *wt;
    const int32_t *in;
    int32_t *out;
    int64_t in_row, out_row;
    int32_t *work;        /* per slot: OH·OW·Cout ints (conv) */
    int64_t work_ints;
    const int *oy_of;     /* conv: [H][KH] output row of input row y, tap ky, or −1 */
    const int *ox_of;     /* conv: [W][KW]                                          */
} syn_job;

/* Event-driven conv of rows [r0, r1): each non-zero input adds its value
 * times the weights it reaches, channels-last in `work`, then transposed. */
static void conv_rows(void *ctx, int64_t r0, int64_t r1, int slot)
{
    const syn_job *j = ctx;
    const nc_window *g = j->g;
    int cout = (int)j->node->shape[0], groups = j->node->groups > 0 ? j->node->groups : 1;
    int cin_g = g->c / groups, cout_g = cout / groups;
    int kh = g->kernel[0], kw = g->kernel[1];
    int64_t pos = (int64_t)g->oh * g->ow;
    int32_t *work = j->work + (int64_t)slot * j->work_ints;
    for (int64_t r = r0; r < r1; r++) {
        const int32_t *in = j->in + r * j->in_row;
        memset(work, 0, (size_t)(pos * cout) * sizeof *work);
        for (int ci = 0; ci < g->c; ci++) {
            int co0 = (ci / cin_g) * cout_g;
            for (int y = 0; y < g->h; y++)
                for (int x = 0; x < g->w; x++) {
                    int32_t p = in[((int64_t)ci * g->h + y) * g->w + x];
                    if (!p)
                        continue;
                    for (int ky = 0; ky < kh; ky++) {
                        int oy = j->oy_of[y * kh + ky];
                        if (oy < 0)
                            continue;
                        for (int kx = 0; kx < kw; kx++) {
                            int ox = j->ox_of[x * kw + kx];
                            if (ox < 0)
                                continue;
                            madd_row(work + ((int64_t)oy * g->ow + ox) * cout + co0,
                                     j->wt + (((int64_t)ci * kh + ky) * kw + kx) * cout_g, p, cout_g);
                        }
                    }
                }
        }
        int32_t *out = j->out + r * j->out_row;
        for (int64_t q = 0; q < pos; q++)
            for (int co = 0; co < cout; co++)
                out[co * pos + q] = work[q * cout + co];
    }
}

static void dense_rows(void *ctx, int64_t r0, int64_t r1, int slot)
{
    (void)slot;
    const syn_job *j = ctx;
    int64_t fin = j->in_row, fout = j->out_row;
    for (int64_t r = r0; r < r1; r++) {
        const int32_t *in = j->in + r * fin;
        int32_t *out = j->out + r * fout;
        memset(out, 0, (size_t)fout * sizeof *out);
        for (int64_t k = 0; k < fin; k++) {
            int32_t p = in[k];
            if (!p)
                continue;
            madd_row(out, j->wt + k * fout, p, fout);
        }
    }
}

static nc_status run_weighted(run_ctx *c, int i, lvalue *out)
{
    const nc_node *n = &c->net->nodes[i];
    const nc_loihi_layer *L = &c->q->layers[c->q->layer_of[i]];
    lvalue *in = &c->val[n->inputs[0]];
    int64_t in_row = numel_of(c, n->inputs[0]), out_row = numel_of(c, i);
    /* exact int32 sums: Σ|w| · max payload (· later sum pools) < 2^31 */
    int64_t pmax = 0, total = in->rows * in_row;
    for (int64_t k = 0; k < total; k++) {
        int64_t a = in->data[k] < 0 ? -(int64_t)in->data[k] : in->data[k];
        pmax = a > pmax ? a : pmax;
    }
    double bound = L->w_abs_row_max * (double)pmax * (double)L->target_area;
    if (bound >= 2147483647.0)
        return node_fail(c, i, NC_ERR_UNSUPPORTED,
                         "its accumulations can reach %.3g (Σ|weight| %.0f × payload %lld × pools %lld), beyond "
                         "the 32-bit accumulator; use fewer input bits or message bits",
                         bound, L->w_abs_row_max, (long long)pmax, (long long)L->target_area);
    int raw_delay = c->st->opts.delay == NC_LOIHI_DELAY_RAW && c->net->nodes[L->source].kind != NC_NODE_INPUT;
    nc_status s = value_alloc(c, i, in->rows, in->constant, out);
    if (s != NC_OK)
        return s;
    syn_job j = {.node = n, .g = &c->st->win[i], .wt = c->st->wt[i], .in = in->data, .out = out->data,
                 .in_row = in_row, .out_row = out_row};
    int64_t rows = in->rows;
    if (raw_delay) { /* step t receives the source's step t − 1; step 0 nothing */
        int64_t step = c->N;
        memset(out->data, 0, (size_t)(step * out_row) * sizeof(int32_t));
        j.out = out->data + step * out_row;
        rows = in->rows - step;
    }
    int64_t cost = rows * (int64_t)nc_node_macs(c->net, i) / 16;
    int threads = par_threads(c->threads, rows, cost);
    if (n->kind == NC_NODE_CONV2D) {
        const nc_window *g = &c->st->win[i];
        j.work_ints = (int64_t)g->oh * g->ow * n->shape[0];
        j.work = malloc((size_t)(j.work_ints * threads) * sizeof *j.work);
        int *oy_of = malloc((size_t)(g->h * g->kernel[0] + g->w * g->kernel[1]) * sizeof *oy_of);
        if (!j.work || !oy_of) {
            free(j.work), free(oy_of);
            return node_fail(c, i, NC_ERR_MEMORY, "out of memory for the workspace");
        }
        int *ox_of = oy_of + g->h * g->kernel[0];
        for (int a = 0; a < 2; a++) { /* output row/column each input one reaches through tap k, or −1 */
            int size = a ? g->w : g->h, k = g->kernel[a], out_size = a ? g->ow : g->oh;
            for (int y = 0; y < size; y++)
                for (int ky = 0; ky < k; ky++) {
                    int ty = y + g->pad[a] - ky * g->dilation[a];
                    int o = ty >= 0 && ty % g->stride[a] == 0 ? ty / g->stride[a] : -1;
                    (a ? ox_of : oy_of)[y * k + ky] = o < out_size ? o : -1;
                }
        }
        j.oy_of = oy_of, j.ox_of = ox_of;
        parallel_rows(c->st, threads, rows, conv_rows, &j);
        free(j.work), free(oy_of);
    } else {
        parallel_rows(c->st, threads, rows, dense_rows, &j);
    }
    return NC_OK;
}

/* ---- neurons ----------------------------------------------------------------------- */

typedef struct if_job {
    const nc_loihi_layer *L;
    const int32_t *bias;   /* per channel, v units (NULL: none) */
    int n_bias;
    const float *theta;
    int n_theta;
    const int32_t *in;
    int64_t in_step;       /* ints between steps (0: constant)   */
    int32_t *out;          /* spikes, [T, N, numel]              */
    float *cur_f, *spk_f;  /* dequantised, or NULL               */
    int64_t numel, N;
    int T, shift;
    const nc_loihi_options *o;
    int64_t (*slot_stats)[4]; /* per slot: spikes, payload, wraps, saturations */
    int32_t *state;        /* per slot: 2·numel ints (u, v)      */
} if_job;

static void if_samples(void *ctx, int64_t r0, int64_t r1, int slot)
{
    const if_job *j = ctx;
    const nc_loihi_options *o = j->o;
    const int64_t vmax = NC_LOIHI_UV_MAX - 1;
    int64_t vth = (int64_t)j->L->vth_mant << NC_LOIHI_VTH_SHIFT;
    int64_t max_k = o->graded ? ((int64_t)1 << o->message_bits) - 1 : 1;
    double vunit = (double)vth;
    int32_t *u = j->state + (int64_t)slot * 2 * j->numel, *v = u + j->numel;
    int64_t spikes = 0, payload = 0, wraps = 0, sats = 0;
    for (int64_t n = r0; n < r1; n++) {
        for (int64_t k = 0; k < j->numel; k++)
            u[k] = 0, v[k] = j->L->v0;
        for (int t = 0; t < j->T; t++) {
            const int32_t *in = j->in + t * j->in_step + n * j->numel;
            int64_t at = ((int64_t)t * j->N + n) * j->numel;
            int64_t b_inner = j->n_bias > 1 ? j->numel / j->n_bias : j->numel, b_left = b_inner;
            int64_t t_inner = j->n_theta > 1 ? j->numel / j->n_theta : j->numel, t_left = t_inner;
            int cb = 0, ct = 0;
            for (int64_t k = 0; k < j->numel; k++) {
                if (b_left-- == 0)
                    cb++, b_left = b_inner - 1;
                if (t_left-- == 0)
                    ct++, t_left = t_inner - 1;
                int64_t b = j->bias ? j->bias[cb] : 0;
                int64_t uu = decay(u[k], NC_LOIHI_IF_DU + 1) + shift_acc(in[k], j->shift) * (1 << NC_LOIHI_ACT_SHIFT);
                int64_t uw = wrap24(uu);
                wraps += uw != uu;
                int64_t vv = decay(v[k], NC_LOIHI_IF_DV) + uw + b;
                if (vv > vmax || vv < -vmax) {
                    vv = vv > vmax ? vmax : -vmax;
                    sats++;
                }
                int fire = o->compare == NC_FIRE_GT ? vv > vth : vv >= vth;
                int64_t kk = 0;
                if (fire) {
                    kk = o->graded ? (o->compare == NC_FIRE_GT ? (vv - 1) / vth : vv / vth) : 1;
                    kk = kk > max_k ? max_k : kk;
                    vv = o->reset == NC_RESET_ZERO ? 0 : vv - kk * vth;
                    spikes++;
                    payload += kk;
                }
                u[k] = (int32_t)uw;
                v[k] = (int32_t)vv;
                j->out[at + k] = (int32_t)kk;
                if (j->cur_f || j->spk_f) {
                    double th = j->theta ? j->theta[ct] : 1.0;
                    if (j->cur_f)
                        j->cur_f[at + k] = (float)((double)(uw + b) / vunit * th);
                    if (j->spk_f)
                        j->spk_f[at + k] = kk ? (float)((double)kk * th) : 0.0f;
                }
            }
        }
    }
    j->slot_stats[slot][0] += spikes;
    j->slot_stats[slot][1] += payload;
    j->slot_stats[slot][2] += wraps;
    j->slot_stats[slot][3] += sats;
}

static float *floats_new(int64_t n)
{
    size_t bytes;
    return n >= 0 && !nc_mul_size((size_t)n, sizeof(float), &bytes) ? malloc(bytes ? bytes : 1) : NULL;
}

static nc_status run_neuron(run_ctx *c, int i, lvalue *out)
{
    const nc_node *n = &c->net->nodes[i];
    int l = c->q->layer_of[i];
    const nc_loihi_layer *L = &c->q->layers[l];
    lvalue *in = &c->val[n->inputs[0]];
    const nc_observer *ob = c->opts->observer;
    int64_t numel = numel_of(c, i), rows = (int64_t)c->T * c->N;
    nc_status s = value_alloc(c, i, rows, 0, out);
    if (s != NC_OK)
        return s;
    int threads = par_threads(c->threads, c->N, rows * numel * 4);
    int64_t (*slot_stats)[4] = calloc((size_t)threads, sizeof *slot_stats);
    int32_t *state = malloc((size_t)(threads * 2 * numel) * sizeof *state);
    if_job j = {.L = L, .bias = c->st->bias_v[l], .n_bias = L->n_bias, .theta = n->neuron.threshold,
                .n_theta = n->neuron.n_threshold, .in = in->data, .in_step = in->constant ? 0 : c->N * numel,
                .out = out->data, .numel = numel, .N = c->N, .T = c->T, .shift = L->weight_exp - L->input_shift,
                .o = &c->st->opts, .slot_stats = slot_stats, .state = state};
    if (ob && ob->observe_input)
        j.cur_f = floats_new(rows * numel);
    if (ob && ob->observe)
        j.spk_f = floats_new(rows * numel);
    if (!slot_stats || !state || (ob && ob->observe_input && !j.cur_f) || (ob && ob->observe && !j.spk_f)) {
        free(slot_stats), free(state), free(j.cur_f), free(j.spk_f);
        return node_fail(c, i, NC_ERR_MEMORY, "out of memory for the neuron states and observed values");
    }
    parallel_rows(c->st, threads, c->N, if_samples, &j);
    nc_loihi_layer_stats *stt = &c->st->stats[l];
    for (int k = 0; k < threads; k++) {
        stt->spikes += slot_stats[k][0];
        stt->payload += slot_stats[k][1];
        stt->u_wraps += slot_stats[k][2];
        stt->v_saturations += slot_stats[k][3];
    }
    stt->neuron_steps += rows * numel;
    if (j.cur_f)
        ob->observe_input(ob->user, i, j.cur_f, rows, numel);
    if (j.spk_f)
        ob->observe(ob->user, i, j.spk_f, rows, numel);
    free(slot_stats), free(state), free(j.cur_f), free(j.spk_f);
    return NC_OK;
}

/* The output reads the last layer's current each step: (u + bias)/(vth·64). */
static nc_status run_output(run_ctx *c, int i)
{
    const nc_node *n = &c->net->nodes[i];
    int l = c->q->layer_of[i];
    const nc_loihi_layer *L = &c->q->layers[l];
    const lvalue *in = &c->val[n->inputs[0]];
    int64_t numel = numel_of(c, i), rows = (int64_t)c->T * c->N;
    c->output = floats_new(rows * numel);
    if (!c->output)
        return node_fail(c, i, NC_ERR_MEMORY, "out of memory for the output");
    double vunit = (double)((int64_t)L->vth_mant << NC_LOIHI_VTH_SHIFT) / L->theta_out;
    const int32_t *bias = c->st->bias_v[l];
    int shift = L->weight_exp - L->input_shift;
    int64_t wraps = 0;
    for (int t = 0; t < c->T; t++)
        for (int64_t r = 0; r < c->N; r++) {
            const int32_t *src = in->data + ((in->constant ? 0 : (int64_t)t * c->N) + r) * numel;
            float *dst = c->output + ((int64_t)t * c->N + r) * numel;
            for (int64_t k = 0; k < numel; k++) {
                int64_t uu = shift_acc(src[k], shift) * (1 << NC_LOIHI_ACT_SHIFT), u = wrap24(uu);
                wraps += u != uu;
                int64_t b = bias ? bias[nc_loihi_channel(k, numel, L->n_bias)] : 0;
                dst[k] = (float)((double)(u + b) / vunit);
            }
        }
    c->st->stats[l].u_wraps += wraps;
    c->st->stats[l].neuron_steps += rows * numel;
    const nc_observer *ob = c->opts->observer;
    if (ob && ob->observe)
        ob->observe(ob->user, i, c->output, rows, numel);
    return NC_OK;
}

/* Observers see an integer value as floats (nc_engine_loihi.h), all T·N rows. */
static nc_status observe_value(run_ctx *c, int i, const lvalue *v)
{
    const nc_observer *ob = c->opts->observer;
    if (!ob || !ob->observe)
        return NC_OK;
    int64_t numel = numel_of(c, i), rows = (int64_t)c->T * c->N;
    float *f = floats_new(rows * numel);
    if (!f)
        return node_fail(c, i, NC_ERR_MEMORY, "out of memory for the observed values");
    const node_dq *d = &c->st->dq[i];
    int nm = d->n_theta > d->n_add ? d->n_theta : d->n_add;
    nm = nm > 1 ? nm : 1;
    double *mul = malloc((size_t)nm * sizeof *mul), *add = calloc((size_t)nm, sizeof *add);
    if (!mul || !add) {
        free(f), free(mul), free(add);
        return node_fail(c, i, NC_ERR_MEMORY, "out of memory for the observed values");
    }
    for (int ch = 0; ch < nm; ch++) { /* per channel: int·mul + add */
        mul[ch] = d->scale * (d->theta ? d->theta[d->n_theta > 1 ? ch : 0] : 1.0);
        add[ch] = d->add ? d->add[d->n_add > 1 ? ch : 0] : 0.0;
    }
    int64_t inner = numel / nm;
    for (int64_t r = 0; r < rows; r++) {
        const int32_t *src = v->data + (v->constant ? r % c->N : r) * numel;
        float *dst = f + r * numel;
        for (int ch = 0; ch < nm; ch++)
            for (int64_t k = ch * inner; k < (ch + 1) * inner; k++)
                dst[k] = (float)((double)src[k] * mul[ch] + add[ch]);
    }
    free(mul), free(add);
    ob->observe(ob->user, i, f, rows, numel);
    free(f);
    return NC_OK;
}

/* ---- forward ----------------------------------------------------------------------- */

static nc_status run_node(run_ctx *c, int i, const nc_tensor *input)
{
    const nc_node *n = &c->net->nodes[i];
    switch (c->q->role[i]) {
    case NC_LOIHI_ROLE_INPUT: return run_input(c, i, input, &c->val[i]);
    case NC_LOIHI_ROLE_SOURCE:
    case NC_LOIHI_ROLE_TARGET: return run_pool(c, i, &c->val[i]);
    case NC_LOIHI_ROLE_WEIGHTED: return run_weighted(c, i, &c->val[i]);
    case NC_LOIHI_ROLE_NEURON: return run_neuron(c, i, &c->val[i]);
    case NC_LOIHI_ROLE_OUTPUT: return run_output(c, i);
    }
    return node_fail(c, i, NC_ERR_INTERNAL, "no role for a %s node", nc_node_kind_name(n->kind));
}

static nc_status snn_forward(nc_engine *e, const nc_tensor *input, const nc_run_options *opts, nc_tensor **out,
                             nc_error *err)
{
    loihi_state *st = e->impl;
    if (!st->q)
        return st->has_if ? nc_fail(err, st->q_err.code ? st->q_err.code : NC_ERR_UNSUPPORTED, "%s", st->q_err.message)
                          : nc_fail(err, NC_ERR_UNSUPPORTED,
                                    "loihi engine: the network has no IF neurons; SNN mode runs a converted "
                                    "network (neurocuda convert)");
    if (opts->T < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi engine: SNN mode needs T >= 1 steps, got %d", opts->T);
    int D = st->q->max_depth;
    if (st->opts.delay == NC_LOIHI_DELAY_COMPENSATED && opts->T > INT32_MAX - D)
        return nc_fail(err, NC_ERR_ARGUMENT,
                       "loihi engine: T = %d plus the %d-step synaptic delay overflows the step counter; use a "
                       "smaller T or --loihi-delay off", opts->T, D);
    if (opts->encoding != NC_ENCODING_DIRECT && opts->encoding != NC_ENCODING_POISSON)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi engine: unknown input encoding %d", (int)opts->encoding);
    run_ctx c = {.e = e, .st = st, .net = st->net, .q = st->q, .opts = opts, .T = opts->T, .err = err,
                 .threads = thread_count(e)};
    nc_status s = nc_engine_check_input("loihi", c.net, input, 1, c.T, &c.seq, c.err);
    if (s != NC_OK)
        return s;
    c.N = input->shape[c.seq];
    size_t rows;
    if (nc_mul_size((size_t)c.T, (size_t)c.N, &rows))
        return nc_fail(err, NC_ERR_MEMORY, "loihi engine: T × N overflows");
    c.val = calloc((size_t)c.net->n_nodes, sizeof *c.val);
    if (!c.val)
        return nc_fail(err, NC_ERR_MEMORY, "loihi engine: out of memory");
    for (int i = 0; i < c.net->n_nodes && s == NC_OK; i++) {
        s = run_node(&c, i, input);
        int role = c.q->role[i];
        if (s == NC_OK && role != NC_LOIHI_ROLE_NEURON && role != NC_LOIHI_ROLE_OUTPUT)
            s = observe_value(&c, i, &c.val[i]);
        const nc_node *n = &c.net->nodes[i];
        for (int k = 0; k < n->n_inputs; k++) /* chains: node i was the only reader */
            value_free(&c.val[n->inputs[k]]);
        if (s == NC_OK && opts->progress) {
            nc_progress p = {"simulate", i + 1, c.net->n_nodes, 0.0};
            if (opts->progress(opts->progress_user, &p) != 0)
                s = nc_fail(err, NC_ERR_CANCELLED, "loihi engine: cancelled after node '%s'", n->name);
        }
    }
    if (s == NC_OK) {
        int64_t F = numel_of(&c, c.net->output), shape[3] = {c.T, c.N, F};
        nc_tensor *t = nc_tensor_new(3, shape);
        if (t && c.output) {
            memcpy(t->data, c.output, (size_t)(c.T * c.N * F) * sizeof(float));
            *out = t;
        } else {
            nc_tensor_free(t);
            s = nc_fail(err, NC_ERR_MEMORY, "loihi engine: out of memory for the output");
        }
    }
    for (int i = 0; i < c.net->n_nodes; i++)
        value_free(&c.val[i]);
    free(c.val);
    free(c.output);
    return s;
}

static nc_status loihi_forward(nc_engine *e, const nc_tensor *input, const nc_run_options *opts, nc_tensor **out,
                               nc_error *err)
{
    loihi_state *st = e->impl;
    if (!st || !st->net)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi engine: no network loaded");
    nc_run_options defaults = {.mode = NC_MODE_ANN, .T = 1};
    if (!opts)
        opts = &defaults;
    if (opts->mode == NC_MODE_SNN)
        return snn_forward(e, input, opts, out, err);
    if (opts->mode != NC_MODE_ANN && opts->mode != NC_MODE_QCFS)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi engine: unknown mode %d", (int)opts->mode);
    st->cpu->threads = e->threads;
    return nc_engine_forward(st->cpu, input, opts, out, err); /* the float references */
}

/* ---- load ---------------------------------------------------------------------------- */

static void prepared_free(loihi_state *st)
{
    for (int i = 0; i < st->n_nodes; i++) {
        if (st->wt)
            free(st->wt[i]);
        if (st->dq)
            free(st->dq[i].add);
    }
    for (int l = 0; st->q && st->bias_v && l < st->q->n_layers; l++)
        free(st->bias_v[l]);
    free(st->wt), free(st->dq), free(st->win), free(st->bias_v), free(st->stats);
    st->wt = NULL, st->dq = NULL, st->win = NULL, st->bias_v = NULL, st->stats = NULL;
    nc_loihi_net_free(st->q);
    st->q = NULL;
}

/* Event layouts, geometry, biases in v units and the dequantisation. */
static nc_status prepare(loihi_state *st, nc_error *err)
{
    const nc_net *net = st->net;
    const nc_loihi_net *q = st->q;
    int nn = net->n_nodes;
    st->n_nodes = nn;
    st->win = calloc((size_t)nn, sizeof *st->win);
    st->wt = calloc((size_t)nn, sizeof *st->wt);
    st->dq = calloc((size_t)nn, sizeof *st->dq);
    st->bias_v = calloc((size_t)(q->n_layers > 0 ? q->n_layers : 1), sizeof *st->bias_v);
    st->stats = calloc((size_t)(q->n_layers > 0 ? q->n_layers : 1), sizeof *st->stats);
    double *area = calloc((size_t)nn, sizeof *area); /* sum-pool areas so far on a path */
    if (!st->win || !st->wt || !st->dq || !st->bias_v || !st->stats || !area) {
        free(area);
        return nc_fail(err, NC_ERR_MEMORY, "loihi engine: out of memory loading the network");
    }
    for (int l = 0; l < q->n_layers; l++) {
        const nc_loihi_layer *L = &q->layers[l];
        if (!L->n_bias)
            continue;
        if (!(st->bias_v[l] = malloc((size_t)L->n_bias * sizeof(int32_t)))) {
            free(area);
            return nc_fail(err, NC_ERR_MEMORY, "loihi engine: out of memory");
        }
        for (int o = 0; o < L->n_bias; o++)
            st->bias_v[l][o] = (int32_t)L->bias_mant[o] * (1 << L->bias_exp);
    }
    for (int i = 0; i < nn; i++) {
        const nc_node *n = &net->nodes[i];
        if (n->kind == NC_NODE_CONV2D || n->kind == NC_NODE_AVGPOOL || n->kind == NC_NODE_MAXPOOL) {
            const nc_node *in = &net->nodes[n->inputs[0]];
            if (in->ndim != 3 || nc_window_init(&st->win[i], (int)in->shape[0], (int)in->shape[1], (int)in->shape[2],
                                                n->kernel, n->stride, n->pad, n->dilation, n->ceil_mode) != 0 ||
                n->ndim != 3 || st->win[i].oh != n->shape[1] || st->win[i].ow != n->shape[2]) {
                free(area);
                return nc_fail(err, NC_ERR_SHAPE, "loihi engine, node '%s': the window does not fit its input; run "
                                                  "shape inference", n->name);
            }
        }
        node_dq *d = &st->dq[i];
        d->scale = 1;
        int role = q->role[i];
        int in_idx = n->n_inputs ? n->inputs[0] : -1;
        area[i] = 1;
        if (role == NC_LOIHI_ROLE_INPUT || role == NC_LOIHI_ROLE_SOURCE) {
            int pop = q->population[i];
            area[i] = role == NC_LOIHI_ROLE_SOURCE ? area[in_idx] * (double)nc_loihi_pool_area(net, i) : 1;
            d->scale = 1.0 / area[i];
            if (net->nodes[pop].kind == NC_NODE_INPUT)
                d->scale *= ldexp(1.0, -q->opts.input_frac_bits);
            else
                d->theta = net->nodes[pop].neuron.threshold, d->n_theta = net->nodes[pop].neuron.n_threshold;
        } else if (role == NC_LOIHI_ROLE_WEIGHTED || role == NC_LOIHI_ROLE_TARGET) {
            int l = q->layer_of[i];
            const nc_loihi_layer *L = &q->layers[l];
            const nc_node *tgt = &net->nodes[L->target];
            area[i] = role == NC_LOIHI_ROLE_TARGET ? area[in_idx] * (double)nc_loihi_pool_area(net, i) : 1;
            d->scale = ldexp(1.0, L->weight_exp - L->input_shift) / L->vth_mant * ((double)L->target_area / area[i]);
            if (tgt->kind == NC_NODE_NEURON)
                d->theta = tgt->neuron.threshold, d->n_theta = tgt->neuron.n_threshold;
            else
                d->scale *= L->theta_out;
            if (L->n_bias) {
                if (!(d->add = malloc((size_t)L->n_bias * sizeof *d->add))) {
                    free(area);
                    return nc_fail(err, NC_ERR_MEMORY, "loihi engine: out of memory");
                }
                d->n_add = L->n_bias;
                for (int o = 0; o < L->n_bias; o++) {
                    double th = d->theta ? d->theta[d->n_theta > 1 ? o : 0] : L->theta_out;
                    d->add[o] = (double)st->bias_v[l][o] / ((double)L->vth_mant * (1 << NC_LOIHI_VTH_SHIFT)) * th;
                }
            }
        }
        if (role != NC_LOIHI_ROLE_WEIGHTED)
            continue;
        const nc_loihi_layer *L = &q->layers[q->layer_of[i]];
        if (!(st->wt[i] = malloc((size_t)L->n_weight * sizeof(int32_t)))) {
            free(area);
            return nc_fail(err, NC_ERR_MEMORY, "loihi engine: out of memory for the weights of '%s'", n->name);
        }
        const nc_tensor *W = n->weight;
        if (n->kind == NC_NODE_DENSE) { /* [Fin][Fout] */
            int64_t fout = W->shape[0], fin = W->shape[1];
            for (int64_t o = 0; o < fout; o++)
                for (int64_t k = 0; k < fin; k++)
                    st->wt[i][k * fout + o] = L->weight[o * fin + k];
        } else { /* [Cin][KH][KW][Cout/groups] */
            int64_t cout = W->shape[0], cin_g = W->shape[1], kh = W->shape[2], kw = W->shape[3];
            int groups = n->groups > 0 ? n->groups : 1;
            int64_t cout_g = cout / groups;
            for (int64_t o = 0; o < cout; o++)
                for (int64_t ci = 0; ci < cin_g; ci++)
                    for (int64_t y = 0; y < kh; y++)
                        for (int64_t x = 0; x < kw; x++) {
                            int64_t cig = (o / cout_g) * cin_g + ci;
                            st->wt[i][((cig * kh + y) * kw + x) * cout_g + o % cout_g] =
                                L->weight[((o * cin_g + ci) * kh + y) * kw + x];
                        }
        }
    }
    free(area);
    return NC_OK;
}

static nc_status quantise_loaded(loihi_state *st, nc_error *err)
{
    prepared_free(st);
    memset(&st->q_err, 0, sizeof st->q_err);
    st->has_if = 0;
    for (int i = 0; i < st->net->n_nodes; i++)
        st->has_if |= st->net->nodes[i].kind == NC_NODE_NEURON && st->net->nodes[i].neuron.model == NC_NEURON_IF;
    if (!st->has_if)
        return NC_OK; /* an ANN: ANN and QCFS mode only, until it is converted and loaded again */
    nc_status s = nc_loihi_quantise(st->net, &st->opts.quant, &st->q, &st->q_err);
    if (s == NC_OK)
        s = prepare(st, &st->q_err);
    if (s != NC_OK) {
        prepared_free(st);
        if (err)
            *err = st->q_err;
    }
    return s;
}

static nc_status loihi_load(nc_engine *e, const nc_net *net, nc_error *err)
{
    loihi_state *st = e->impl;
    if (!net || net->n_nodes < 2 || net->input != 0 || net->output != net->n_nodes - 1)
        return nc_fail(err, NC_ERR_ARGUMENT,
                       "loihi engine: the network must start with its input node and end with its output node");
    nc_status s = nc_engine_load(st->cpu, net, err);
    if (s != NC_OK)
        return s;
    st->net = net;
    s = quantise_loaded(st, err);
    if (s != NC_OK)
        st->net = NULL;
    return s;
}

static int loihi_supports(nc_engine *e, const nc_net *net, int node, char *why, size_t why_size)
{
    (void)e;
    return nc_loihi_node_supported(net, node, why, why_size);
}

static void loihi_destroy(nc_engine *e)
{
    loihi_state *st = e->impl;
    if (!st)
        return;
    prepared_free(st);
    nc_engine_free(st->cpu);
    nc_workers_free(st->workers);
    free(st);
    e->impl = NULL;
}

static const nc_engine_ops loihi_ops = {
    .name = "loihi",
    .caps = NC_CAP_SNN | NC_CAP_FIXED_POINT,
    .supports = loihi_supports,
    .load = loihi_load,
    .forward = loihi_forward,
    .destroy = loihi_destroy,
};

nc_loihi_options nc_loihi_options_default(void)
{
    return (nc_loihi_options){.quant = nc_loihi_quant_options_default(), .reset = NC_RESET_SUBTRACT,
                              .compare = NC_FIRE_GT, .delay = NC_LOIHI_DELAY_COMPENSATED, .graded = 0,
                              .message_bits = 8};
}

nc_engine *nc_engine_loihi_new(void)
{
    nc_engine *e = calloc(1, sizeof *e);
    loihi_state *st = calloc(1, sizeof *st);
    if (st)
        st->cpu = nc_engine_cpu_new();
    if (!e || !st || !st->cpu) {
        if (st)
            nc_engine_free(st->cpu);
        free(st);
        free(e);
        return NULL;
    }
    st->opts = nc_loihi_options_default();
    e->ops = &loihi_ops;
    e->impl = st;
    return e;
}

int nc_engine_is_loihi(const nc_engine *e) { return e && e->ops == &loihi_ops; }

nc_status nc_engine_loihi_set_options(nc_engine *e, const nc_loihi_options *o, nc_error *err)
{
    if (!nc_engine_is_loihi(e) || !o)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi options: not a loihi engine, or no options");
    if (o->reset != NC_RESET_SUBTRACT && o->reset != NC_RESET_ZERO)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi options: unknown reset %d", (int)o->reset);
    if (o->compare != NC_FIRE_GE && o->compare != NC_FIRE_GT)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi options: unknown comparison %d", (int)o->compare);
    if (o->delay != NC_LOIHI_DELAY_COMPENSATED && o->delay != NC_LOIHI_DELAY_OFF && o->delay != NC_LOIHI_DELAY_RAW)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi options: unknown delay mode %d", (int)o->delay);
    if (o->graded && (o->message_bits < 1 || o->message_bits > 24))
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi options: graded spikes need 1 … 24 message bits, got %d",
                       o->message_bits);
    if (o->quant.vth_target < 1 || o->quant.vth_target > NC_LOIHI_VTH_MAX)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi options: the threshold mantissa target must be 1 … %d, got %d",
                       NC_LOIHI_VTH_MAX, o->quant.vth_target);
    if (o->quant.input_frac_bits < 0 || o->quant.input_frac_bits > 16)
        return nc_fail(err, NC_ERR_ARGUMENT, "loihi options: input fractional bits must be 0 … 16, got %d",
                       o->quant.input_frac_bits);
    loihi_state *st = e->impl;
    int requantise = st->opts.quant.vth_target != o->quant.vth_target ||
                     st->opts.quant.input_frac_bits != o->quant.input_frac_bits;
    st->opts = *o;
    return st->net && requantise ? quantise_loaded(st, err) : NC_OK;
}

nc_loihi_options nc_engine_loihi_get_options(const nc_engine *e)
{
    return nc_engine_is_loihi(e) ? ((const loihi_state *)e->impl)->opts : nc_loihi_options_default();
}

const nc_loihi_net *nc_engine_loihi_quantised(const nc_engine *e)
{
    return nc_engine_is_loihi(e) ? ((const loihi_state *)e->impl)->q : NULL;
}

int nc_engine_loihi_delay_steps(const nc_engine *e)
{
    const nc_loihi_net *q = nc_engine_loihi_quantised(e);
    return q ? q->max_depth : 0;
}

int64_t nc_engine_loihi_latency(const nc_engine *e, int T)
{
    const loihi_state *st = nc_engine_is_loihi(e) ? e->impl : NULL;
    return st && st->opts.delay == NC_LOIHI_DELAY_COMPENSATED ? (int64_t)T + nc_engine_loihi_delay_steps(e) : T;
}

nc_loihi_layer_stats nc_engine_loihi_layer_stats(const nc_engine *e, int layer)
{
    const loihi_state *st = nc_engine_is_loihi(e) ? e->impl : NULL;
    nc_loihi_layer_stats none = {0};
    return st && st->q && st->stats && layer >= 0 && layer < st->q->n_layers ? st->stats[layer] : none;
}

void nc_engine_loihi_reset_stats(nc_engine *e)
{
    loihi_state *st = nc_engine_is_loihi(e) ? e->impl : NULL;
    if (st && st->q && st->stats)
        memset(st->stats, 0, (size_t)st->q->n_layers * sizeof *st->stats);
}
