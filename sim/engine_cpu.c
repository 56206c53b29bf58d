/* engine_cpu.c — the CPU engine: the reference every other engine is checked
 * against.  Kernels live in nc_cpu_ops.c; this file walks the graph.
 *
 * Values.  Every node's output is one buffer of rows × numel floats.  In ANN
 * and QCFS mode rows = N.  In SNN mode rows = T·N, time-major, so that a conv
 * or dense layer runs ONE GEMM for all steps; except that a value which is the
 * same at every step ("constant": the direct-encoded input and everything
 * computed from it before the first IF neuron or gated max pool) is computed
 * once with rows = N and read with a step stride of 0.  Those layers are
 * linear and time-invariant, so this is exact and saves T−1 GEMMs each.
 *
 * Memory.  A buffer is released after its last reader ran; a single-input
 * element-wise node (neuron, affine, scale, flatten, output) takes over its
 * input's buffer when it is that input's last reader, and works in place.
 * Released buffers go to a pool that later nodes and the next pass reuse;
 * after a pass, the pool keeps only the buffers that pass used.
 *
 * Recurrent nets.  A net with an NC_NODE_RECURRENT node runs step by step
 * (forward_steps): every node keeps all T steps and step t of every node runs
 * before step t+1 of any, with the same kernels on N rows and the neuron
 * states carried from step to step (sim/nc_neuron_models.h).  NIR neuron
 * models and recurrent edges have no ANN function: SNN mode only.
 *
 * Event-driven layers.  In SNN mode a conv (groups 1) or dense layer whose
 * input is mostly zeros (spikes after an IF neuron, possibly pooled or
 * flattened) runs event-driven: only the non-zero inputs are added up, with
 * the weight re-laid out for it once per pass (nc_conv2d_events,
 * nc_dense_events; see use_events for the density crossovers).  The sums run
 * in another order than the GEMM: results agree within float rounding.
 *
 * Threads.  OpenBLAS runs on one thread; GEMMs (dense, im2col conv2d),
 * event-driven layers and the row-wise loops (pools, neurons, IF, affine,
 * encoding) split their rows (a dense layer with few rows: its outputs)
 * over the engine's worker threads (started once, woken per job; see
 * nc_workers.h), which take chunks of rows from a shared counter, when a
 * layer is big enough to pay for it (NC_CPU_PARALLEL_MIN).  One engine runs
 * one forward pass at a time. */
#include "nc_cpu_ops.h"
#include "nc_engine.h"
#include "nc_neuron_models.h"
#include "nc_workers.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* NIR neuron models run through sim/nc_neuron_models.c.  Set to 1 once that
 * file is in the sim library; while 0, they fail with NC_ERR_UNSUPPORTED. */
#ifndef NC_CPU_NIR_MODELS
#define NC_CPU_NIR_MODELS 1
#endif

/* Below this many floats a row-wise loop runs on the calling thread only:
 * starting a thread costs tens of microseconds. */
#define NC_CPU_PARALLEL_MIN (1 << 16)

/* SNN mode: a conv (groups 1) or dense layer whose input has at most this
 * fraction of non-zero values (spikes, or pooled spikes) runs event-driven
 * (nc_conv2d_events, nc_dense_events) instead of im2col + GEMM or a GEMM.
 * Crossovers measured on 2 AVX2 cores (Zen, OpenBLAS 0.3.21), one thread,
 * 3×3 convs of 16–64 channels at 14×14 and 28×28: the event path is as fast
 * as the GEMM at 50–60 % non-zero inputs and 2–3× faster at 10 %; dense
 * layers (256–3136 inputs) break even at 10–15 %, as the GEMM runs near
 * peak there.  Converted nets fire at 5–30 %. */
#ifndef NC_CPU_EVENT_MAX_DENSITY
#define NC_CPU_EVENT_MAX_DENSITY 0.4
#endif
#ifndef NC_CPU_EVENT_MAX_DENSITY_DENSE
#define NC_CPU_EVENT_MAX_DENSITY_DENSE 0.1
#endif

/* A buffer kept for reuse: fresh memory costs a page fault per 4 KiB on first
 * touch (measured: 100 MB fresh 180 ms, reused 10 ms), so buffers freed in a
 * forward pass serve later nodes and the next pass. */
typedef struct pool_block {
    float *data;
    size_t bytes;
    int in_use;
    int used_this_run;
} pool_block;

typedef struct cpu_state {
    nc_window *win; /* per node: window geometry of conv2d and pools      */
    int *last_use;  /* per node: index of the last node that reads it     */
    float **evw;    /* per node: event-driven weight layout, made on first use */
    unsigned *evw_pass; /* per node: the pass that last filled evw (weights may
                         * change between passes: refreshed once per pass) */
    unsigned pass;  /* forward passes run                                  */
    int n_nodes;
    int recurrent;  /* the net has a recurrent edge: run step by step      */
    pool_block *pool;
    int n_pool, pool_capacity;
    /* the kernels' workspace, kept from pass to pass like the pool's blocks:
     * memory freed and allocated again at every batch comes back as fresh
     * pages, and faulting those in (the kernel zeroes each one) competed
     * with the workbench's main thread for the memory system */
    float *work;
    size_t work_floats;
    nc_workers *workers; /* started on the first parallel job             */
} cpu_state;

typedef struct cpu_value {
    float *data;
    int64_t rows;   /* N, or T·N for a value that changes with the step   */
    int constant;   /* SNN: one step of N rows that holds at every step    */
    int owned;      /* 1: a pool block; 0: borrowed (the caller's input)  */
    int ready;      /* computed ahead of its turn, by a fused reader's writer */
} cpu_value;

typedef struct run_ctx {
    nc_engine *e;
    const nc_net *net;
    cpu_state *st;
    const nc_run_options *opts;
    int snn;
    int T;
    int64_t N;
    int threads;
    cpu_value *val;
    float *work;
    size_t work_floats;
    nc_error *err;
    int seq;            /* the input is a sequence [T, N, ...]            */
    /* step-by-step mode (forward_steps): node outputs go to step_out, a
     * stateful neuron carries its state in step_state */
    int stepping;
    float *step_out;
    float *step_state;
} run_ctx;

/* ---- row-parallel jobs ---------------------------------------------------- */

typedef enum job_op {
    JOB_CONV, JOB_AVGPOOL, JOB_MAXPOOL, JOB_GAP, JOB_AFFINE, JOB_SCALE, JOB_RELU, JOB_CLIP, JOB_QCFS,
    JOB_IF, JOB_NIR, JOB_GATED, JOB_POISSON, JOB_CONV_EVENTS, JOB_DENSE_EVENTS, JOB_MAXPOOL_RUNNING,
    JOB_DENSE, JOB_DENSE_COLS, JOB_CONV_EVENTS_MAXPOOL
} job_op;

/* One layer's row-wise work: rows [r0, r1) of `in` and `out`.  For IF and
 * the gated and running-sum max pools a "row" is a sample and the steps are
 * in_step/out_step apart; for Poisson encoding a "row" is a step. */
typedef struct row_job {
    job_op op;
    const nc_node *node;
    const nc_window *g;
    const nc_window *pool;     /* conv fused with its running max pool     */
    const float *in;
    float *out;
    int64_t in_row, out_row;   /* floats per row                           */
    int64_t in_step, out_step; /* IF, gated                                */
    int T;
    int c;
    int64_t inner;             /* floats per channel of one row           */
    int *counts;               /* gated                                    */
    uint64_t seed;             /* Poisson                                  */
    float *work;               /* conv, events, running max: one workspace per thread slot */
    size_t work_floats;        /* floats per slot                          */
    float *state;              /* IF: carried membranes (NULL: start anew) */
    const float *wt;           /* event-driven conv / dense: weight layout */
} row_job;

