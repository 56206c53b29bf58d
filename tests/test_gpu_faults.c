/* test_gpu_faults.c — a GPU out-of-memory or launch failure ends the load or
 * the pass with a clear error, and the host stays usable: the same engine
 * runs again once the fault is gone, and the CPU engine runs after it.
 * Faults are injected with NC_GPU_FAULT (gpu/nc_gpu.h).  Without a usable GPU
 * (or a build without CUDA) every case is skipped. */
#include "test_gpu_common.h"

#include "../sim/nc_engine_registry.h"

#include <stdlib.h>

/* The tail of the test nets: avgpool 2 over the c×8×8 spikes → flatten →
 * dense 10 → output; the shapes inferred (NULL if they are not). */
static nc_net *pool_dense_tail(nc_net *net, int spikes, int c)
{
    int p = add_pool(net, NC_NODE_AVGPOOL, "pool", spikes, 2, 2);
    int f = add1(net, NC_NODE_FLATTEN, "flat", p);
    int d = add_dense(net, "fc", f, 10, c * 16);
    return with_output(net, "out", d);
}

/* input [1, 8, 8] → conv 4×3×3 → IF → avgpool 2 → flatten → dense 10 → output */
static nc_net *small_net(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){1, 8, 8});
    int c = add_conv(net, "conv", x, 4, 1, 3, 1);
    int s = add_if(net, "if", c, 4, 0.5f, 1.0f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    return pool_dense_tail(net, s, 4);
}

static nc_tensor *small_input(void)
{
    int64_t shape[4] = {3, 1, 8, 8};
    return rnd_tensor(4, shape, 0.0f, 1.0f);
}

/* The CPU engine's output, which the GPU must match after a fault. */
static void check_against_cpu(const nc_net *net, const nc_tensor *x, const nc_run_options *o, const nc_tensor *got,
                              const char *what)
{
    nc_tensor *ref = run_on("cpu", net, x, o);
    NC_CHECK(ref != NULL, "%s: the CPU engine runs after the GPU fault", what);
    if (ref && got) {
        NC_CHECK(nc_tensor_numel(ref) == nc_tensor_numel(got), "%s: output sizes", what);
        if (nc_tensor_numel(ref) == nc_tensor_numel(got))
            NC_CHECK(compare_report(what, got->data, ref->data, nc_tensor_numel(ref), 1e-4, 1e-3) == 0,
                     "%s: GPU output equals the CPU's", what);
    }
    nc_tensor_free(ref);
}

/* What each fault test starts from: the small net, an input and a GPU
 * engine; the output of its last pass. */
typedef struct fault_case {
    nc_net *net;
    nc_tensor *x, *out;
    nc_engine *e;
    nc_error err;
} fault_case;

static void fault_case_free(fault_case *f)
{
    nc_tensor_free(f->out);
    nc_engine_free(f->e);
    nc_tensor_free(f->x);
    nc_net_free(f->net);
}

/* 1 when the set-up is there (the engine loaded with the net when `load`);
 * 0, reported and freed, when not. */
static int fault_case_new(fault_case *f, int load)
{
    memset(f, 0, sizeof *f);
    f->net = small_net();
    f->x = small_input();
    if (f->net && load)
        f->e = engine_with("gpu", f->net);
    else if (f->net)
        nc_engine_new("gpu", &f->e, &f->err);
    NC_CHECK(f->net && f->x && f->e, "set-up: %s", f->err.message);
    if (f->net && f->x && f->e)
        return 1;
    fault_case_free(f);
    return 0;
}

/* A pass with NC_GPU_FAULT = fault fails with `expected`, gives no output,
 * and its message names the node and says `says`. */
static void faulty_pass(fault_case *f, const nc_run_options *o, const char *fault, nc_status expected, const char *says)
{
    setenv("NC_GPU_FAULT", fault, 1);
    nc_status st = nc_engine_forward(f->e, f->x, o, &f->out, &f->err);
    unsetenv("NC_GPU_FAULT");
    NC_CHECK(st == expected, "fault %s: status %d, got %d: %s", fault, (int)expected, (int)st, f->err.message);
    NC_CHECK(f->out == NULL, "no output from a failed pass");
    NC_CHECK(strstr(f->err.message, "gpu engine, node '") != NULL && strstr(f->err.message, says),
             "the message names the node and says '%s': %s", says, f->err.message);
    printf("# %s\n", f->err.message);
}

/* After a fault the same engine runs the pass again and matches the CPU. */
static void runs_again(fault_case *f, const nc_run_options *o, const char *what)
{
    nc_tensor_free(f->out);
    f->out = NULL;
    NC_CHECK(nc_engine_forward(f->e, f->x, o, &f->out, &f->err) == NC_OK, "%s: the same engine runs again: %s", what,
             f->err.message);
    check_against_cpu(f->net, f->x, o, f->out, what);
}

