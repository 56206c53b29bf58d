/* test_gpu_train_graphs.c — the GPU trainer's steps recorded as CUDA graphs
 * (gpu/nc_gpu_train_graph.cu) against the same steps queued call by call
 * (NC_GPU_GRAPHS=0), through the trainer (sim/nc_train.c):
 *   - two trainers made from the same net take the same eight Adam steps on
 *     the same batches, one with graphs and one without, one after the other
 *     on one backend (so on the same cuDNN plans): every step's loss and
 *     correct count, and in the end every parameter, bit for bit;
 *   - the batch sizes go 10, 10, 10, 16, 16, 16, 10, 10: each size is
 *     recorded at its second step and replayed after that, and where a
 *     larger batch grows a buffer (the bf16 copies, the im2col workspace)
 *     the graphs recorded before are dropped and recorded again;
 *   - cases: fp32 and bf16 on cuDNN, fp32 on im2col + cuBLAS, a loss over
 *     two horizons, distillation from a teacher ANN on the same backend;
 *   - a capture that fails (NC_GPU_FAULT=capture) leaves the steps as they
 *     are, queued call by call, and says why.
 * Without a GPU (or without CUDA in the build) every test is skipped. */
#include "test_gpu_common.h"

#include "../sim/nc_train.h"
#include "../sim/nc_train_backend.h"

/* x[2, 12, 12] → conv 8 → IF → avgpool 2 → conv 8 → IF → flatten → fc 10
 * (relu: ReLU neurons instead of IF, a teacher's ANN). */
