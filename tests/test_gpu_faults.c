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

static void test_oom_at_load(void)
{
    nc_net *net = small_net();
    nc_tensor *x = small_input(), *out = NULL;
    nc_engine *e = NULL;
    nc_error err = {0};
    NC_CHECK(net && x && nc_engine_new("gpu", &e, &err) == NC_OK, "set-up: %s", err.message);
    if (!e)
        goto done;
    setenv("NC_GPU_FAULT", "oom:2", 1); /* the second parameter upload */
    nc_status st = nc_engine_load(e, net, &err);
    unsetenv("NC_GPU_FAULT");
    NC_CHECK(st == NC_ERR_MEMORY, "an allocation failing at load is NC_ERR_MEMORY, got %d: %s", (int)st, err.message);
    NC_CHECK(strstr(err.message, "gpu engine, loading node 'conv'") != NULL, "the message names the node: %s",
             err.message);
    NC_CHECK(strstr(err.message, "out of memory") != NULL, "the message says out of memory: %s", err.message);
    printf("# %s\n", err.message);
    /* the same engine loads and runs once the memory is there */
    nc_run_options o = {.mode = NC_MODE_ANN};
    NC_CHECK(nc_engine_load(e, net, &err) == NC_OK, "load again: %s", err.message);
    NC_CHECK(nc_engine_forward(e, x, &o, &out, &err) == NC_OK, "a pass after the failed load: %s", err.message);
    check_against_cpu(net, x, &o, out, "after an OOM at load");
done:
    nc_tensor_free(out);
    nc_engine_free(e);
    nc_tensor_free(x);
    nc_net_free(net);
}

static void test_oom_in_pass(void)
{
    nc_net *net = small_net();
    nc_tensor *x = small_input(), *out = NULL;
    nc_engine *e = net ? engine_with("gpu", net) : NULL;
    nc_error err = {0};
    NC_CHECK(e && x, "set-up");
    if (!e)
        goto done;
    nc_run_options o = {.mode = NC_MODE_SNN, .T = 4};
    setenv("NC_GPU_FAULT", "oom:2+", 1); /* the device is full from the first node's output on */
    nc_status st = nc_engine_forward(e, x, &o, &out, &err);
    unsetenv("NC_GPU_FAULT");
    NC_CHECK(st == NC_ERR_MEMORY, "a full device in a pass is NC_ERR_MEMORY, got %d: %s", (int)st, err.message);
    NC_CHECK(out == NULL, "no output from a failed pass");
    NC_CHECK(strstr(err.message, "gpu engine, node '") != NULL && strstr(err.message, "out of device memory"),
             "the message names the node and says out of device memory: %s", err.message);
    NC_CHECK(strstr(err.message, "smaller batch") != NULL, "the message says what to do: %s", err.message);
    printf("# %s\n", err.message);
    nc_tensor_free(out);
    out = NULL;
    NC_CHECK(nc_engine_forward(e, x, &o, &out, &err) == NC_OK, "the same engine runs again: %s", err.message);
    check_against_cpu(net, x, &o, out, "after an OOM in a pass");
done:
    nc_tensor_free(out);
    nc_engine_free(e);
    nc_tensor_free(x);
    nc_net_free(net);
}