/* Runs rows [r0, r1) of job j; `slot` (0 … threads−1) picks the workspace. */
static void job_run(const row_job *j, int64_t r0, int64_t r1, int slot)
{
    const float *in = j->in + r0 * j->in_row;
    float *out = j->out + r0 * j->out_row;
    int64_t n = r1 - r0;
    const nc_neuron *nr = j->node ? &j->node->neuron : NULL;
    switch (j->op) {
    case JOB_CONV:
        nc_conv2d(j->g, (int)j->node->shape[0], j->node->groups, n, in, j->node->weight->data,
                  j->node->bias ? j->node->bias->data : NULL, out, j->work + (size_t)slot * j->work_floats,
                  j->work_floats);
        break;
    case JOB_AVGPOOL: nc_avgpool(j->g, j->node->count_include_pad, n, in, out); break;
    case JOB_MAXPOOL: nc_maxpool(j->g, n, in, out); break;
    case JOB_DENSE:
        nc_dense(n, (int)j->in_row, (int)j->out_row, in, j->node->weight->data,
                 j->node->bias ? j->node->bias->data : NULL, out);
        break;
    case JOB_DENSE_COLS: /* a "row" is an output: outputs [r0, r1) of all j->inner rows */
        nc_dense_cols(j->inner, (int)j->in_row, (int)j->out_row, (int)r0, (int)r1, j->in, j->node->weight->data,
                      j->node->bias ? j->node->bias->data : NULL, j->out);
        break;
    case JOB_MAXPOOL_RUNNING:
        nc_maxpool_running(j->g, j->T, n, in, j->in_step, out, j->out_step, j->work + (size_t)slot * j->work_floats);
        break;
    case JOB_GAP: nc_global_avgpool(n, j->c, j->inner, in, out); break;
    case JOB_AFFINE:
        nc_affine(n, j->c, j->inner, j->node->weight->data, j->node->bias->data, in, out);
        break;
    case JOB_SCALE:
        nc_scale(n, j->in_row, j->node->weight->data, nc_tensor_numel(j->node->weight), in, out);
        break;
    case JOB_RELU: nc_relu(n * j->in_row, in, out); break;
    case JOB_CLIP: nc_clip(n * j->in_row, nr->clip_min, nr->clip_max, in, out); break;
    case JOB_QCFS:
        nc_qcfs(n, j->c, j->inner, nr->threshold, nr->n_threshold, nr->levels, nr->shift, in, out);
        break;
    case JOB_IF: {
        nc_if_params p = {nr->threshold, nr->n_threshold, nr->v0_fraction, nr->reset, nr->compare};
        if (j->state)
            nc_if_run_state(&p, j->T, n, j->c, j->inner, in, j->in_step, out, j->out_step,
                            j->state + r0 * j->in_row);
        else
            nc_if_run(&p, j->T, n, j->c, j->inner, in, j->in_step, out, j->out_step, NULL);
        break;
    }
    case JOB_NIR: /* not split: the state of a NIR model is not laid out per sample */
        break;
    case JOB_GATED:
        nc_maxpool_gated(j->g, j->T, n, in, j->in_step, out, j->out_step,
                         j->counts + r0 * (j->in_row));
        break;
    case JOB_POISSON: nc_poisson_encode(j->seed, (int)r0, (int)n, j->in_row, j->in, out); break;
    case JOB_CONV_EVENTS:
        nc_conv2d_events(j->g, (int)j->node->shape[0], n, in, j->wt, j->node->bias ? j->node->bias->data : NULL,
                         out, j->work + (size_t)slot * j->work_floats);
        break;
    case JOB_CONV_EVENTS_MAXPOOL:
        nc_conv2d_events_maxpool(j->g, (int)j->node->shape[0], j->pool, j->T, n, in, j->in_step, j->wt,
                                 j->node->bias ? j->node->bias->data : NULL, out, j->out_step,
                                 j->work + (size_t)slot * j->work_floats);
        break;
    case JOB_DENSE_EVENTS:
        nc_dense_events(n, (int)j->in_row, (int)j->out_row, in, j->wt,
                        j->node->bias ? j->node->bias->data : NULL, out, j->work + (size_t)slot * j->work_floats);
        break;
    }
}

static void job_rows(void *ctx, int64_t r0, int64_t r1, int slot) { job_run(ctx, r0, r1, slot); }

/* The threads job_parallel will use for `rows` rows of `cost` work. */
static int job_threads(int threads, int64_t rows, int64_t cost)
{
    if (threads > rows)
        threads = (int)rows;
    return threads < 1 || cost < NC_CPU_PARALLEL_MIN ? 1 : threads;
}

/* Runs rows [0, rows) of a job over up to `threads` threads (the caller's
 * and the engine's workers); `floats` is the size of the work, to decide
 * whether threads pay off. */
static void job_parallel(cpu_state *st, const row_job *j, int threads, int64_t rows, int64_t floats)
{
    threads = job_threads(threads, rows, floats);
    if (threads > 1 && !st->workers)
        st->workers = nc_workers_new(); /* NULL: this thread does it all */
    if (threads == 1 || !st->workers) {
        job_run(j, 0, rows, 0);
        return;
    }
    /* about 8 chunks per thread: small enough to balance, big enough that
     * each chunk keeps a kernel busy for a while; but one per thread for the
     * im2col conv and the dense GEMM, which get less efficient on fewer rows */
    int per_thread = j->op == JOB_CONV || j->op == JOB_DENSE || j->op == JOB_DENSE_COLS ? 1 : 8;
    nc_workers_run(st->workers, threads, rows, (rows + per_thread * threads - 1) / (per_thread * threads), job_rows,
                   (void *)j);
}

/* ---- values ----------------------------------------------------------------- */

static nc_status node_fail(run_ctx *c, int i, nc_status code, const char *what)
{
    const nc_node *n = &c->net->nodes[i];
    return nc_fail(c->err, code, "cpu engine, node '%s' (%s): %s", n->name, nc_node_kind_name(n->kind),
                   what);
}

/* The machine's RAM, asked once: sysconf(_SC_PHYS_PAGES) is a sysinfo()
 * system call, and every value of every pass checks against it. */
static double physical_bytes(void)
{
    static _Atomic double bytes; /* 0: not asked yet (engines may run in several threads) */
    double b = bytes;
    if (b == 0) {
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        bytes = b = pages > 0 && size > 0 ? (double)pages * (double)size : 1e300;
    }
    return b;
}

/* The smallest free block of at least `bytes` (and not wastefully larger),
 * or a new one; NULL when memory runs out. */
static float *pool_get(cpu_state *st, size_t bytes)
{
    int best = -1;
    for (int k = 0; k < st->n_pool; k++) {
        const pool_block *b = &st->pool[k];
        if (!b->in_use && b->bytes >= bytes && b->bytes / 4 <= bytes &&
            (best < 0 || b->bytes < st->pool[best].bytes))
            best = k;
    }
    if (best < 0) {
        pool_block *pool = nc_grow(st->pool, st->n_pool, &st->pool_capacity, 16, sizeof *pool);
        if (!pool)
            return NULL;
        st->pool = pool;
        /* cache-line aligned: a row of 16 floats is then one line, not two
         * (the AVX-512 dense kernel on two misaligned operands: +20 %) */
        void *data = NULL;
        if (posix_memalign(&data, 64, bytes ? (bytes + 63) / 64 * 64 : 64) != 0)
            return NULL;
        best = st->n_pool++;
        st->pool[best] = (pool_block){data, bytes, 0, 0};
    }
    st->pool[best].in_use = 1;
    st->pool[best].used_this_run = 1;
    return st->pool[best].data;
}