static nc_net *step_net(int relu)
{
    nc_net *net = nc_net_new();
    int64_t shape[3] = {2, 12, 12};
    int x = add_input(net, 3, shape);
    int c1 = add_conv(net, "conv1", x, 8, 2, 3, 1);
    int n1 = relu ? add_neuron(net, "if1", c1, NC_NEURON_RELU)
                  : add_if(net, "if1", c1, 8, 0.3f, 0.9f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    int ap = add_pool(net, NC_NODE_AVGPOOL, "pool", n1, 2, 2);
    int c2 = add_conv(net, "conv2", ap, 8, 8, 3, 1);
    int n2 = relu ? add_neuron(net, "if2", c2, NC_NEURON_RELU)
                  : add_if(net, "if2", c2, 1, 0.5f, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    int fc = add_dense(net, "fc", add1(net, NC_NODE_FLATTEN, "flat", n2), 10, 8 * 6 * 6);
    net->input = x;
    return with_output(net, "y", fc);
}

typedef struct step_case {
    const char *name;
    const char *precision; /* NC_GPU_PRECISION (NULL: fp32) */
    const char *conv;      /* NC_GPU_CONV (NULL: cuDNN where it runs) */
    int horizons;          /* the loss over the first 2 steps and over all 4 */
    int distill;           /* soft targets from a teacher ANN */
    const char *fault;     /* NC_GPU_FAULT for the run with graphs, or NULL */
} step_case;

enum { STEPS = 8, MAX_BATCH = 16, FEATURE = 2 * 12 * 12 };
static const int batch_of_step[STEPS] = {10, 10, 10, 16, 16, 16, 10, 10};

/* What a run did: each step's loss and correct count, the parameters at the
 * end, and how the backend says it ran the steps. */
typedef struct step_log {
    double loss[STEPS];
    int64_t correct[STEPS];
    float **params;
    int64_t *counts;
    int n_params;
    char how[1024];
} step_log;

static void set_env(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

/* The trainer's parameters into log (host copies). */
static void keep_params(nc_trainer *tr, step_log *log)
{
    log->n_params = nc_trainer_param_count(tr);
    log->params = calloc((size_t)log->n_params, sizeof(float *));
    log->counts = calloc((size_t)log->n_params, sizeof(int64_t));
    for (int k = 0; k < log->n_params; k++) {
        nc_train_param p;
        nc_trainer_param(tr, k, &p);
        log->counts[k] = p.count;
        log->params[k] = malloc((size_t)p.count * sizeof(float));
        memcpy(log->params[k], p.value, (size_t)p.count * sizeof(float));
    }
}

/* The eight steps on a trainer of a copy of `net` on backend be, graphs on
 * or off; 0 when a call failed (a failed check). */
static int take_steps(const step_case *c, int graphs, nc_train_backend *be, const nc_net *net, const nc_net *teacher,
                      const float *images, const int32_t *labels, step_log *log)
{
    set_env("NC_GPU_GRAPHS", graphs ? "1" : "0");
    set_env("NC_GPU_FAULT", graphs ? c->fault : NULL);
    nc_net *copy = nc_net_clone(net);
    nc_train_options o = nc_train_options_default(NC_TRAIN_BPTT);
    o.T = 4;
    o.n_horizons = c->horizons ? 2 : 0;
    o.horizons[0] = 2, o.horizons[1] = 4;
    o.teacher = c->distill ? teacher : NULL;
    o.distill_alpha = c->distill ? 0.5 : 0;
    nc_trainer *tr = NULL;
    nc_error err = {0};
    int ok = copy && nc_trainer_new_on(copy, &o, MAX_BATCH, be, &tr, &err) == NC_OK;
    NC_CHECK(ok, "[%s] trainer (graphs %d): %s", c->name, graphs, err.message);
    for (int k = 0; ok && k < STEPS; k++) {
        nc_status s = nc_trainer_gradients(tr, images, labels, batch_of_step[k], &log->loss[k], &log->correct[k], &err);
        NC_CHECK((ok = s == NC_OK), "[%s] step %d (graphs %d): %s", c->name, k, graphs, err.message);
        nc_trainer_apply(tr, 1e-2);
    }
    if (ok && (ok = nc_trainer_sync_net(tr, &err) == NC_OK) != 0)
        keep_params(tr, log);
    NC_CHECK(ok || err.message[0] == 0, "[%s] the end (graphs %d): %s", c->name, graphs, err.message);
    if (tr)
        nc_trainer_describe(tr, log->how, sizeof log->how);
    nc_trainer_free(tr);
    nc_net_free(copy);
    unsetenv("NC_GPU_GRAPHS");
    unsetenv("NC_GPU_FAULT");
    return ok;
}

static void free_log(step_log *log)
{
    for (int k = 0; k < log->n_params; k++)
        free(log->params[k]);
    free(log->params);
    free(log->counts);
}

/* The two runs, step by step and parameter by parameter, bit for bit. */
static void check_same(const step_case *c, const step_log *ref, const step_log *got)
{
    for (int k = 0; k < STEPS; k++) {
        NC_CHECK(memcmp(&ref->loss[k], &got->loss[k], sizeof(double)) == 0,
                 "[%s] step %d: loss %.17g with graphs, %.17g without", c->name, k, got->loss[k], ref->loss[k]);
        NC_CHECK(ref->correct[k] == got->correct[k], "[%s] step %d: %lld correct with graphs, %lld without",
                 c->name, k, (long long)got->correct[k], (long long)ref->correct[k]);
    }
    NC_CHECK(ref->n_params == got->n_params, "[%s] %d parameters against %d", c->name, got->n_params,
             ref->n_params);
    for (int k = 0; k < ref->n_params && k < got->n_params; k++) {
        int64_t differ = 0;
        for (int64_t i = 0; i < ref->counts[k]; i++)
            differ += memcmp(&ref->params[k][i], &got->params[k][i], sizeof(float)) != 0;
        NC_CHECK(differ == 0 && ref->counts[k] == got->counts[k], "[%s] parameter %d: %lld of %lld values differ",
                 c->name, k, (long long)differ, (long long)ref->counts[k]);
    }
}

static void graphs_case(const step_case *c)
{
    set_env("NC_GPU_PRECISION", c->precision);
    set_env("NC_GPU_CONV", c->conv);
    nc_net *net = step_net(0), *teacher = step_net(1);
    float *images = malloc((size_t)MAX_BATCH * FEATURE * sizeof(float));
    int32_t labels[MAX_BATCH];
    for (int64_t i = 0; i < (int64_t)MAX_BATCH * FEATURE; i++)
        images[i] = rnd_range(0.0f, 1.0f);
    for (int k = 0; k < MAX_BATCH; k++)
        labels[k] = rnd_int(0, 9);
    /* one backend for both runs: cuDNN picks each convolution's algorithm by
     * timing it, and two backends may pick different ones (other rounding) */
    nc_train_backend *be = NULL;
    nc_error err = {0};
    NC_CHECK(nc_train_backend_new("gpu", &be, &err) == NC_OK, "[%s] gpu backend: %s", c->name, err.message);
    step_log ref = {0}, got = {0};
    if (be && net && teacher && take_steps(c, 0, be, net, teacher, images, labels, &ref) &&
        take_steps(c, 1, be, net, teacher, images, labels, &got)) {
        check_same(c, &ref, &got);
        printf("# [%s] loss %.6f at the first step, %.6f at the last; with graphs: %s%s", c->name, ref.loss[0],
               ref.loss[STEPS - 1], got.how, strchr(got.how, '\n') ? "" : "\n");
        NC_CHECK(strstr(ref.how, "NC_GPU_GRAPHS=0") != NULL, "[%s] without graphs: %s", c->name, ref.how);
        if (c->fault)
            NC_CHECK(strstr(got.how, "capture failed") != NULL && !strstr(got.how, "CUDA graph of"),
                     "[%s] the failed capture is named: %s", c->name, got.how);
        else
            NC_CHECK(strstr(got.how, "batch 10: CUDA graph of") && strstr(got.how, "batch 16: CUDA graph of"),
                     "[%s] both batch sizes replay as graphs: %s", c->name, got.how);
    }
    free_log(&ref);
    free_log(&got);
    nc_train_backend_free(be);
    free(images);
    nc_net_free(net);
    nc_net_free(teacher);
    unsetenv("NC_GPU_PRECISION");
    unsetenv("NC_GPU_CONV");
}

static void test_fp32_steps(void) { graphs_case(&(step_case){.name = "fp32"}); }
static void test_bf16_steps(void) { graphs_case(&(step_case){.name = "bf16", .precision = "bf16"}); }
static void test_im2col_steps(void) { graphs_case(&(step_case){.name = "im2col", .conv = "im2col"}); }
static void test_horizon_steps(void) { graphs_case(&(step_case){.name = "horizons 2,4", .horizons = 1}); }
static void test_distill_steps(void) { graphs_case(&(step_case){.name = "distillation", .distill = 1}); }
static void test_capture_fails(void) { graphs_case(&(step_case){.name = "capture fails", .fault = "capture"}); }

int main(void)
{
    const char *skip = gpu_skip_reason();
    GPU_RUN(test_fp32_steps, skip);
    GPU_RUN(test_bf16_steps, skip);
    GPU_RUN(test_im2col_steps, skip);
    GPU_RUN(test_horizon_steps, skip);
    GPU_RUN(test_distill_steps, skip);
    GPU_RUN(test_capture_fails, skip);
    return nc_test_done();
}
