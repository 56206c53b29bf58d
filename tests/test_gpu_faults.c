/* test_gpu_faults.c — a GPU out-of-memory or launch failure ends the load or
 * the pass with a clear error, and the host stays usable: the same engine
 * runs again once the fault is gone, and the CPU engine runs after it.
 * Faults are injected with NC_GPU_FAULT (gpu/nc_gpu.h).  Without a usable GPU
 * (or a build without CUDA) every case is skipped. */
#include "test_gpu_common.h"

#include <stdlib.h>

/* input [1, 8, 8] → conv 4×3×3 → IF → avgpool 2 → flatten → dense 10 → output */
static nc_net *small_net(void)
{
    nc_net *net = nc_net_new();
    int64_t shape[3] = {1, 8, 8};
    int x = add_input(net, 3, shape);
    int c = add_conv(net, "conv", x, 4, 1, 3, 1);
    int s = add_if(net, "if", c, 4, 0.5f, 1.0f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    int p = add_pool(net, NC_NODE_AVGPOOL, "pool", s, 2, 2);
    int f = add1(net, NC_NODE_FLATTEN, "flat", p);
    int d = add_dense(net, "fc", f, 10, 64);
    add1(net, NC_NODE_OUTPUT, "out", d);
    if (!infer(net)) {
        nc_net_free(net);
        return NULL;
    }
    return net;
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

int main(void)
{
    const char *skip = gpu_skip_reason();
    GPU_RUN(test_oom_at_load, skip);
    GPU_RUN(test_oom_in_pass, skip);
    GPU_RUN(test_launch_failure, skip);
    return nc_test_done();
}