static void pool_put(cpu_state *st, float *data)
{
    for (int k = 0; k < st->n_pool; k++)
        if (st->pool[k].data == data)
            st->pool[k].in_use = 0;
}

/* After a pass: keep the blocks it used (the next pass likely needs the same
 * sizes), free the others so that one big pass does not pin memory forever. */
static void pool_trim(cpu_state *st, int all)
{
    int kept = 0;
    for (int k = 0; k < st->n_pool; k++) {
        pool_block b = st->pool[k];
        if (all || (!b.in_use && !b.used_this_run)) {
            free(b.data);
            continue;
        }
        b.used_this_run = 0;
        st->pool[kept++] = b;
    }
    st->n_pool = kept;
}

static nc_status value_alloc(run_ctx *c, int i, int64_t rows, int constant, cpu_value *v)
{
    if (c->step_out) { /* step-by-step: this step's slice of the node's buffer */
        *v = (cpu_value){c->step_out, rows, 0, 0};
        return NC_OK;
    }
    size_t floats, bytes;
    int64_t numel = nc_node_numel(&c->net->nodes[i]);
    if (nc_mul_size((size_t)rows, (size_t)numel, &floats) || nc_mul_size(floats, sizeof(float), &bytes))
        return node_fail(c, i, NC_ERR_MEMORY, "the output size overflows; use a smaller batch");
    /* more than the machine's RAM cannot work: say so instead of letting an
     * overcommitted malloc succeed and the OOM killer end the process later */
    v->data = (double)bytes <= physical_bytes() ? pool_get(c->st, bytes) : NULL;
    if (!v->data) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "out of memory for %zu bytes (%lld rows x %lld values); use a smaller batch or fewer steps",
                 bytes, (long long)rows, (long long)numel);
        return node_fail(c, i, NC_ERR_MEMORY, msg);
    }
    v->rows = rows;
    v->constant = constant;
    v->owned = 1;
    return NC_OK;
}

static void value_free(run_ctx *c, cpu_value *v)
{
    if (v->owned && v->data)
        pool_put(c->st, v->data);
    memset(v, 0, sizeof *v);
}

static int64_t numel_of(const run_ctx *c, int i) { return nc_node_numel(&c->net->nodes[i]); }
static const cpu_value *input_value(const run_ctx *c, int i, int k)
{
    return &c->val[c->net->nodes[i].inputs[k]];
}

/* Output value of single-input node i with the same rows as its input: takes
 * over the input's buffer when node i is its last reader (then the node
 * works in place), else allocates.  *src: where the node reads its input. */
static nc_status value_like_input(run_ctx *c, int i, cpu_value *out, const float **src)
{
    int from = c->net->nodes[i].inputs[0];
    cpu_value *in = &c->val[from];
    *src = in->data;
    if (in->owned && c->st->last_use[from] == i && numel_of(c, from) == numel_of(c, i)) {
        *out = *in;
        out->ready = 0; /* node i's value is computed now, in this buffer */
        in->data = NULL;
        in->owned = 0;
        return NC_OK;
    }
    return value_alloc(c, i, in->rows, in->constant, out);
}

/* flatten and output: the same values under another shape.  A borrowed
 * input (the caller's tensor, alive for the whole pass and never written)
 * is borrowed again instead of copied, when it is cache-line aligned as
 * the engine's own buffers are (else the copy costs less than the kernels
 * reading misaligned rows). */
static nc_status run_copy(run_ctx *c, int i, cpu_value *out)
{
    const cpu_value *in = input_value(c, i, 0);
    if (!in->owned && !c->step_out && numel_of(c, c->net->nodes[i].inputs[0]) == numel_of(c, i) &&
        (uintptr_t)in->data % 64 == 0) {
        *out = (cpu_value){in->data, in->rows, in->constant, 0, 0};
        return NC_OK;
    }
    const float *src;
    nc_status s = value_like_input(c, i, out, &src);
    if (s == NC_OK && out->data != src)
        memcpy(out->data, src, (size_t)(out->rows * numel_of(c, i)) * sizeof(float));
    return s;
}

/* A value as all T·N rows: `v` itself, or (constant) a broadcast copy in
 * *tmp, a pool block (pool_put it; NULL when v itself is used). */
static nc_status value_expanded(run_ctx *c, int i, const cpu_value *v, float **tmp,
                                const float **data)
{
    *tmp = NULL;
    *data = v->data;
    if (!v->constant || c->T == 1)
        return NC_OK;
    int64_t step = c->N * numel_of(c, i);
    size_t bytes;
    /* from the pool (given back by the caller with pool_put): an observed
     * constant is expanded at every batch, hundreds of MB on a big net */
    if (nc_mul_size((size_t)step * sizeof(float), (size_t)c->T, &bytes) || !(*tmp = pool_get(c->st, bytes)))
        return node_fail(c, i, NC_ERR_MEMORY, "out of memory to expand a constant value over the steps");
    for (int t = 0; t < c->T; t++)
        memcpy(*tmp + t * step, v->data, (size_t)step * sizeof(float));
    *data = *tmp;
    return NC_OK;
}

/* ---- node kernels ----------------------------------------------------------- */

static nc_status run_input(run_ctx *c, int i, const nc_tensor *input, cpu_value *out)
{
    int64_t numel = numel_of(c, i);
    if (c->seq) { /* [T, N, ...] already is the time-major layout */
        *out = (cpu_value){input->data, (int64_t)c->T * c->N, 0, 0};
        return NC_OK;
    }
    if (!c->snn || c->opts->encoding == NC_ENCODING_DIRECT) {
        /* borrowed: the caller's tensor outlives the forward pass */
        *out = (cpu_value){input->data, c->N, c->snn, 0};
        return NC_OK;
    }
    nc_status s = value_alloc(c, i, (int64_t)c->T * c->N, 0, out);
    if (s != NC_OK)
        return s;
    row_job j = {.op = JOB_POISSON, .in = input->data, .out = out->data, .in_row = c->N * numel,
                 .out_row = c->N * numel, .seed = c->opts->seed};
    job_parallel(c->st, &j, c->threads, c->T, (int64_t)c->T * c->N * numel);
    return NC_OK;
}

/* Conv splits its rows over the threads, each running im2col, a single-
 * threaded GEMM and the scatter on its own slice: measured on 2 cores, this
 * beats one GEMM on OpenBLAS's 2 threads (28×28, 1→32 ch, 64 images: 25 vs
 * 15 GFLOP/s; 14×14, 32→64: 53 vs 45), as im2col and scatter run in parallel
 * too.  OpenBLAS is set to 1 thread meanwhile so the slices do not fight over
 * its pool. */
/* The workspace of `threads` slots of `per_slot` floats in c->work. */
static nc_status work_reserve(run_ctx *c, int i, size_t per_slot, int threads)
{
    size_t need;
    if (nc_mul_size(per_slot, (size_t)threads, &need))
        return node_fail(c, i, NC_ERR_MEMORY, "the workspace size overflows");
    if (need > c->work_floats) {
        /* cache-line aligned (and the event kernels' slots are whole lines):
         * their channel-last sums and buffers are read 16 floats at a time.
         * Nothing in it outlives a job, so nothing is copied over. */
        void *w = NULL;
        if (posix_memalign(&w, 64, need * sizeof(float)) != 0)
            return node_fail(c, i, NC_ERR_MEMORY, "out of memory for the workspace");
        free(c->work);
        c->work = w;
        c->work_floats = need;
    }
    return NC_OK;
}

/* SNN: whether node i (conv with groups 1, or dense) runs event-driven on its
 * input `in`: when the fraction of non-zero inputs is low (spikes).  The
 * weight layout of the event kernels is allocated on first use and filled
 * once per forward pass (the caller may change weights between passes). */