static void test_oom_at_load(void)
{
    fault_case f;
    if (!fault_case_new(&f, 0))
        return;
    setenv("NC_GPU_FAULT", "oom:2", 1); /* the second parameter upload */
    nc_status st = nc_engine_load(f.e, f.net, &f.err);
    unsetenv("NC_GPU_FAULT");
    NC_CHECK(st == NC_ERR_MEMORY, "an allocation failing at load is NC_ERR_MEMORY, got %d: %s", (int)st,
             f.err.message);
    NC_CHECK(strstr(f.err.message, "gpu engine, loading node 'conv'") != NULL, "the message names the node: %s",
             f.err.message);
    NC_CHECK(strstr(f.err.message, "out of memory") != NULL, "the message says out of memory: %s", f.err.message);
    printf("# %s\n", f.err.message);
    /* the same engine loads and runs once the memory is there */
    nc_run_options o = {.mode = NC_MODE_ANN};
    NC_CHECK(nc_engine_load(f.e, f.net, &f.err) == NC_OK, "load again: %s", f.err.message);
    runs_again(&f, &o, "after an OOM at load");
    fault_case_free(&f);
}

/* A full device from the first node's output on, and a failed launch: each
 * pass fails with a message that names the node, the same engine then runs
 * again, and (the GUI's way out) a CPU engine runs once it is freed. */
static void test_faults_in_a_pass(void)
{
    static const struct {
        const char *fault, *says, *also;
        nc_status status;
    } cases[] = {
        {"oom:2+", "out of device memory", "smaller batch", NC_ERR_MEMORY},
        {"launch:2", "cudaErrorLaunchFailure", NULL, NC_ERR_DEVICE},
    };
    nc_run_options o = {.mode = NC_MODE_SNN, .T = 4};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        fault_case f;
        if (!fault_case_new(&f, 1))
            return;
        faulty_pass(&f, &o, cases[k].fault, cases[k].status, cases[k].says);
        if (cases[k].also)
            NC_CHECK(strstr(f.err.message, cases[k].also) != NULL, "the message says what to do: %s", f.err.message);
        runs_again(&f, &o, cases[k].fault);
        nc_engine_free(f.e);
        f.e = NULL;
        nc_tensor *cpu = run_on("cpu", f.net, f.x, &o);
        NC_CHECK(cpu != NULL, "a CPU engine runs after the GPU engine is freed");
        nc_tensor_free(cpu);
        fault_case_free(&f);
    }
}

/* The engine's plan of each conv, through its entry in the engine table
 * (also built without CUDA, where no GPU engine is ever created). */
static void describe_convs(const nc_engine *e, char *buf, size_t size)
{
    const nc_engine_info *info = nc_engine_info_of(e);
    buf[0] = 0;
    if (info && info->describe_kernels)
        info->describe_kernels(e, buf, size);
}

/* input [1, 8, 8] → conv 8 → IF → conv 8 → IF → avgpool 2 → flatten → dense 10:
 * the second conv reads spike counts, which the exact fp32 mode convolves on
 * bf16 tensor cores through cuDNN's graph API. */