static void test_launch_failure(void)
{
    nc_net *net = small_net();
    nc_tensor *x = small_input(), *out = NULL;
    nc_engine *e = net ? engine_with("gpu", net) : NULL;
    nc_error err = {0};
    NC_CHECK(e && x, "set-up");
    if (!e)
        goto done;
    nc_run_options o = {.mode = NC_MODE_SNN, .T = 4};
    setenv("NC_GPU_FAULT", "launch:2", 1);
    nc_status st = nc_engine_forward(e, x, &o, &out, &err);
    unsetenv("NC_GPU_FAULT");
    NC_CHECK(st == NC_ERR_DEVICE, "a failed launch is NC_ERR_DEVICE, got %d: %s", (int)st, err.message);
    NC_CHECK(out == NULL, "no output from a failed pass");
    NC_CHECK(strstr(err.message, "gpu engine, node '") != NULL && strstr(err.message, "cudaErrorLaunchFailure"),
             "the message names the node and the CUDA error: %s", err.message);
    printf("# %s\n", err.message);
    NC_CHECK(nc_engine_forward(e, x, &o, &out, &err) == NC_OK, "the same engine runs again: %s", err.message);
    check_against_cpu(net, x, &o, out, "after a launch failure");
    /* the GUI's way out: drop the GPU engine, run the CPU one */
    nc_engine_free(e);
    e = NULL;
    nc_tensor *cpu = run_on("cpu", net, x, &o);
    NC_CHECK(cpu != NULL, "a CPU engine runs after the GPU engine is freed");
    nc_tensor_free(cpu);
done:
    nc_tensor_free(out);
    nc_engine_free(e);
    nc_tensor_free(x);
    nc_net_free(net);
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

/* When cuDNN's graph API refuses the exact convolution on bf16 parts, the
 * conv runs one TF32 pass per weight part instead, from the counts the IF
 * already wrote for it, says so in its plan, and still matches the CPU. */
static void test_graph_refused(void)
{
    nc_net *net = counts_net();
    nc_tensor *x = small_input(), *out = NULL;
    nc_run_options o = {.mode = NC_MODE_SNN, .T = 4};
    nc_error err = {0};
    char plans[2048];
    NC_CHECK(net && x, "set-up");
    if (!net || !x)
        goto done;
    /* without the fault: conv2 runs on bf16 parts through the graph API */
    nc_engine *e = engine_with("gpu", net);
    NC_CHECK(e != NULL, "a GPU engine loads the net");
    if (e) {
        NC_CHECK(nc_engine_forward(e, x, &o, &out, &err) == NC_OK, "a pass: %s", err.message);
        describe_convs(e, plans, sizeof plans);
        printf("# %s", plans);
        if (!strstr(plans, "no cuDNN"))
            NC_CHECK(strstr(plans, "conv2: cuDNN graph engines") != NULL, "conv2 runs on bf16 parts: %s", plans);
        check_against_cpu(net, x, &o, out, "exact fp32 on bf16 parts");
        nc_tensor_free(out);
        out = NULL;
        nc_engine_free(e);
    }
    setenv("NC_GPU_FAULT", "graph", 1);
    e = engine_with("gpu", net);
    NC_CHECK(e != NULL, "a GPU engine loads the net");
    if (e) {
        NC_CHECK(nc_engine_forward(e, x, &o, &out, &err) == NC_OK, "a pass with the graph API refused: %s", err.message);
        describe_convs(e, plans, sizeof plans);
        printf("# %s", plans);
        if (!strstr(plans, "no cuDNN"))
            NC_CHECK(strstr(plans, "conv2: cuDNN") && strstr(plans, "TF32 weight parts") &&
                         strstr(plans, "instead of bf16 parts"),
                     "conv2 says it ran by TF32 parts instead of bf16 parts: %s", plans);
        check_against_cpu(net, x, &o, out, "exact fp32 by TF32 parts");
        nc_tensor_free(out);
        out = NULL;
        /* later passes plan by parts from the start (the IF writes fp32 counts) */
        NC_CHECK(nc_engine_forward(e, x, &o, &out, &err) == NC_OK, "a second pass: %s", err.message);
        check_against_cpu(net, x, &o, out, "exact fp32 by TF32 parts, second pass");
        nc_engine_free(e);
    }
    unsetenv("NC_GPU_FAULT");
done:
    nc_tensor_free(out);
    nc_tensor_free(x);
    nc_net_free(net);
}

int main(void)
{
    const char *skip = gpu_skip_reason();
    GPU_RUN(test_oom_at_load, skip);
    GPU_RUN(test_oom_in_pass, skip);
    GPU_RUN(test_launch_failure, skip);
    GPU_RUN(test_graph_refused, skip);
    return nc_test_done();
}