static int use_events(run_ctx *c, int i, const cpu_value *in)
{
    const nc_node *n = &c->net->nodes[i];
    if (!c->snn || (n->kind == NC_NODE_CONV2D && n->groups != 1))
        return 0;
    /* the density of a sample of the input: 64 values of every 512 (the choice
     * only decides the speed, both paths compute the same sums) */
    int64_t total = in->rows * numel_of(c, n->inputs[0]), seen = 0, nonzero = 0;
    for (int64_t k = 0; k < total; k += 512) {
        int64_t len = total - k < 64 ? total - k : 64;
        nonzero += nc_count_nonzero(len, in->data + k);
        seen += len;
    }
    double max_density = n->kind == NC_NODE_CONV2D ? NC_CPU_EVENT_MAX_DENSITY : NC_CPU_EVENT_MAX_DENSITY_DENSE;
    if (seen < 1 || (double)nonzero > max_density * (double)seen)
        return 0;
    /* cache-line aligned: the kernels read its rows 16 floats at a time (on
     * rows misaligned as malloc left a 128 KiB block, each read spans two
     * lines: the MLP's event dense ran 26 % slower, the CNN's conv 17 %) */
    void *fresh = NULL;
    if (!c->st->evw[i] && posix_memalign(&fresh, 64, (size_t)nc_tensor_numel(n->weight) * sizeof(float) + 64) != 0)
        return 0; /* the dense path needs no extra memory */
    if (fresh)
        c->st->evw[i] = fresh;
    if (c->st->evw_pass[i] != c->st->pass) {
        float *wt = c->st->evw[i];
        if (n->kind == NC_NODE_CONV2D)
            nc_conv2d_events_weight(&c->st->win[i], (int)n->shape[0], n->weight->data, wt);
        else
            nc_dense_events_weight((int)n->weight->shape[1], (int)n->weight->shape[0], n->weight->data, wt);
        c->st->evw_pass[i] = c->st->pass;
    }
    return 1;
}

static nc_status run_events(run_ctx *c, int i, const cpu_value *in, cpu_value *out)
{
    const nc_node *n = &c->net->nodes[i];
    int64_t in_numel = numel_of(c, n->inputs[0]), out_numel = numel_of(c, i);
    int conv = n->kind == NC_NODE_CONV2D;
    size_t per_slot = conv ? nc_conv2d_events_work_floats(&c->st->win[i], (int)n->shape[0])
                           : nc_dense_events_work_floats((int)in_numel);
    /* the kernels keep int64 tables at the start of their slot: round the
     * slot to 16 floats so that every slot starts 64-byte aligned relative to
     * the (malloc-aligned) workspace */
    per_slot = (per_slot + 15) & ~(size_t)15;
    /* cost: about one FMA per output and non-zero input would be the density
     * times the MACs; count the dense MACs / 64 as the floats of work, plus
     * the inputs, which the event lists read all of (a classifier of 10
     * outputs costs mostly that: 13 µs a pass for the MLP's, on one thread) */
    int64_t cost = (nc_node_macs(c->net, i) / 64 + in_numel) * in->rows;
    int threads = job_threads(c->threads, in->rows, cost);
    nc_status s = work_reserve(c, i, per_slot, threads);
    if (s != NC_OK)
        return s;
    row_job j = {.op = conv ? JOB_CONV_EVENTS : JOB_DENSE_EVENTS, .node = n, .g = &c->st->win[i],
                 .in = in->data, .out = out->data, .in_row = in_numel, .out_row = out_numel,
                 .work = c->work, .work_floats = per_slot, .wt = c->st->evw[i]};
    job_parallel(c->st, &j, threads, in->rows, cost);
    return NC_OK;
}

/* SNN: the running (PRE_SPIKE) max pool that is the only reader of the
 * event-driven conv i, when the two can run fused (nc_conv2d_events_maxpool,
 * which keeps each step's currents in cache): no observer wants the conv's
 * currents, the pass is not step by step, and every thread gets a sample
 * (the fused job splits samples, not steps).  Else −1. */
static int fused_max_pool(const run_ctx *c, int i, const cpu_value *in)
{
    const nc_observer *ob = c->opts->observer;
    int p = c->st->last_use[i];
    if (!c->snn || c->stepping || in->constant || (ob && ob->observe) || p == i || i == c->net->output ||
        c->N < c->threads)
        return -1;
    const nc_node *pool = &c->net->nodes[p];
    if (pool->kind != NC_NODE_MAXPOOL || pool->maxpool_strategy == NC_MAXPOOL_GATED ||
        pool->maxpool_strategy == NC_MAXPOOL_AVG)
        return -1;
    for (int k = i + 1; k <= p; k++) /* p reads i once, and nothing else does */
        for (int m = 0; m < c->net->nodes[k].n_inputs; m++)
            if (c->net->nodes[k].inputs[m] == i && (k != p || m != 0))
                return -1;
    return p;
}

/* Conv i and its max pool p in one job per sample: p's value is computed now
 * (marked ready, so that its own turn only reports it); i gets none. */
static nc_status run_events_max_pool(run_ctx *c, int i, int p, const cpu_value *in)
{
    const nc_node *n = &c->net->nodes[i];
    const nc_window *conv = &c->st->win[i], *pool = &c->st->win[p];
    cpu_value *out = &c->val[p];
    nc_status s = value_alloc(c, p, in->rows, 0, out);
    if (s != NC_OK)
        return s;
    size_t per_slot = (nc_conv2d_events_maxpool_work_floats(conv, (int)n->shape[0], pool) + 15) & ~(size_t)15;
    int64_t in_row = numel_of(c, n->inputs[0]), out_row = numel_of(c, p);
    int64_t cost = (nc_node_macs(c->net, i) / 64 + in_row) * in->rows; /* as in run_events */
    int threads = job_threads(c->threads, c->N, cost);
    if ((s = work_reserve(c, i, per_slot, threads)) != NC_OK)
        return s;
    row_job j = {.op = JOB_CONV_EVENTS_MAXPOOL, .node = n, .g = conv, .pool = pool, .in = in->data,
                 .out = out->data, .in_row = in_row, .out_row = out_row, .in_step = c->N * in_row,
                 .out_step = c->N * out_row, .T = c->T, .work = c->work, .work_floats = per_slot,
                 .wt = c->st->evw[i]};
    job_parallel(c->st, &j, threads, c->N, cost);
    out->ready = 1;
    return NC_OK;
}

static nc_status run_conv(run_ctx *c, int i, cpu_value *out)
{
    const nc_node *n = &c->net->nodes[i];
    const cpu_value *in = input_value(c, i, 0);
    const nc_window *g = &c->st->win[i];
    int cout = (int)n->shape[0];
    int events = use_events(c, i, in);
    int pool = events ? fused_max_pool(c, i, in) : -1;
    if (pool >= 0)
        return run_events_max_pool(c, i, pool, in);
    nc_status s = value_alloc(c, i, in->rows, in->constant, out);
    if (s != NC_OK)
        return s;
    if (events)
        return run_events(c, i, in, out);
    int64_t in_numel = numel_of(c, n->inputs[0]), out_numel = numel_of(c, i);
    int64_t macs = nc_node_macs(c->net, i) * in->rows;
    /* a conv row costs MACs, not floats: count 16 MACs as one float of work */
    int threads = job_threads(c->threads, in->rows, macs / 16);
    int64_t slice_rows = (in->rows + threads - 1) / threads;
    size_t per_slot = nc_conv2d_work_floats(g, cout, n->groups, slice_rows);
    if ((s = work_reserve(c, i, per_slot, threads)) != NC_OK)
        return s;
    row_job j = {.op = JOB_CONV, .node = n, .g = g, .in = in->data, .out = out->data,
                 .in_row = in_numel, .out_row = out_numel, .work = c->work, .work_floats = per_slot};
    job_parallel(c->st, &j, threads, in->rows, macs / 16);
    return NC_OK;
}