static nc_net *counts_net(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){1, 8, 8});
    int c1 = add_conv(net, "conv1", x, 8, 1, 3, 1);
    int s1 = add_if(net, "if1", c1, 8, 0.5f, 1.0f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    int c2 = add_conv(net, "conv2", s1, 8, 8, 3, 1);
    int s2 = add_if(net, "if2", c2, 8, 0.5f, 1.0f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    return pool_dense_tail(net, s2, 8);
}

/* A GPU engine loaded with net after one pass of x that matches the CPU
 * (`what`), with the plan of its convs in plans; NULL (reported) when it
 * does not load. */
static nc_engine *planned_pass(const nc_net *net, const nc_tensor *x, const nc_run_options *o, char *plans,
                               size_t size, const char *what)
{
    nc_engine *e = engine_with("gpu", net);
    NC_CHECK(e != NULL, "%s: a GPU engine loads the net", what);
    if (!e)
        return NULL;
    nc_tensor *out = NULL;
    nc_error err = {0};
    NC_CHECK(nc_engine_forward(e, x, o, &out, &err) == NC_OK, "%s: a pass: %s", what, err.message);
    describe_convs(e, plans, size);
    printf("# %s", plans);
    check_against_cpu(net, x, o, out, what);
    nc_tensor_free(out);
    return e;
}

/* When cuDNN's graph API refuses the exact convolution on bf16 parts, the
 * conv runs one TF32 pass per weight part instead, from the counts the IF
 * already wrote for it, says so in its plan, and still matches the CPU. */
static void test_graph_refused(void)
{
    nc_net *net = counts_net();
    nc_tensor *x = small_input();
    nc_run_options o = {.mode = NC_MODE_SNN, .T = 4};
    char plans[2048];
    NC_CHECK(net && x, "set-up");
    /* without the fault: conv2 runs on bf16 parts through the graph API */
    nc_engine *e = net && x ? planned_pass(net, x, &o, plans, sizeof plans, "exact fp32 on bf16 parts") : NULL;
    if (e && !strstr(plans, "no cuDNN"))
        NC_CHECK(strstr(plans, "conv2: cuDNN graph engines") != NULL, "conv2 runs on bf16 parts: %s", plans);
    nc_engine_free(e);
    setenv("NC_GPU_FAULT", "graph", 1);
    e = net && x ? planned_pass(net, x, &o, plans, sizeof plans, "exact fp32 by TF32 parts") : NULL;
    if (e && !strstr(plans, "no cuDNN"))
        NC_CHECK(strstr(plans, "conv2: cuDNN") && strstr(plans, "TF32 weight parts") &&
                     strstr(plans, "instead of bf16 parts"),
                 "conv2 says it ran by TF32 parts instead of bf16 parts: %s", plans);
    if (e) { /* later passes plan by parts from the start (the IF writes fp32 counts) */
        nc_tensor *out = NULL;
        nc_error err = {0};
        NC_CHECK(nc_engine_forward(e, x, &o, &out, &err) == NC_OK, "a second pass: %s", err.message);
        check_against_cpu(net, x, &o, out, "exact fp32 by TF32 parts, second pass");
        nc_tensor_free(out);
    }
    nc_engine_free(e);
    unsetenv("NC_GPU_FAULT");
    nc_tensor_free(x);
    nc_net_free(net);
}

/* The number in "N cuDNN plans kept" of a description of the convs. */
static long plans_kept(const char *plans)
{
    const char *p = strstr(plans, " cuDNN plans kept");
    while (p && p > plans && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return p ? strtol(p, NULL, 10) : -1;
}

/* A network loaded again (fine-tuning loads new weights after every epoch)
 * reuses the plans of the first load: no conv plans again, and a pass after
 * the reload still matches the CPU. */
static void test_plans_kept_across_loads(void)
{
    nc_net *net = counts_net();
    nc_tensor *x = small_input();
    nc_run_options o = {.mode = NC_MODE_SNN, .T = 4};
    char plans[2048], again[2048];
    NC_CHECK(net && x, "set-up");
    nc_engine *e = net && x ? planned_pass(net, x, &o, plans, sizeof plans, "first load") : NULL;
    if (e && !strstr(plans, "no cuDNN")) {
        long first = plans_kept(plans);
        NC_CHECK(first >= 1, "the first pass made plans: %s", plans);
        net->nodes[1].weight->data[0] += 0.25f; /* new weights, the same shapes */
        nc_error err = {0};
        NC_CHECK(nc_engine_load(e, net, &err) == NC_OK, "reload: %s", err.message);
        nc_tensor *out = NULL;
        NC_CHECK(nc_engine_forward(e, x, &o, &out, &err) == NC_OK, "a pass after the reload: %s", err.message);
        describe_convs(e, again, sizeof again);
        NC_CHECK(plans_kept(again) == first, "no new plans after the reload: %ld then %ld", first,
                 plans_kept(again));
        NC_CHECK(strcmp(plans, again) == 0, "the same plans run: %s / %s", plans, again);
        check_against_cpu(net, x, &o, out, "after the reload");
        nc_tensor_free(out);
    }
    nc_engine_free(e);
    nc_tensor_free(x);
    nc_net_free(net);
}

/* A batch smaller than one that ran before (an evaluation's last batch)
 * runs padded to it: no new plans, and its output is the CPU's for the
 * images given, at every step. */
static void test_small_batch_padded(void)
{
    nc_net *net = counts_net();
    nc_tensor *x = small_input(); /* 3 images */
    nc_tensor *two = nc_tensor_new(4, (int64_t[]){2, 1, 8, 8});
    nc_run_options o = {.mode = NC_MODE_SNN, .T = 4};
    char plans[2048], after[2048];
    NC_CHECK(net && x && two, "set-up");
    if (two && x)
        memcpy(two->data, x->data, (size_t)nc_tensor_numel(two) * sizeof(float));
    nc_engine *e = net && x ? planned_pass(net, x, &o, plans, sizeof plans, "a batch of 3") : NULL;
    if (e && two) {
        nc_tensor *out = NULL;
        nc_error err = {0};
        NC_CHECK(nc_engine_forward(e, two, &o, &out, &err) == NC_OK, "a batch of 2: %s", err.message);
        NC_CHECK(out && out->ndim == 3 && out->shape[0] == 4 && out->shape[1] == 2, "the output is [T, 2, F]");
        describe_convs(e, after, sizeof after);
        if (!strstr(plans, "no cuDNN"))
            NC_CHECK(plans_kept(after) == plans_kept(plans), "the batch of 2 ran on the plans of 3: %ld then %ld",
                     plans_kept(plans), plans_kept(after));
        check_against_cpu(net, two, &o, out, "a batch of 2 after a batch of 3");
        nc_tensor_free(out);
    }
    nc_engine_free(e);
    nc_tensor_free(two);
    nc_tensor_free(x);
    nc_net_free(net);
}

int main(void)
{
    const char *skip = gpu_skip_reason();
    GPU_RUN(test_oom_at_load, skip);
    GPU_RUN(test_faults_in_a_pass, skip);
    GPU_RUN(test_graph_refused, skip);
    GPU_RUN(test_plans_kept_across_loads, skip);
    GPU_RUN(test_small_batch_padded, skip);
    return nc_test_done();
}