static nc_status run_dense(run_ctx *c, int i, cpu_value *out)
{
    const nc_node *n = &c->net->nodes[i];
    const cpu_value *in = input_value(c, i, 0);
    nc_status s = value_alloc(c, i, in->rows, in->constant, out);
    if (s == NC_OK && use_events(c, i, in))
        return run_events(c, i, in, out);
    if (s != NC_OK)
        return s;
    /* Our threads take slices of the rows (T·N in SNN mode), each a one-thread
     * GEMM, as for conv; with few rows, slices of the outputs instead. */
    int64_t macs = nc_node_macs(c->net, i) * in->rows;
    int fin = (int)n->weight->shape[1], fout = (int)n->weight->shape[0];
    int by_rows = in->rows >= 16 * (int64_t)c->threads;
    int threads = job_threads(c->threads, by_rows ? in->rows : fout / 16, macs / 16);
    row_job j = {.op = by_rows ? JOB_DENSE : JOB_DENSE_COLS, .node = n, .in = in->data, .out = out->data,
                 .in_row = fin, .out_row = fout, .inner = in->rows};
    job_parallel(c->st, &j, threads, by_rows ? in->rows : fout, macs / 16);
    return NC_OK;
}

/* Channels and floats per channel of node i's output, for per-channel ops. */
static void channel_split(const nc_node *n, int *ch, int64_t *inner)
{
    *ch = nc_node_channels(n);
    *inner = nc_node_numel(n) / (*ch > 0 ? *ch : 1);
}

static nc_status run_gated(run_ctx *c, int i, cpu_value *out)
{
    const nc_node *n = &c->net->nodes[i];
    const cpu_value *in = input_value(c, i, 0);
    int64_t in_numel = numel_of(c, n->inputs[0]), out_numel = numel_of(c, i);
    nc_status s = value_alloc(c, i, (int64_t)c->T * c->N, 0, out);
    if (s != NC_OK)
        return s;
    int *counts = malloc((size_t)(c->N * in_numel) * sizeof(int));
    if (!counts)
        return node_fail(c, i, NC_ERR_MEMORY, "out of memory for the spike counts");
    row_job j = {.op = JOB_GATED, .node = n, .g = &c->st->win[i], .in = in->data, .out = out->data,
                 .in_row = in_numel, .out_row = out_numel,
                 .in_step = in->constant ? 0 : c->N * in_numel, .out_step = c->N * out_numel,
                 .T = c->T, .counts = counts};
    job_parallel(c->st, &j, c->threads, c->N, (int64_t)c->T * c->N * in_numel);
    free(counts);
    return NC_OK;
}

/* PRE_SPIKE MaxPool over currents that change from step to step (they come
 * from spikes): the max of each step's currents would overestimate the max of
 * their average, an error that does not shrink with T.  Pooling the running
 * sums S_i(t) = Σ_{τ≤t} x_i(τ) and passing on the increments
 *     out(t) = max_i S_i(t) − max_i S_i(t−1)
 * stays causal and makes the pooled mean over T exactly the max of the mean
 * currents, which is what the ANN's max computes. */
static nc_status run_prespike_max(run_ctx *c, row_job *j, const cpu_value *in, cpu_value *out)
{
    /* one job row per sample, running over its T steps with its running sums
     * in the thread's workspace (the steps of a sample depend on each other) */
    int i = (int)(j->node - c->net->nodes);
    int threads = job_threads(c->threads, c->N, in->rows * j->in_row);
    nc_status s = work_reserve(c, i, (size_t)(j->in_row + j->out_row), threads);
    if (s != NC_OK)
        return s;
    j->op = JOB_MAXPOOL_RUNNING;
    j->T = c->T;
    j->in_step = c->N * j->in_row;
    j->out_step = c->N * j->out_row;
    j->work = c->work;
    j->work_floats = (size_t)(j->in_row + j->out_row);
    job_parallel(c->st, j, threads, c->N, in->rows * j->in_row);
    return NC_OK;
}

/* avgpool, maxpool (by mode and strategy) and global avgpool. */
static nc_status run_pool(run_ctx *c, int i, cpu_value *out)
{
    const nc_node *n = &c->net->nodes[i];
    if (n->kind == NC_NODE_MAXPOOL && c->snn && n->maxpool_strategy == NC_MAXPOOL_GATED)
        return run_gated(c, i, out);
    const cpu_value *in = input_value(c, i, 0);
    nc_status s = value_alloc(c, i, in->rows, in->constant, out);
    if (s != NC_OK)
        return s;
    row_job j = {.node = n, .g = &c->st->win[i], .in = in->data, .out = out->data,
                 .in_row = numel_of(c, n->inputs[0]), .out_row = numel_of(c, i)};
    if (n->kind == NC_NODE_GLOBAL_AVGPOOL) {
        j.op = JOB_GAP;
        j.c = (int)n->shape[0];
        j.inner = j.in_row / j.c;
    } else if (n->kind == NC_NODE_AVGPOOL || (c->snn && n->maxpool_strategy == NC_MAXPOOL_AVG)) {
        /* AVG: the MaxPool's window run as an average (its count_include_pad) */
        j.op = JOB_AVGPOOL;
    } else if (c->snn && !in->constant) {
        return run_prespike_max(c, &j, in, out);
    } else {
        /* ANN/QCFS, and a constant input in SNN: the max of this step's
         * inputs.  The engine does not reorder: PRE_SPIKE is exact when the
         * converter has moved the MaxPool before the IF (ReLU and max commute
         * in the ANN), so that it pools currents and one IF spikes on the
         * pooled current. */
        j.op = JOB_MAXPOOL;
    }
    job_parallel(c->st, &j, c->threads, in->rows, in->rows * j.in_row);
    return NC_OK;
}

static nc_status run_affine(run_ctx *c, int i, cpu_value *out)
{
    const nc_node *n = &c->net->nodes[i];
    const float *src;
    nc_status s = value_like_input(c, i, out, &src);
    if (s != NC_OK)
        return s;
    row_job j = {.op = JOB_AFFINE, .node = n, .in = src, .out = out->data};
    channel_split(n, &j.c, &j.inner);
    j.in_row = j.out_row = numel_of(c, i);
    job_parallel(c->st, &j, c->threads, out->rows, out->rows * j.in_row);
    return NC_OK;
}

/* NIR's Scale: a weight per value, or one for all. */
static nc_status run_scale(run_ctx *c, int i, cpu_value *out)
{
    const float *src;
    nc_status s = value_like_input(c, i, out, &src);
    if (s != NC_OK)
        return s;
    row_job j = {.op = JOB_SCALE, .node = &c->net->nodes[i], .in = src, .out = out->data,
                 .in_row = numel_of(c, i), .out_row = numel_of(c, i)};
    job_parallel(c->st, &j, c->threads, out->rows, out->rows * j.in_row);
    return NC_OK;
}

static int is_nir_model(nc_neuron_model m) { return nc_neuron_model_is_nir(m); }

/* The function a neuron computes on one value in this mode, as a job op. */
static job_op neuron_op(const run_ctx *c, const nc_node *n)
{
    switch (n->neuron.model) {
    case NC_NEURON_RELU: return JOB_RELU;
    case NC_NEURON_CLIP: return JOB_CLIP;
    case NC_NEURON_QCFS:
        /* in SNN mode a QCFS neuron that was not converted acts as its ANN function */
        return c->opts->mode == NC_MODE_QCFS ? JOB_QCFS : JOB_RELU;
    case NC_NEURON_IF:
        return c->snn ? JOB_IF : c->opts->mode == NC_MODE_QCFS ? JOB_QCFS : JOB_RELU;
    case NC_NEURON_LIF:
    case NC_NEURON_CUBA_LIF:
    case NC_NEURON_LI:
    case NC_NEURON_CUBA_LI:
    case NC_NEURON_INTEGRATOR:
    case NC_NEURON_NIR_IF:
    case NC_NEURON_THRESHOLD:
    case NC_NEURON_DELAY: return JOB_NIR;
    }
    return JOB_RELU;
}

/* Floats of a new state array, or NULL. */
static float *floats_new(int64_t count)
{
    return count >= 0 ? malloc((size_t)(count > 0 ? count : 1) * sizeof(float)) : NULL;
}

/* A new NIR model state for N samples, at its start; NULL on out of memory. */
static float *nir_state_new(const nc_node *n, int64_t N)
{
#if NC_CPU_NIR_MODELS
    nc_nm_params p = nc_nm_params_of(n);
    float *state = floats_new(nc_nm_state_floats(&p, N));
    if (state)
        nc_nm_state_init(&p, N, state);
    return state;
#else
    (void)n, (void)N;
    return NULL;
#endif
}

/* A NIR neuron model over all steps (or this step, step by step), with the
 * update of sim/nc_neuron_models.h; its state starts at 0 for every pass. */
static nc_status run_nir(run_ctx *c, int i, row_job *j, cpu_value *out)
{
    const nc_node *n = &c->net->nodes[i];
    if (!c->snn)
        return node_fail(c, i, NC_ERR_UNSUPPORTED, "a NIR neuron model has no ANN function; run it in SNN mode");
#if !NC_CPU_NIR_MODELS
    (void)n, (void)j, (void)out;
    return node_fail(c, i, NC_ERR_UNSUPPORTED, "NIR neuron models are not in this build yet");
#else
    const cpu_value *in = input_value(c, i, 0);
    nc_status s = in->constant ? value_alloc(c, i, (int64_t)c->T * c->N, 0, out)
                               : value_like_input(c, i, out, &j->in);
    if (s != NC_OK)
        return s;
    nc_nm_params p = nc_nm_params_of(n);
    float *state = c->step_state ? c->step_state : nir_state_new(n, c->N);
    if (!state)
        return node_fail(c, i, NC_ERR_MEMORY, "out of memory for the neuron state");
    nc_nm_run(&p, c->T, c->N, in->constant ? in->data : j->in, in->constant ? 0 : c->N * j->in_row,
              out->data, c->N * j->out_row, state);
    if (state != c->step_state)
        free(state);
    return NC_OK;
#endif
}

static nc_status observe_input(run_ctx *c, int i)
{
    const nc_observer *ob = c->opts->observer;
    if (!c->snn || c->stepping || !ob || !ob->observe_input)
        return NC_OK;
    int src = c->net->nodes[i].inputs[0];
    float *tmp;
    const float *data;
    nc_status s = value_expanded(c, src, &c->val[src], &tmp, &data);
    if (s == NC_OK)
        ob->observe_input(ob->user, i, data, (int64_t)c->T * c->N, numel_of(c, i));
    pool_put(c->st, tmp);
    return s;
}

static nc_status run_neuron(run_ctx *c, int i, cpu_value *out)
{
    const nc_node *n = &c->net->nodes[i];
    nc_status s = observe_input(c, i);
    if (s != NC_OK)
        return s;
    row_job j = {.op = neuron_op(c, n), .node = n, .state = c->step_state};
    channel_split(n, &j.c, &j.inner);
    j.in_row = j.out_row = numel_of(c, i);
    if (j.op == JOB_NIR)
        return run_nir(c, i, &j, out);
    const cpu_value *in = input_value(c, i, 0);
    if (j.op == JOB_IF && in->constant) {
        /* a constant current drives T different steps: a new T·N buffer */
        s = value_alloc(c, i, (int64_t)c->T * c->N, 0, out);
        j.in = in->data;
        j.in_step = 0;
    } else {
        s = value_like_input(c, i, out, &j.in);
        j.in_step = c->N * j.in_row;
    }
    if (s != NC_OK)
        return s;
    j.out = out->data;
    j.out_step = c->N * j.out_row;
    j.T = c->T;
    if (j.op == JOB_IF) /* rows are samples; each runs all T steps */
        job_parallel(c->st, &j, c->threads, c->N, (int64_t)c->T * c->N * j.in_row);
    else
        job_parallel(c->st, &j, c->threads, out->rows, out->rows * j.in_row);
    return NC_OK;
}

/* add and concat; an input may be constant while another is not, so both
 * work one step at a time with a step stride of 0 for constant inputs. */
static nc_status run_merge(run_ctx *c, int i, cpu_value *out)
{
    const nc_node *n = &c->net->nodes[i];
    int constant = 1;
    for (int k = 0; k < n->n_inputs; k++)
        constant &= input_value(c, i, k)->constant;
    int steps = c->snn && !constant ? c->T : 1;
    nc_status s = value_alloc(c, i, steps * c->N, c->snn && constant, out);
    if (s != NC_OK)
        return s;
    enum { MAX_IN = 64 };
    if (n->n_inputs > MAX_IN)
        return node_fail(c, i, NC_ERR_UNSUPPORTED, "more than 64 inputs");
    const float *ptr[MAX_IN];
    int64_t per_row[MAX_IN], out_numel = numel_of(c, i);
    for (int t = 0; t < steps; t++) {
        for (int k = 0; k < n->n_inputs; k++) {
            const cpu_value *v = input_value(c, i, k);
            per_row[k] = numel_of(c, n->inputs[k]);
            ptr[k] = v->data + (v->constant ? 0 : t * c->N * per_row[k]);
        }
        float *o = out->data + t * c->N * out_numel;
        if (n->kind == NC_NODE_CONCAT) {
            nc_concat(c->N, n->n_inputs, ptr, per_row, o);
            continue;
        }
        if (n->n_inputs == 1)
            memcpy(o, ptr[0], (size_t)(c->N * out_numel) * sizeof(float));
        else
            nc_add(c->N * out_numel, ptr[0], ptr[1], o);
        for (int k = 2; k < n->n_inputs; k++)
            nc_add(c->N * out_numel, o, ptr[k], o);
    }
    return NC_OK;
}

static nc_status run_node(run_ctx *c, int i, const nc_tensor *input, cpu_value *out)
{
    switch (c->net->nodes[i].kind) {
    case NC_NODE_INPUT: return run_input(c, i, input, out);
    case NC_NODE_CONV2D: return run_conv(c, i, out);
    case NC_NODE_DENSE: return run_dense(c, i, out);
    case NC_NODE_AVGPOOL:
    case NC_NODE_MAXPOOL:
    case NC_NODE_GLOBAL_AVGPOOL: return run_pool(c, i, out);
    case NC_NODE_FLATTEN:
    case NC_NODE_OUTPUT: return run_copy(c, i, out);
    case NC_NODE_ADD:
    case NC_NODE_CONCAT: return run_merge(c, i, out);
    case NC_NODE_AFFINE: return run_affine(c, i, out);
    case NC_NODE_NEURON: return run_neuron(c, i, out);
    case NC_NODE_SCALE: return run_scale(c, i, out);
    case NC_NODE_RECURRENT: /* only reached outside SNN mode: forward_steps handles it */
        return node_fail(c, i, NC_ERR_UNSUPPORTED, "a recurrent edge has no ANN function; run it in SNN mode");
    case NC_NODE_KIND_COUNT: break;
    }
    return node_fail(c, i, NC_ERR_INTERNAL, "unknown node kind");
}

/* ---- forward ---------------------------------------------------------------- */

static nc_status observe_and_report(run_ctx *c, int i)
{
    const nc_observer *ob = c->opts->observer;
    if (ob && ob->observe) {
        float *tmp;
        const float *data;
        nc_status s = value_expanded(c, i, &c->val[i], &tmp, &data);
        if (s != NC_OK)
            return s;
        ob->observe(ob->user, i, data, c->snn ? (int64_t)c->T * c->N : c->N, numel_of(c, i));
        pool_put(c->st, tmp);
    }
    if (c->opts->progress) {
        nc_progress p = {"simulate", i + 1, c->net->n_nodes, 0.0};
        if (c->opts->progress(c->opts->progress_user, &p) != 0)
            return nc_fail(c->err, NC_ERR_CANCELLED, "cpu engine: cancelled after node '%s'",
                           c->net->nodes[i].name);
    }
    return NC_OK;
}

/* Frees every value whose last reader was node i (and i's own, if unread). */
static void release_after(run_ctx *c, int i)
{
    const nc_node *n = &c->net->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
        if (c->st->last_use[n->inputs[k]] == i)
            value_free(c, &c->val[n->inputs[k]]);
    if (c->st->last_use[i] == i && i != c->net->output)
        value_free(c, &c->val[i]);
}

static nc_status copy_host_floats(void *src, float *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
    return NC_OK;
}

/* Copies the output node's value to a new [N, F] or [T, N, F] tensor. */
static nc_status make_output(run_ctx *c, nc_tensor **out)
{
    const cpu_value *v = &c->val[c->net->output];
    nc_output_value o = {"cpu", c->snn, c->T, v->constant, c->N, numel_of(c, c->net->output)};
    return nc_engine_make_output(&o, copy_host_floats, v->data, out, c->err);
}

/* ---- step by step (recurrent nets) ---------------------------------------- */

/* The carried state of node i in step-by-step mode: IF membranes, a NIR
 * model's state, or none (*state = NULL). */
static nc_status step_state_new(run_ctx *c, int i, float **state)
{
    const nc_node *n = &c->net->nodes[i];
    *state = NULL;
    if (n->kind != NC_NODE_NEURON)
        return NC_OK;
    const nc_neuron *nr = &n->neuron;
    if (is_nir_model(nr->model)) {
        if (!NC_CPU_NIR_MODELS)
            return node_fail(c, i, NC_ERR_UNSUPPORTED, "NIR neuron models are not in this build yet");
        *state = nir_state_new(n, c->N);
    } else if (nr->model == NC_NEURON_IF) {
        nc_if_params p = {nr->threshold, nr->n_threshold, nr->v0_fraction, nr->reset, nr->compare};
        int ch;
        int64_t inner;
        channel_split(n, &ch, &inner);
        if ((*state = floats_new(c->N * numel_of(c, i))))
            nc_if_state_init(&p, c->N, ch, inner, *state);
    } else {
        return NC_OK;
    }
    return *state ? NC_OK : node_fail(c, i, NC_ERR_MEMORY, "out of memory for the neuron state");
}

/* Step t of node i, from step t of its inputs (step t − 1 of the source for
 * a recurrent edge), written into step t of full[i]. */
static nc_status step_node(run_ctx *c, int i, int t, const nc_tensor *input, const cpu_value *full,
                           float *state)
{
    const nc_node *n = &c->net->nodes[i];
    int64_t step = c->N * numel_of(c, i);
    float *out = full[i].data + t * step;
    if (n->kind == NC_NODE_INPUT) {
        if (c->seq)
            memcpy(out, input->data + t * step, (size_t)step * sizeof(float));
        else if (c->opts->encoding == NC_ENCODING_POISSON)
            nc_poisson_encode(c->opts->seed, t, 1, step, input->data, out);
        else
            memcpy(out, input->data, (size_t)step * sizeof(float));
        return NC_OK;
    }
    if (n->kind == NC_NODE_RECURRENT) {
        if (t == 0)
            memset(out, 0, (size_t)step * sizeof(float));
        else
            memcpy(out, full[n->recur_source].data + (t - 1) * step, (size_t)step * sizeof(float));
        return NC_OK;
    }
    for (int k = 0; k < n->n_inputs; k++) { /* views of this step, never taken over */
        int src = n->inputs[k];
        c->val[src] = (cpu_value){full[src].data + t * c->N * numel_of(c, src), c->N, 0, 0};
    }
    cpu_value v;
    c->step_out = out;
    c->step_state = state;
    nc_status s = run_node(c, i, input, &v);
    c->step_out = NULL;
    c->step_state = NULL;
    return s;
}

/* Observers see every node's T·N rows once all steps ran. */
static void observe_steps(run_ctx *c, const cpu_value *full)
{
    const nc_observer *ob = c->opts->observer;
    int64_t rows = (int64_t)c->T * c->N;
    for (int i = 0; ob && i < c->net->n_nodes; i++) {
        const nc_node *n = &c->net->nodes[i];
        if (ob->observe_input && n->kind == NC_NODE_NEURON)
            ob->observe_input(ob->user, i, full[n->inputs[0]].data, rows, numel_of(c, i));
        if (ob->observe)
            ob->observe(ob->user, i, full[i].data, rows, numel_of(c, i));
    }
}

/* A net with recurrent edges (see the top of this file); progress counts
 * steps.  On success c->val holds every node's T·N rows. */
static nc_status forward_steps(run_ctx *c, const nc_tensor *input)
{
    int n_nodes = c->net->n_nodes, T = c->T;
    cpu_value *full = calloc((size_t)n_nodes, sizeof *full);
    float **state = calloc((size_t)n_nodes, sizeof *state);
    nc_status s = full && state ? NC_OK : nc_fail(c->err, NC_ERR_MEMORY, "cpu engine: out of memory");
    for (int i = 0; i < n_nodes && s == NC_OK; i++) {
        const nc_node *n = &c->net->nodes[i];
        if (n->kind == NC_NODE_MAXPOOL && n->maxpool_strategy == NC_MAXPOOL_GATED)
            s = node_fail(c, i, NC_ERR_UNSUPPORTED, "the gated max pool cannot run in a recurrent net");
        if (s == NC_OK)
            s = value_alloc(c, i, (int64_t)T * c->N, 0, &full[i]);
        if (s == NC_OK)
            s = step_state_new(c, i, &state[i]);
    }
    c->stepping = 1;
    c->T = 1; /* the layer functions run one step at a time */
    for (int t = 0; t < T && s == NC_OK; t++) {
        for (int i = 0; i < n_nodes && s == NC_OK; i++)
            s = step_node(c, i, t, input, full, state[i]);
        nc_progress p = {"simulate", t + 1, T, 0.0};
        if (s == NC_OK && c->opts->progress && c->opts->progress(c->opts->progress_user, &p) != 0)
            s = nc_fail(c->err, NC_ERR_CANCELLED, "cpu engine: cancelled after step %d of %d", t + 1, T);
    }
    c->stepping = 0;
    c->T = T;
    for (int i = 0; full && i < n_nodes; i++)
        c->val[i] = full[i]; /* the caller frees them, and reads the output */
    if (s == NC_OK)
        observe_steps(c, full);
    for (int i = 0; state && i < n_nodes; i++)
        free(state[i]);
    free(state);
    free(full);
    return s;
}

static int cpu_threads(const nc_engine *e) { return nc_workers_count(e->threads); }

/* The nodes in order over the batch of c->N samples. */
static nc_status forward_nodes(run_ctx *c, const nc_tensor *input)
{
    nc_status s = NC_OK;
    for (int i = 0; i < c->net->n_nodes && s == NC_OK; i++) {
        /* a value made ahead by a fused job (run_events_max_pool) is only reported */
        s = c->val[i].ready ? NC_OK : run_node(c, i, input, &c->val[i]);
        if (s == NC_OK)
            s = observe_and_report(c, i);
        if (s == NC_OK)
            release_after(c, i);
    }
    return s;
}

static nc_status cpu_forward(nc_engine *e, const nc_tensor *input, const nc_run_options *opts,
                             nc_tensor **out, nc_error *err)
{
    if (!e->impl || !e->net)
        return nc_fail(err, NC_ERR_ARGUMENT, "cpu engine: no network loaded");
    nc_run_options defaults = {.mode = NC_MODE_ANN, .T = 1};
    if (!opts)
        opts = &defaults;
    nc_status s = nc_engine_check_options("cpu", opts, err);
    if (s != NC_OK)
        return s;
    run_ctx c = {.e = e, .net = e->net, .st = e->impl, .opts = opts, .err = err,
                 .snn = opts->mode == NC_MODE_SNN, .T = opts->mode == NC_MODE_SNN ? opts->T : 1,
                 .threads = cpu_threads(e)};
    if ((s = nc_engine_check_input("cpu", c.net, input, c.snn, c.T, &c.seq, c.err)) != NC_OK)
        return s;
    c.N = input->shape[c.seq];
    c.val = calloc((size_t)c.net->n_nodes, sizeof *c.val);
    if (!c.val)
        return nc_fail(err, NC_ERR_MEMORY, "cpu engine: out of memory");
    c.st->pass = c.st->pass + 1 ? c.st->pass + 1 : 1; /* event weight layouts: refresh */
    /* Every GEMM runs on one OpenBLAS thread, the engine's own threads taking
     * slices of the work: OpenBLAS's threads spin (sched_yield) for a while
     * after each parallel GEMM, and on a 2-core machine that took a quarter
     * of the CPU from the row-wise jobs in between (perf, CNN at T = 8). */
    int blas_threads = openblas_get_num_threads(); /* restored after the pass */
    openblas_set_num_threads(1);
    c.work = c.st->work;
    c.work_floats = c.st->work_floats;
    s = c.snn && c.st->recurrent ? forward_steps(&c, input) : forward_nodes(&c, input);
    if (s == NC_OK)
        s = make_output(&c, out);
    for (int i = 0; i < c.net->n_nodes; i++)
        value_free(&c, &c.val[i]);
    pool_trim(c.st, s != NC_OK); /* after a failure, give everything back */
    openblas_set_num_threads(blas_threads);
    free(c.val);
    if (s != NC_OK) { /* the workspace too */
        free(c.work);
        c.work = NULL;
        c.work_floats = 0;
    }
    c.st->work = c.work;
    c.st->work_floats = c.work_floats;
    return s;
}

/* ---- load, supports, lifetime ---------------------------------------------- */

static void state_free(cpu_state *st)
{
    if (!st)
        return;
    nc_workers_free(st->workers);
    pool_trim(st, 1);
    free(st->pool);
    free(st->work);
    free(st->win);
    free(st->last_use);
    for (int i = 0; st->evw && i < st->n_nodes; i++)
        free(st->evw[i]);
    free(st->evw);
    free(st->evw_pass);
    free(st);
}

static nc_status load_fail(const nc_node *n, nc_error *err, const char *what)
{
    return nc_fail(err, NC_ERR_SHAPE, "cpu engine, node '%s' (%s): %s", n->name,
                   nc_node_kind_name(n->kind), what);
}

/* Window geometry of a conv or pool node, checked against its stored shape
 * so that a net whose shapes were not inferred cannot overrun a buffer. */
static nc_status load_window(const nc_net *net, int i, nc_window *g, nc_error *err)
{
    const nc_node *n = &net->nodes[i], *in = &net->nodes[n->inputs[0]];
    if (in->ndim != 3)
        return load_fail(n, err, "needs a [C, H, W] input; run shape inference first");
    if (nc_window_init(g, (int)in->shape[0], (int)in->shape[1], (int)in->shape[2], n->kernel, n->stride,
                       n->pad, n->dilation, n->ceil_mode) != 0)
        return load_fail(n, err, "kernel, stride, padding or dilation do not fit the input");
    const char *misfit = nc_engine_window_misfit(n, in, g->oh, g->ow);
    return misfit ? load_fail(n, err, misfit) : NC_OK;
}

/* The parameters the kernels read without checking. */
static nc_status load_check_node(const nc_net *net, int i, nc_error *err)
{
    const char *wrong = nc_node_check(net, i);
    return wrong ? load_fail(&net->nodes[i], err, wrong) : NC_OK;
}

static nc_status cpu_load(nc_engine *e, const nc_net *net, nc_error *err)
{
    if (!net || net->n_nodes < 2 || net->input != 0 || net->output != net->n_nodes - 1)
        return nc_fail(err, NC_ERR_ARGUMENT,
                       "cpu engine: the network must start with its input node and end with its output node");
    cpu_state *st = calloc(1, sizeof *st);
    if (st) {
        st->win = calloc((size_t)net->n_nodes, sizeof *st->win);
        st->last_use = malloc((size_t)net->n_nodes * sizeof *st->last_use);
        st->evw = calloc((size_t)net->n_nodes, sizeof *st->evw);
        st->evw_pass = calloc((size_t)net->n_nodes, sizeof *st->evw_pass);
        st->n_nodes = net->n_nodes;
        st->pass = 1; /* evw_pass 0: never filled */
    }
    if (!st || !st->win || !st->last_use || !st->evw || !st->evw_pass) {
        state_free(st);
        return nc_fail(err, NC_ERR_MEMORY, "cpu engine: out of memory loading %d nodes", net->n_nodes);
    }
    nc_status s = NC_OK;
    for (int i = 0; i < net->n_nodes && s == NC_OK; i++) {
        const nc_node *n = &net->nodes[i];
        st->last_use[i] = i;
        s = load_check_node(net, i, err);
        if (s == NC_OK && (n->kind == NC_NODE_CONV2D || n->kind == NC_NODE_AVGPOOL || n->kind == NC_NODE_MAXPOOL))
            s = load_window(net, i, &st->win[i], err);
        for (int k = 0; s == NC_OK && k < n->n_inputs; k++)
            st->last_use[n->inputs[k]] = i; /* nodes are in topological order */
        st->recurrent |= n->kind == NC_NODE_RECURRENT;
    }
    if (s != NC_OK) {
        state_free(st);
        return s;
    }
    state_free(e->impl);
    e->impl = st;
    e->net = net;
    return NC_OK;
}

static int cpu_supports(nc_engine *e, const nc_net *net, int node, char *why, size_t why_size)
{
    (void)e;
    if (node < 0 || node >= net->n_nodes || (unsigned)net->nodes[node].kind >= NC_NODE_KIND_COUNT) {
        if (why && why_size)
            snprintf(why, why_size, "unknown node kind");
        return 0;
    }
    return 1; /* the reference engine runs every node kind in every mode */
}

static void cpu_destroy(nc_engine *e) { state_free(e->impl); }

static const nc_engine_ops cpu_ops = {
    .name = "cpu",
    .caps = NC_CAP_SNN | NC_CAP_TRAINING, /* the CPU trainer: sim/nc_train_backend_cpu.c */
    .supports = cpu_supports,
    .load = cpu_load,
    .forward = cpu_forward,
    .destroy = cpu_destroy,
};

nc_engine *nc_engine_cpu_new(void)
{
    nc_engine *e = calloc(1, sizeof *e);
    if (e)
        e->ops = &cpu_ops;
    return e;
}
