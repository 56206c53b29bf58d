/* test_engine_cpu.c — the CPU engine on small hand-built nets: ANN against
 * the naive kernels, the IF/QCFS identity, hand-computed spike trains, SNN
 * convergence, Poisson encoding, cancel, observers, MaxPool strategies. */
#include "nc_test.h"
#define NC_TEST_RNG_SEED 0x9e3779b9ull
#include "nc_test_util.h"
#include "nc_test_cpu_path.h"

#include "../sim/nc_cpu_ops.h"
#include "../sim/nc_engine.h"

#include <stdint.h>

/* ---- net building ---------------------------------------------------------- */

static int add_conv(nc_net *net, const char *name, int in, int cout, int cin, int k, int pad)
{
    int i = add1(net, NC_NODE_CONV2D, name, in);
    int64_t ws[4] = {cout, cin, k, k};
    net->nodes[i].weight = rnd_tensor(4, ws, -0.5f, 0.5f);
    net->nodes[i].bias = rnd_tensor(1, ws, -0.1f, 0.1f);
    for (int p = 0; p < 4; p++)
        net->nodes[i].pad[p] = pad;
    return i;
}

static int add_dense(nc_net *net, const char *name, int in, int fout, int fin, float lo, float hi)
{
    int i = add1(net, NC_NODE_DENSE, name, in);
    int64_t ws[2] = {fout, fin};
    net->nodes[i].weight = rnd_tensor(2, ws, lo, hi);
    net->nodes[i].bias = rnd_tensor(1, ws, -0.05f, 0.05f);
    return i;
}

static void set_if(nc_net *net, int i, int n, const float *th, float v0, nc_reset reset, nc_compare cmp)
{
    nc_neuron *nr = &net->nodes[i].neuron;
    nr->model = NC_NEURON_IF;
    nc_neuron_set_threshold(nr, n, th, NULL);
    nr->v0_fraction = v0;
    nr->reset = reset;
    nr->compare = cmp;
}

/* Loads net into a new cpu engine and runs one forward pass. */
static nc_status run(const nc_net *net, const nc_tensor *x, const nc_run_options *o, nc_tensor **out,
                     nc_error *err)
{
    nc_engine *e = NULL;
    nc_status s = nc_engine_new("cpu", &e, err);
    if (s == NC_OK)
        s = nc_engine_load(e, net, err);
    if (s == NC_OK)
        s = nc_engine_forward(e, x, o, out, err);
    if (s != NC_OK)
        printf("# run: %s\n", err->message);
    nc_engine_free(e);
    return s;
}

static int compare(const char *what, const float *got, const float *ref, int64_t n, double atol, double rtol)
{
    int64_t bad = 0;
    double max_err = 0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]);
        max_err = err > max_err ? err : max_err;
        if (!(err <= atol + rtol * fabs(ref[i])) && bad++ < 5)
            printf("# %s: [%lld] got %.9g, expected %.9g\n", what, (long long)i, got[i], ref[i]);
    }
    if (bad)
        printf("# %s: %lld of %lld mismatch, max error %.3g\n", what, (long long)bad, (long long)n, max_err);
    return bad == 0;
}

/* ---- ANN ----------------------------------------------------------------------- */

/* x [3, 2, 6, 6] → conv 3×3 pad 1 (3 ch) → relu → maxpool 2 → flatten → dense 4 */
static void test_ann_cnn(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){2, 6, 6});
    int cv = add_conv(net, "conv", x, 3, 2, 3, 1);
    int r = add_neuron(net, "relu", cv, NC_NEURON_RELU);
    int mp = add_pool(net, NC_NODE_MAXPOOL, "pool", r, 2, 2);
    int fl = add1(net, NC_NODE_FLATTEN, "flat", mp);
    int fc = add_dense(net, "fc", fl, 4, 27, -0.5f, 0.5f);
    add1(net, NC_NODE_OUTPUT, "y", fc);
    NC_CHECK(infer(net), "shapes");

    int64_t bs[4] = {3, 2, 6, 6};
    nc_tensor *in = rnd_tensor(4, bs, -1, 1), *out = NULL;
    nc_error err = {0};
    NC_CHECK(run(net, in, NULL, &out, &err) == NC_OK, "forward");
    NC_CHECK(out && out->ndim == 2 && out->shape[0] == 3 && out->shape[1] == 4, "output [N, 4]");

    /* the same with the naive kernels */
    nc_window gc = square_window(2, 6, 6, 3, 1, 1), gp = square_window(3, 6, 6, 2, 2, 0);
    float a[3 * 3 * 36], b[3 * 27], ref[3 * 4];
    nc_ref_conv2d(&gc, 3, 1, 3, in->data, net->nodes[cv].weight->data, net->nodes[cv].bias->data, a);
    nc_relu(3 * 3 * 36, a, a);
    nc_ref_maxpool(&gp, 3, a, b);
    nc_ref_dense(3, 27, 4, b, net->nodes[fc].weight->data, net->nodes[fc].bias->data, ref);
    if (out)
        NC_CHECK(compare("ann cnn", out->data, ref, 12, 1e-5, 1e-4), "matches naive kernels");

    /* QCFS mode leaves relu alone; SNN mode without IF neurons is the ANN at every step */
    nc_tensor *snn = NULL;
    nc_run_options o = {.mode = NC_MODE_SNN, .T = 3};
    NC_CHECK(run(net, in, &o, &snn, &err) == NC_OK, "snn forward");
    NC_CHECK(snn && snn->ndim == 3 && snn->shape[0] == 3 && snn->shape[1] == 3 && snn->shape[2] == 4,
             "[T, N, F]");
    for (int t = 0; snn && t < 3; t++)
        NC_CHECK(compare("snn without IF", snn->data + t * 12, ref, 12, 1e-5, 1e-4), "step %d", t);
    nc_tensor_free(snn);
    nc_tensor_free(in);
    nc_tensor_free(out);
    nc_net_free(net);
}

/* Big enough that conv, pools and neurons split their rows over threads:
 * 1 and 2 threads agree with the naive kernels. */
static void test_threads(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){3, 16, 16});
    int cv = add_conv(net, "conv", x, 8, 3, 3, 1);
    int r = add_neuron(net, "relu", cv, NC_NEURON_RELU);
    int ap = add_pool(net, NC_NODE_AVGPOOL, "pool", r, 2, 2);
    add1(net, NC_NODE_OUTPUT, "y", ap);
    NC_CHECK(infer(net), "shapes");
    enum { N = 37 };
    int64_t bs[4] = {N, 3, 16, 16};
    nc_tensor *in = rnd_tensor(4, bs, -1, 1);
    nc_window gc = square_window(3, 16, 16, 3, 1, 1), gp = square_window(8, 16, 16, 2, 2, 0);
    float *a = malloc(N * 8 * 256 * sizeof(float)), *ref = malloc(N * 8 * 64 * sizeof(float));
    nc_ref_conv2d(&gc, 8, 1, N, in->data, net->nodes[cv].weight->data, net->nodes[cv].bias->data, a);
    nc_relu(N * 8 * 256, a, a);
    nc_ref_avgpool(&gp, 0, N, a, ref);
    for (int threads = 1; threads <= 2; threads++) {
        nc_engine *e = nc_engine_cpu_new();
        e->threads = threads;
        nc_tensor *out = NULL;
        nc_error err = {0};
        NC_CHECK(nc_engine_load(e, net, &err) == NC_OK, "load");
        NC_CHECK(nc_engine_forward(e, in, NULL, &out, &err) == NC_OK, "forward: %s", err.message);
        if (out)
            NC_CHECK(compare("threads", out->data, ref, N * 8 * 64, 1e-5, 1e-4), "%d threads", threads);
        nc_tensor_free(out);
        nc_engine_free(e);
    }
    free(a), free(ref);
    nc_tensor_free(in);
    nc_net_free(net);
}

/* x [2, 4, 4] → conv → relu → add(relu, x) → concat(add, conv) → gap → flatten */
static void test_residual_concat(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){2, 4, 4});
    int cv = add_conv(net, "conv", x, 2, 2, 3, 1);
    int r = add_neuron(net, "relu", cv, NC_NEURON_RELU);
    int fl = add_concat_gap(net, r, x, cv);
    add1(net, NC_NODE_OUTPUT, "y", fl);
    NC_CHECK(infer(net), "shapes");
    NC_CHECK(net->nodes[nc_net_find(net, "cat")].shape[0] == 4, "concat has 4 channels");

    int64_t bs[4] = {2, 2, 4, 4};
    nc_tensor *in = rnd_tensor(4, bs, -1, 1), *out = NULL;
    nc_error err = {0};
    NC_CHECK(run(net, in, NULL, &out, &err) == NC_OK, "forward");

    nc_window g = square_window(2, 4, 4, 3, 1, 1);
    float conv[2 * 32], ref[2 * 4];
    nc_ref_conv2d(&g, 2, 1, 2, in->data, net->nodes[cv].weight->data, net->nodes[cv].bias->data, conv);
    for (int n = 0; n < 2; n++)
        for (int ch = 0; ch < 4; ch++) {
            double sum = 0;
            for (int p = 0; p < 16; p++) {
                int src = n * 32 + (ch % 2) * 16 + p;
                double c = conv[src];
                sum += ch < 2 ? (c > 0 ? c : 0) + in->data[src] : c;
            }
            ref[n * 4 + ch] = (float)(sum / 16);
        }
    if (out)
        NC_CHECK(compare("residual concat", out->data, ref, 8, 1e-5, 1e-4), "matches hand computation");
    nc_tensor_free(in);
    nc_tensor_free(out);
    nc_net_free(net);
}

/* ---- SNN ------------------------------------------------------------------------- */

/* conversion.md §1.2: with a constant input, T = L, θ = λ, v(0) = θ/2 and soft
 * reset, the IF neuron's mean output equals QCFS exactly.  Dyadic inputs and
 * power-of-two thresholds keep every sum exact, boundary values included. */
static void test_if_equals_qcfs(void)
{
    enum { L = 8, C = 3, HW = 12 };
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){C, 3, 4});
    int nr = add_neuron(net, "if", x, NC_NEURON_IF);
    float th[C] = {1.0f, 0.5f, 2.0f};
    set_if(net, nr, C, th, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    net->nodes[nr].neuron.levels = L;
    add1(net, NC_NODE_OUTPUT, "y", nr);
    NC_CHECK(infer(net), "shapes");

    int64_t bs[4] = {2, C, 3, 4};
    nc_tensor *in = nc_tensor_new(4, bs), *q = NULL, *s = NULL;
    for (int64_t i = 0; i < nc_tensor_numel(in); i++) /* −0.5θ … 1.3θ in steps of θ/32 */
        in->data[i] = th[(i / HW) % C] * (float)((int)((i * 7) % 58) - 16) / 32.0f;
    nc_error err = {0};
    nc_run_options oq = {.mode = NC_MODE_QCFS};
    nc_run_options os = {.mode = NC_MODE_SNN, .T = L};
    NC_CHECK(run(net, in, &oq, &q, &err) == NC_OK, "qcfs");
    NC_CHECK(run(net, in, &os, &s, &err) == NC_OK, "snn");
    if (q && s) {
        int64_t n = nc_tensor_numel(q);
        float *mean = calloc((size_t)n, sizeof(float));
        for (int t = 0; t < L; t++)
            for (int64_t i = 0; i < n; i++)
                mean[i] += s->data[t * n + i] / L;
        NC_CHECK(compare("IF mean vs QCFS", mean, q->data, n, 1e-6, 0), "identity");
        /* and QCFS mode really quantises: some values differ from ReLU */
        int quantised = 0;
        for (int64_t i = 0; i < n; i++)
            quantised += q->data[i] != (in->data[i] > 0 ? in->data[i] : 0);
        NC_CHECK(quantised > 0, "QCFS differs from ReLU");
        free(mean);
    }
    nc_tensor_free(in), nc_tensor_free(q), nc_tensor_free(s);
    nc_net_free(net);
}

/* Two IF neurons (shape [2]) on a constant input; output = spikes. */
static void spike_case(const char *what, const float *x, int n_th, const float *th, float v0, nc_reset reset,
                       nc_compare cmp, int T, const float *want /* [T, 2] */)
{
    nc_net *net = nc_net_new();
    int in = add_input(net, 1, (int64_t[]){2});
    int nr = add_neuron(net, "if", in, NC_NEURON_IF);
    set_if(net, nr, n_th, th, v0, reset, cmp);
    add1(net, NC_NODE_OUTPUT, "y", nr);
    NC_CHECK(infer(net), "%s: shapes", what);
    nc_tensor *batch = nc_tensor_new2(1, 2), *out = NULL;
    memcpy(batch->data, x, 2 * sizeof(float));
    nc_run_options o = {.mode = NC_MODE_SNN, .T = T};
    nc_error err = {0};
    NC_CHECK(run(net, batch, &o, &out, &err) == NC_OK, "%s", what);
    if (out)
        NC_CHECK(compare(what, out->data, want, 2 * T, 0, 0), "%s", what);
    nc_tensor_free(batch), nc_tensor_free(out);
    nc_net_free(net);
}

static void test_spike_trains(void)
{
    const float one = 1.0f, x5[2] = {0.5f, 0.75f};
    /* θ 1, v0 0, x = 0.5: m = .5, 1 (fire), .5, 1 (fire);  x = .75: .75, 1.5 f, 1.25 f, 1 f */
    const float ge_sub[8] = {0, 0, 1, 1, 0, 1, 1, 1};
    spike_case("ge subtract", x5, 1, &one, 0.0f, NC_RESET_SUBTRACT, NC_FIRE_GE, 4, ge_sub);
    /* > : x = .5: .5, 1 (no), 1.5 f → .5, 1 (no);  x = .75: .75, 1.5 f → .5, 1.25 f → .25, 1 (no) */
    const float gt_sub[8] = {0, 0, 0, 1, 1, 1, 0, 0};
    spike_case("gt subtract", x5, 1, &one, 0.0f, NC_RESET_SUBTRACT, NC_FIRE_GT, 4, gt_sub);
    /* reset to zero: x = .75: .75, 1.5 f → 0, .75, 1.5 f */
    const float ge_zero[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    spike_case("ge zero", x5, 1, &one, 0.0f, NC_RESET_ZERO, NC_FIRE_GE, 4, ge_zero);
    /* per channel θ = {1, 2}, v0 = θ/2, x = .75 both:
     * n0: v .5 → 1.25 f (.25), 1 f (0), .75, 1.5 f;  n1: v 1 → 1.75, 2.5 f (.5), 1.25, 2 f */
    const float x75[2] = {0.75f, 0.75f}, th2[2] = {1.0f, 2.0f};
    const float per_ch[8] = {1, 0, 1, 2, 0, 0, 1, 2};
    spike_case("per-channel", x75, 2, th2, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE, 4, per_ch);
}

/* IF → dense ×2 → IF: the second layer sees the first layer's spike train. */
static void test_two_layer_train(void)
{
    nc_net *net = nc_net_new();
    int in = add_input(net, 1, (int64_t[]){1});
    int a = add_neuron(net, "if1", in, NC_NEURON_IF);
    float th1 = 1.0f, th2 = 1.5f;
    set_if(net, a, 1, &th1, 0.0f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    int d = add_dense(net, "fc", a, 1, 1, 0, 0);
    net->nodes[d].weight->data[0] = 2.0f;
    net->nodes[d].bias->data[0] = 0.0f;
    int b = add_neuron(net, "if2", d, NC_NEURON_IF);
    set_if(net, b, 1, &th2, 0.0f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    add1(net, NC_NODE_OUTPUT, "y", b);
    NC_CHECK(infer(net), "shapes");
    nc_tensor *x = nc_tensor_new2(1, 1), *out = NULL;
    x->data[0] = 0.5f;
    nc_run_options o = {.mode = NC_MODE_SNN, .T = 4};
    nc_error err = {0};
    NC_CHECK(run(net, x, &o, &out, &err) == NC_OK, "forward");
    /* if1: 0, 1, 0, 1 → currents 0, 2, 0, 2 → if2 (θ 1.5): 0, 2 f (.5), .5, 2.5 f */
    const float want[4] = {0, 1.5f, 0, 1.5f};
    if (out)
        NC_CHECK(compare("two layers", out->data, want, 4, 0, 0), "spike train");
    nc_tensor_free(x), nc_tensor_free(out);
    nc_net_free(net);
}

/* input [2, 2, 3] → flatten → dense 12→3 → IF → output: the flatten of the
 * caller's input borrows it (no copy); the caller's tensor is left as it
 * was, and the outputs are the hand-computed ones in ANN and SNN mode. */
static void test_flatten_of_input(void)
{
    enum { N = 2, F = 12, O = 3, T = 3 };
    nc_net *net = nc_net_new();
    int64_t xs[3] = {2, 2, 3};
    int in = add_input(net, 3, xs);
    int fl = add1(net, NC_NODE_FLATTEN, "flat", in);
    int d = add_dense(net, "fc", fl, O, F, -1.0f, 1.0f);
    int a = add_neuron(net, "if", d, NC_NEURON_IF);
    float th = 0.25f;
    set_if(net, a, 1, &th, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    add1(net, NC_NODE_OUTPUT, "y", a);
    NC_CHECK(infer(net), "shapes");
    int64_t shape[4] = {N, 2, 2, 3};
    nc_tensor *x = rnd_tensor(4, shape, -1.0f, 1.0f), *out = NULL;
    float before[N * F], dense[N * O];
    memcpy(before, x->data, sizeof before);
    const float *w = net->nodes[d].weight->data, *b = net->nodes[d].bias->data;
    for (int r = 0; r < N; r++)
        for (int o = 0; o < O; o++) {
            float acc = b[o];
            for (int i = 0; i < F; i++)
                acc += x->data[r * F + i] * w[o * F + i];
            dense[r * O + o] = acc;
        }
    nc_error err = {0};
    nc_run_options ann = {.mode = NC_MODE_ANN, .T = 1}, snn = {.mode = NC_MODE_SNN, .T = T};
    NC_CHECK(run(net, x, &ann, &out, &err) == NC_OK, "ANN forward");
    float relu[N * O];
    for (int k = 0; k < N * O; k++)
        relu[k] = dense[k] > 0 ? dense[k] : 0;
    if (out)
        NC_CHECK(compare("ANN", out->data, relu, N * O, 1e-5, 1e-4), "ANN: relu(dense(flatten(x)))");
    nc_tensor_free(out), out = NULL;
    NC_CHECK(run(net, x, &snn, &out, &err) == NC_OK, "SNN forward");
    float want[T * N * O], v[N * O];
    for (int k = 0; k < N * O; k++)
        v[k] = 0.5f * th;
    for (int t = 0; t < T; t++) /* the same current at every step (direct encoding) */
        for (int k = 0; k < N * O; k++) {
            float m = v[k] + dense[k];
            want[t * N * O + k] = m >= th ? th : 0.0f;
            v[k] = m >= th ? m - th : m;
        }
    if (out)
        NC_CHECK(compare("SNN", out->data, want, T * N * O, 1e-5, 1e-4), "SNN: IF on dense(flatten(x))");
    NC_CHECK(memcmp(before, x->data, sizeof before) == 0, "the caller's input is left as it was");
    /* the same input at a cache-line aligned address (borrowed) and one float
     * past it (copied): the same outputs */
    float *buf = aligned_alloc(64, 64 * ((N * F + 1) * sizeof(float) / 64 + 1));
    for (int shift = 0; shift < 2; shift++) {
        nc_tensor moved = *x;
        moved.data = buf + shift;
        memcpy(moved.data, before, sizeof before);
        nc_tensor *got = NULL;
        NC_CHECK(run(net, &moved, &snn, &got, &err) == NC_OK, "SNN forward, input moved by %d floats", shift);
        if (got && out)
            NC_CHECK(memcmp(got->data, out->data, T * N * O * sizeof(float)) == 0, "input moved by %d floats", shift);
        NC_CHECK(memcmp(before, moved.data, sizeof before) == 0, "input moved by %d: left as it was", shift);
        nc_tensor_free(got);
    }
    free(buf);
    nc_tensor_free(x), nc_tensor_free(out);
    nc_net_free(net);
}

/* Event-driven layers: input → IF → conv 3×3 (stride 2 on the second) →
 * IF → conv → IF → flatten → dense → IF → dense, in SNN mode, where the
 * inputs of the convs and dense layers are sparse spikes.  The engine's
 * output matches the same pipeline run with the naive kernels; the spike
 * densities are checked to be low enough for the event path. */
static void test_event_driven(void)
{
    enum { N = 5, T = 6, C0 = 4, H = 10, C1 = 12, C2 = 20, F = 30, O = 7 };
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){C0, H, H});
    float th0[C0] = {1.5f, 2.0f, 2.5f, 3.0f}, th = 3.0f, th3 = 50.0f;
    int n0 = add_neuron(net, "if0", x, NC_NEURON_IF);
    set_if(net, n0, C0, th0, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    int cv1 = add_conv(net, "conv1", n0, C1, C0, 3, 1);
    int n1 = add_neuron(net, "if1", cv1, NC_NEURON_IF);
    set_if(net, n1, 1, &th, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    int cv2 = add_conv(net, "conv2", n1, C2, C1, 3, 1);
    net->nodes[cv2].stride[0] = net->nodes[cv2].stride[1] = 2;
    int n2 = add_neuron(net, "if2", cv2, NC_NEURON_IF);
    set_if(net, n2, 1, &th, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    int fl = add1(net, NC_NODE_FLATTEN, "flat", n2);
    int fc1 = add_dense(net, "fc1", fl, F, C2 * 25, -0.3f, 0.3f);
    int n3 = add_neuron(net, "if3", fc1, NC_NEURON_IF);
    set_if(net, n3, 1, &th3, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    int fc2 = add_dense(net, "fc2", n3, O, F, -0.5f, 0.5f);
    add1(net, NC_NODE_OUTPUT, "y", fc2);
    NC_CHECK(infer(net), "shapes");

    int64_t bs[4] = {N, C0, H, H};
    nc_tensor *in = rnd_tensor(4, bs, -0.5f, 1.0f), *out = NULL;
    nc_run_options o = {.mode = NC_MODE_SNN, .T = T};
    nc_error err = {0};
    NC_CHECK(run(net, in, &o, &out, &err) == NC_OK, "forward");

    /* the same with the naive kernels, on all T·N rows */
    const int R = T * N;
    nc_window g1 = square_window(C0, H, H, 3, 1, 1), g2 = square_window(C1, H, H, 3, 2, 1);
    size_t n_s0 = (size_t)R * C0 * H * H, n_c1 = (size_t)R * C1 * H * H, n_c2 = (size_t)R * C2 * 25;
    float *s0 = malloc(n_s0 * sizeof(float)), *c1 = malloc(n_c1 * sizeof(float));
    float *c2 = malloc(n_c2 * sizeof(float)), *f1 = malloc((size_t)R * F * sizeof(float));
    float *ref = malloc((size_t)R * O * sizeof(float));
    float *v = malloc(n_c1 * sizeof(float)); /* the largest layer's membranes */
    nc_if_params p0 = {th0, C0, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE};
    nc_if_params p = {&th, 1, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE};
    nc_if_params p3 = {&th3, 1, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE};
    int64_t step0 = (int64_t)N * C0 * H * H, step1 = (int64_t)N * C1 * H * H, step2 = (int64_t)N * C2 * 25;
    nc_ref_if_run(&p0, T, N, C0, H * H, in->data, 0, s0, step0, v);
    nc_ref_conv2d(&g1, C1, 1, R, s0, net->nodes[cv1].weight->data, net->nodes[cv1].bias->data, c1);
    nc_ref_if_run(&p, T, N, C1, H * H, c1, step1, c1, step1, v);
    nc_ref_conv2d(&g2, C2, 1, R, c1, net->nodes[cv2].weight->data, net->nodes[cv2].bias->data, c2);
    nc_ref_if_run(&p, T, N, C2, 25, c2, step2, c2, step2, v);
    nc_ref_dense(R, C2 * 25, F, c2, net->nodes[fc1].weight->data, net->nodes[fc1].bias->data, f1);
    nc_ref_if_run(&p3, T, N, F, 1, f1, (int64_t)N * F, f1, (int64_t)N * F, v);
    nc_ref_dense(R, F, O, f1, net->nodes[fc2].weight->data, net->nodes[fc2].bias->data, ref);
    double d0 = (double)nc_count_nonzero((int64_t)n_s0, s0) / (double)n_s0;
    double d1 = (double)nc_count_nonzero((int64_t)n_c1, c1) / (double)n_c1;
    double d2 = (double)nc_count_nonzero((int64_t)n_c2, c2) / (double)n_c2;
    double d3 = (double)nc_count_nonzero((int64_t)R * F, f1) / (double)(R * F);
    printf("# spike densities: %.3f %.3f %.3f %.3f\n", d0, d1, d2, d3);
    NC_CHECK(d0 > 0.02 && d0 < 0.3 && d1 > 0.02 && d1 < 0.3 && d2 > 0.01 && d2 < 0.3,
             "the convs see sparse spikes (event path)");
    NC_CHECK(d3 > 0.005 && d3 < 0.08, "the last dense layer sees sparse spikes (event path)");
    NC_CHECK(out && nc_tensor_numel(out) == (int64_t)R * O, "[T, N, %d]", O);
    /* float sums in another order; a spike could flip at an exact tie, which
     * random weights make unlikely */
    if (out)
        NC_CHECK(compare("event-driven snn", out->data, ref, (int64_t)R * O, 1e-4, 1e-4),
                 "matches naive kernels");
    free(s0), free(c1), free(c2), free(f1), free(ref), free(v);
    nc_tensor_free(in), nc_tensor_free(out);
    nc_net_free(net);
}

static void observe_nothing(void *user, int node, const float *data, int64_t rows, int64_t per_row)
{
    (void)user, (void)node, (void)data, (void)rows, (void)per_row;
}

/* input → IF → conv 3×3 (event-driven) → MaxPool 2×2 PRE_SPIKE → IF →
 * flatten → dense → output: without an observer the engine runs the conv and
 * its running max pool fused, per sample (nc_conv2d_events_maxpool); with one
 * (which wants the conv's currents) it runs them one after the other.  Both
 * give the same spikes and outputs, bit for bit, on 1 and 2 threads. */
static void test_fused_conv_maxpool(void)
{
    enum { N = 9, T = 7, C0 = 3, H = 12, C1 = 10, F = 6 };
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){C0, H, H});
    float th0 = 1.5f, th1 = 2.0f;
    int n0 = add_neuron(net, "if0", x, NC_NEURON_IF);
    set_if(net, n0, 1, &th0, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    int cv = add_conv(net, "conv", n0, C1, C0, 3, 1);
    int mp = add_pool(net, NC_NODE_MAXPOOL, "pool", cv, 2, 2);
    net->nodes[mp].maxpool_strategy = NC_MAXPOOL_PRE_SPIKE;
    int n1 = add_neuron(net, "if1", mp, NC_NEURON_IF);
    set_if(net, n1, 1, &th1, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    int fl = add1(net, NC_NODE_FLATTEN, "flat", n1);
    int fc = add_dense(net, "fc", fl, F, C1 * 36, -0.3f, 0.3f);
    add1(net, NC_NODE_OUTPUT, "y", fc);
    NC_CHECK(infer(net), "shapes");
    int64_t bs[4] = {N, C0, H, H};
    nc_tensor *in = rnd_tensor(4, bs, -0.5f, 1.0f);
    nc_observer watcher = {observe_nothing, NULL, NULL};
    for (int threads = 1; threads <= 2; threads++) {
        nc_tensor *out[2] = {NULL, NULL};
        for (int watched = 0; watched < 2; watched++) {
            nc_engine *e = nc_engine_cpu_new();
            e->threads = threads;
            nc_run_options o = {.mode = NC_MODE_SNN, .T = T, .observer = watched ? &watcher : NULL};
            nc_error err = {0};
            NC_CHECK(nc_engine_load(e, net, &err) == NC_OK, "load");
            NC_CHECK(nc_engine_forward(e, in, &o, &out[watched], &err) == NC_OK, "forward: %s", err.message);
            nc_engine_free(e);
        }
        int64_t n = (int64_t)T * N * F;
        NC_CHECK(out[0] && out[1] && memcmp(out[0]->data, out[1]->data, (size_t)n * sizeof(float)) == 0,
                 "%d threads: fused and unfused conv + max pool give the same outputs", threads);
        if (out[0] && out[1])
            compare("fused conv + max pool", out[0]->data, out[1]->data, n, 0, 0);
        nc_tensor_free(out[0]), nc_tensor_free(out[1]);
    }
    nc_tensor_free(in);
    nc_net_free(net);
}

typedef struct max_obs {
    float *max; /* per node */
} max_obs;

static void record_max(void *user, int node, const float *data, int64_t rows, int64_t per_row)
{
    max_obs *m = user;
    for (int64_t i = 0; i < rows * per_row; i++)
        m->max[node] = data[i] > m->max[node] ? data[i] : m->max[node];
}

static double mean_abs_err(const nc_tensor *snn, const nc_tensor *ann, int T)
{
    int64_t n = nc_tensor_numel(ann);
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        double mean = 0;
        for (int t = 0; t < T; t++)
            mean += snn->data[t * n + i];
        total += fabs(mean / T - ann->data[i]);
    }
    return total / n;
}

/* A random ReLU CNN; thresholds = max activation on the batch; the SNN's mean
 * output over T steps approaches the ANN's as T grows. */
static void test_snn_approaches_ann(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){1, 6, 6});
    int cv = add_conv(net, "conv", x, 4, 1, 3, 0);
    int r1 = add_neuron(net, "r1", cv, NC_NEURON_RELU);
    int ap = add_pool(net, NC_NODE_AVGPOOL, "pool", r1, 2, 2);
    int fl = add1(net, NC_NODE_FLATTEN, "flat", ap);
    int d1 = add_dense(net, "fc1", fl, 12, 16, -0.3f, 0.6f);
    int r2 = add_neuron(net, "r2", d1, NC_NEURON_RELU);
    int d2 = add_dense(net, "fc2", r2, 3, 12, -0.5f, 0.5f);
    add1(net, NC_NODE_OUTPUT, "y", d2);
    NC_CHECK(infer(net), "shapes");

    int64_t bs[4] = {8, 1, 6, 6};
    nc_tensor *in = rnd_tensor(4, bs, 0, 1), *ann = NULL;
    float max[16] = {0};
    max_obs mo = {max};
    nc_observer ob = {record_max, NULL, &mo};
    nc_run_options oa = {.mode = NC_MODE_ANN, .observer = &ob};
    nc_error err = {0};
    NC_CHECK(run(net, in, &oa, &ann, &err) == NC_OK, "ann");
    NC_CHECK(max[r1] > 0 && max[r2] > 0, "layers are active");
    set_if(net, r1, 1, &max[r1], 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    set_if(net, r2, 1, &max[r2], 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    double errs[3];
    int Ts[3] = {8, 64, 1024};
    for (int k = 0; k < 3; k++) {
        nc_tensor *snn = NULL;
        nc_run_options os = {.mode = NC_MODE_SNN, .T = Ts[k]};
        NC_CHECK(run(net, in, &os, &snn, &err) == NC_OK, "snn T=%d", Ts[k]);
        errs[k] = snn && ann ? mean_abs_err(snn, ann, Ts[k]) : INFINITY;
        printf("# T=%d mean |snn − ann| = %.5f\n", Ts[k], errs[k]);
        nc_tensor_free(snn);
    }
    double scale = 0;
    for (int64_t i = 0; ann && i < nc_tensor_numel(ann); i++)
        scale += fabs(ann->data[i]) / (double)nc_tensor_numel(ann);
    NC_CHECK(errs[2] < errs[0], "error falls with T");
    NC_CHECK(errs[2] < 0.02 * scale + 1e-3, "T=1024 is close to the ANN (scale %.3f)", scale);
    nc_tensor_free(in), nc_tensor_free(ann);
    nc_net_free(net);
}

static void test_poisson(void)
{
    enum { T = 2000, F = 4 };
    nc_net *net = nc_net_new();
    int x = add_input(net, 1, (int64_t[]){F});
    add1(net, NC_NODE_OUTPUT, "y", x);
    NC_CHECK(infer(net), "shapes");
    nc_tensor *in = nc_tensor_new2(2, F), *a = NULL, *b = NULL, *c = NULL;
    const float v[2 * F] = {0.1f, 0.5f, 0.9f, 1.7f, -0.3f, 0.25f, 0.0f, 0.75f};
    memcpy(in->data, v, sizeof v);
    nc_error err = {0};
    nc_run_options o = {.mode = NC_MODE_SNN, .T = T, .encoding = NC_ENCODING_POISSON, .seed = 7};
    NC_CHECK(run(net, in, &o, &a, &err) == NC_OK, "run a");
    NC_CHECK(run(net, in, &o, &b, &err) == NC_OK, "run b");
    o.seed = 8;
    NC_CHECK(run(net, in, &o, &c, &err) == NC_OK, "run c");
    if (a && b && c) {
        NC_CHECK(memcmp(a->data, b->data, (size_t)T * 2 * F * sizeof(float)) == 0, "same seed, same spikes");
        NC_CHECK(memcmp(a->data, c->data, (size_t)T * 2 * F * sizeof(float)) != 0, "another seed differs");
        for (int i = 0; i < 2 * F; i++) {
            double rate = 0;
            for (int t = 0; t < T; t++)
                rate += a->data[t * 2 * F + i];
            double want = v[i] < 0 ? 0 : v[i] > 1 ? 1 : v[i];
            NC_CHECK_CLOSE(rate / T, want, 0.04, 0, "rate of value %d", i);
        }
    }
    nc_tensor_free(in), nc_tensor_free(a), nc_tensor_free(b), nc_tensor_free(c);
    nc_net_free(net);
}

/* ---- callbacks -------------------------------------------------------------------- */

typedef struct progress_log {
    int calls, stop_at;
    int64_t last_done, total;
    int stage_ok;
} progress_log;

static int on_progress(void *user, const nc_progress *p)
{
    progress_log *l = user;
    l->calls++;
    l->last_done = p->done;
    l->total = p->total;
    l->stage_ok = strcmp(p->stage, "simulate") == 0;
    return l->stop_at && p->done >= l->stop_at;
}

/* x [2] → dense → relu → dense → output: 5 nodes */
static nc_net *small_mlp(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 1, (int64_t[]){2});
    int d1 = add_dense(net, "fc1", x, 3, 2, -1, 1);
    int r = add_neuron(net, "r", d1, NC_NEURON_RELU);
    int d2 = add_dense(net, "fc2", r, 2, 3, -1, 1);
    add1(net, NC_NODE_OUTPUT, "y", d2);
    infer(net);
    return net;
}

static void test_cancel(void)
{
    nc_net *net = small_mlp();
    nc_tensor *in = nc_tensor_new2(2, 2), *out = NULL;
    progress_log log = {0};
    nc_run_options o = {.mode = NC_MODE_ANN, .progress = on_progress, .progress_user = &log};
    nc_error err = {0};
    NC_CHECK(run(net, in, &o, &out, &err) == NC_OK, "runs");
    NC_CHECK(log.calls == 5 && log.last_done == 5 && log.total == 5 && log.stage_ok, "one call per node");
    nc_tensor_free(out);
    out = NULL;
    log = (progress_log){.stop_at = 2};
    nc_engine *e = nc_engine_cpu_new();
    NC_CHECK(nc_engine_load(e, net, &err) == NC_OK, "load");
    nc_status s = nc_engine_forward(e, in, &o, &out, &err);
    NC_CHECK(s == NC_ERR_CANCELLED && out == NULL, "cancelled (%s)", err.message);
    NC_CHECK(log.calls == 2, "stopped at once (%d calls)", log.calls);
    /* the engine still works after a cancel */
    o.progress = NULL;
    NC_CHECK(nc_engine_forward(e, in, &o, &out, &err) == NC_OK && out, "runs again");
    nc_tensor_free(out);
    nc_engine_free(e);
    nc_tensor_free(in);
    nc_net_free(net);
}

typedef struct obs_log {
    int64_t rows[16], per_row[16], in_rows[16];
    int calls[16], in_calls[16];
    int steps_equal[16]; /* every step of the observed data equals step 0 */
    int T;
} obs_log;

static int steps_equal(const float *data, int64_t rows, int64_t per_row, int T)
{
    int64_t step = rows / T * per_row;
    for (int t = 1; t < T; t++)
        if (memcmp(data, data + t * step, (size_t)step * sizeof(float)) != 0)
            return 0;
    return 1;
}

static void obs_out(void *user, int node, const float *data, int64_t rows, int64_t per_row)
{
    obs_log *l = user;
    l->calls[node]++;
    l->rows[node] = rows;
    l->per_row[node] = per_row;
    l->steps_equal[node] = steps_equal(data, rows, per_row, l->T);
}

static void obs_in(void *user, int node, const float *data, int64_t rows, int64_t per_row)
{
    obs_log *l = user;
    (void)data;
    l->in_calls[node]++;
    l->in_rows[node] = rows * per_row;
}

static void test_observer(void)
{
    nc_net *net = small_mlp();
    float th = 0.3f;
    set_if(net, 2, 1, &th, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    nc_tensor *in = nc_tensor_new2(3, 2), *out = NULL;
    for (int i = 0; i < 6; i++)
        in->data[i] = 0.2f * (float)i;
    obs_log log = {.T = 5};
    nc_observer ob = {obs_out, obs_in, &log};
    nc_run_options o = {.mode = NC_MODE_SNN, .T = 5, .observer = &ob};
    nc_error err = {0};
    NC_CHECK(run(net, in, &o, &out, &err) == NC_OK, "snn");
    int64_t per_row[5] = {2, 3, 3, 2, 2};
    for (int i = 0; i < 5; i++)
        NC_CHECK(log.calls[i] == 1 && log.rows[i] == 15 && log.per_row[i] == per_row[i],
                 "node %d: %d calls, rows %lld, per_row %lld", i, log.calls[i], (long long)log.rows[i],
                 (long long)log.per_row[i]);
    NC_CHECK(log.in_calls[2] == 1 && log.in_rows[2] == 15 * 3, "IF input current observed");
    NC_CHECK(log.in_calls[1] == 0 && log.in_calls[3] == 0, "only neurons have input observations");
    NC_CHECK(log.steps_equal[0] && log.steps_equal[1], "direct input and first layer are constant");
    NC_CHECK(!log.steps_equal[2], "the IF output changes over the steps");
    nc_tensor_free(out);
    out = NULL;
    memset(&log, 0, sizeof log);
    log.T = 1;
    o.mode = NC_MODE_ANN;
    NC_CHECK(run(net, in, &o, &out, &err) == NC_OK, "ann");
    for (int i = 0; i < 5; i++)
        NC_CHECK(log.calls[i] == 1 && log.rows[i] == 3 && log.per_row[i] == per_row[i], "ann node %d", i);
    NC_CHECK(log.in_calls[2] == 0, "no input observations outside SNN mode");
    nc_tensor_free(out);
    nc_tensor_free(in);
    nc_net_free(net);
}

/* One engine, several passes of different modes and sizes: buffers are
 * reused between passes, results must not depend on what ran before. */
static void test_reuse(void)
{
    nc_net *net = small_mlp();
    float th = 0.4f;
    set_if(net, 2, 1, &th, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    int64_t shape[2] = {5, 2};
    nc_tensor *in = rnd_tensor(2, shape, 0, 1), *small = nc_tensor_new2(2, 2);
    nc_run_options snn = {.mode = NC_MODE_SNN, .T = 7}, ann = {.mode = NC_MODE_ANN};
    nc_tensor *first = NULL, *again = NULL, *a1 = NULL, *a2 = NULL, *tmp = NULL;
    nc_error err = {0};
    nc_engine *e = nc_engine_cpu_new();
    NC_CHECK(nc_engine_load(e, net, &err) == NC_OK, "load");
    NC_CHECK(nc_engine_forward(e, in, &snn, &first, &err) == NC_OK, "snn 1");
    NC_CHECK(nc_engine_forward(e, in, &ann, &a1, &err) == NC_OK, "ann 1");
    snn.T = 40;
    NC_CHECK(nc_engine_forward(e, small, &snn, &tmp, &err) == NC_OK, "a bigger pass in between");
    snn.T = 7;
    NC_CHECK(nc_engine_forward(e, in, &snn, &again, &err) == NC_OK, "snn 2");
    NC_CHECK(nc_engine_forward(e, in, &ann, &a2, &err) == NC_OK, "ann 2");
    if (first && again)
        NC_CHECK(compare("snn again", again->data, first->data, nc_tensor_numel(first), 0, 0), "snn repeats");
    if (a1 && a2)
        NC_CHECK(compare("ann again", a2->data, a1->data, nc_tensor_numel(a1), 0, 0), "ann repeats");
    nc_tensor_free(first), nc_tensor_free(again), nc_tensor_free(a1), nc_tensor_free(a2), nc_tensor_free(tmp);
    nc_tensor_free(in), nc_tensor_free(small);
    nc_engine_free(e);
    nc_net_free(net);
}

/* ---- NIR additions: scale, sequences, recurrent edges ---------------------------- */

static void test_scale_node(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 1, (int64_t[]){3});
    int sc = add1(net, NC_NODE_SCALE, "scale", x);
    net->nodes[sc].weight = nc_tensor_new1(3);
    const float w[3] = {2, -1, 0.5f};
    memcpy(net->nodes[sc].weight->data, w, sizeof w);
    add1(net, NC_NODE_OUTPUT, "y", sc);
    NC_CHECK(infer(net), "shapes");
    nc_tensor *in = nc_tensor_new2(2, 3), *out = NULL;
    for (int i = 0; i < 6; i++)
        in->data[i] = (float)(i + 1);
    nc_error err = {0};
    NC_CHECK(run(net, in, NULL, &out, &err) == NC_OK, "forward");
    const float want[6] = {2, -2, 1.5f, 8, -5, 3};
    if (out)
        NC_CHECK(compare("scale", out->data, want, 6, 0, 0), "scaled");
    nc_tensor_free(in), nc_tensor_free(out);
    nc_net_free(net);
}

/* An SNN fed a sequence [T, N, F]: step t reads slice t, no encoding. */
static void test_sequence_input(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 1, (int64_t[]){1});
    int nr = add_neuron(net, "if", x, NC_NEURON_IF);
    float th = 1.0f;
    set_if(net, nr, 1, &th, 0.0f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    add1(net, NC_NODE_OUTPUT, "y", nr);
    NC_CHECK(infer(net), "shapes");
    int64_t shape[3] = {4, 1, 1};
    nc_tensor *seq = nc_tensor_new(3, shape), *out = NULL;
    const float in[4] = {0.75f, 0.0f, 0.5f, 1.0f}; /* m: .75, .75, 1.25 f → .25, 1.25 f */
    memcpy(seq->data, in, sizeof in);
    nc_run_options o = {.mode = NC_MODE_SNN, .T = 4};
    nc_error err = {0};
    NC_CHECK(run(net, seq, &o, &out, &err) == NC_OK, "forward");
    const float want[4] = {0, 0, 1, 1};
    if (out)
        NC_CHECK(compare("sequence", out->data, want, 4, 0, 0), "spikes");
    nc_tensor_free(out);
    out = NULL;
    o.T = 5; /* a sequence must have T steps */
    NC_CHECK(run(net, seq, &o, &out, &err) == NC_ERR_SHAPE, "T differs from the sequence");
    nc_tensor_free(seq);
    nc_net_free(net);
}

/* x → add(x, rec) → IF → output, rec = the IF's spikes one step earlier:
 * x = .375, θ 1, v0 0: m .375, .75, 1.125 f (.125); then rec = 1 every step
 * adds 1.375 per step and it fires on: 0 0 1 1 1 1. */
static void test_recurrent(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 1, (int64_t[]){1});
    int rec = nc_net_add_node(net, NC_NODE_RECURRENT, "rec", 0, NULL);
    net->nodes[rec].ndim = 1;
    net->nodes[rec].shape[0] = 1;
    net->nodes[rec].recur_source = 3;
    int ad_in[2] = {x, rec};
    int ad = nc_net_add_node(net, NC_NODE_ADD, "add", 2, ad_in);
    int nr = add_neuron(net, "if", ad, NC_NEURON_IF);
    NC_CHECK(nr == 3, "IF is node 3");
    float th = 1.0f;
    set_if(net, nr, 1, &th, 0.0f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    add1(net, NC_NODE_OUTPUT, "y", nr);
    NC_CHECK(infer(net), "shapes");
    nc_tensor *in = nc_tensor_new2(1, 1), *out = NULL;
    in->data[0] = 0.375f;
    obs_log log = {.T = 6};
    nc_observer ob = {obs_out, obs_in, &log};
    progress_log pl = {0};
    nc_run_options o = {.mode = NC_MODE_SNN, .T = 6, .observer = &ob, .progress = on_progress, .progress_user = &pl};
    nc_error err = {0};
    NC_CHECK(run(net, in, &o, &out, &err) == NC_OK, "forward");
    const float want[6] = {0, 0, 1, 1, 1, 1};
    if (out)
        NC_CHECK(compare("recurrent", out->data, want, 6, 0, 0), "spike train");
    for (int i = 0; i < 5; i++)
        NC_CHECK(log.calls[i] == 1 && log.rows[i] == 6 && log.per_row[i] == 1, "observed node %d", i);
    NC_CHECK(log.in_calls[nr] == 1 && log.in_rows[nr] == 6, "IF input observed");
    NC_CHECK(pl.calls == 6 && pl.total == 6 && pl.stage_ok, "progress counts steps (%d)", pl.calls);
    nc_tensor_free(out);
    out = NULL;
    pl = (progress_log){.stop_at = 2};
    NC_CHECK(run(net, in, &o, &out, &err) == NC_ERR_CANCELLED && !out, "cancel between steps");
    NC_CHECK(run(net, in, NULL, &out, &err) == NC_ERR_UNSUPPORTED, "no ANN function: %s", err.message);
    nc_tensor_free(in);
    nc_net_free(net);
}

/* x [2] → LIF (→ recurrent variant: x + 0·rec, the same function run step by
 * step) against the forward-Euler update of sim/nc_neuron_models.h computed
 * here.  Skipped while the engine is built without the NIR models. */
static int nir_lif_case(int recurrent, const char **skip)
{
    enum { T = 12 };
    const float dt = 1e-3f, tau[2] = {4e-3f, 2e-3f}, th = 0.3f, x[2] = {0.5f, 0.9f};
    nc_net *net = nc_net_new();
    int64_t xs[1] = {2};
    int in = add_input(net, 1, xs), src = in;
    if (recurrent) {
        int rec = nc_net_add_node(net, NC_NODE_RECURRENT, "rec", 0, NULL);
        net->nodes[rec].ndim = 1;
        net->nodes[rec].shape[0] = 2;
        net->nodes[rec].recur_source = 4;
        int sc = add1(net, NC_NODE_SCALE, "zero", rec);
        net->nodes[sc].weight = nc_tensor_new1(1); /* 0: the edge carries nothing */
        int ad_in[2] = {in, sc};
        src = nc_net_add_node(net, NC_NODE_ADD, "add", 2, ad_in);
    }
    int lif = add_neuron(net, "lif", src, NC_NEURON_LIF);
    nc_node *n = &net->nodes[lif];
    n->neuron.dt = dt;
    n->neuron.reset = NC_RESET_ZERO;
    int64_t ps[2] = {NC_NPARAM_COUNT, 2};
    n->weight = nc_tensor_new(2, ps);
    for (int e = 0; e < 2; e++) {
        n->weight->data[NC_NPARAM_TAU * 2 + e] = tau[e];
        n->weight->data[NC_NPARAM_R * 2 + e] = 1.0f;
        n->weight->data[NC_NPARAM_V_THRESHOLD * 2 + e] = th;
    }
    add1(net, NC_NODE_OUTPUT, "y", lif);
    int failed = !infer(net) || (recurrent && lif != 4);
    nc_tensor *batch = nc_tensor_new2(1, 2), *out = NULL;
    memcpy(batch->data, x, sizeof x);
    nc_run_options o = {.mode = NC_MODE_SNN, .T = T};
    nc_error err = {0};
    nc_engine *e = nc_engine_cpu_new();
    nc_status st = nc_engine_load(e, net, &err);
    if (st == NC_OK)
        st = nc_engine_forward(e, batch, &o, &out, &err);
    if (st == NC_ERR_UNSUPPORTED && strstr(err.message, "not in this build")) {
        *skip = "NIR neuron models are not in this build";
    } else if (st != NC_OK) {
        printf("# %s\n", err.message);
        failed = 1;
    } else {
        float v[2] = {0, 0}, want[2 * T];
        for (int t = 0; t < T; t++)
            for (int k = 0; k < 2; k++) {
                float a = dt / tau[k];
                v[k] = v[k] + a * (0.0f - v[k] + 1.0f * x[k]);
                want[t * 2 + k] = v[k] > th;
                if (v[k] > th)
                    v[k] = 0.0f;
            }
        failed |= !compare("lif", out->data, want, 2 * T, 0, 0);
        int spikes = 0;
        for (int i = 0; i < 2 * T; i++)
            spikes += want[i] != 0;
        failed |= spikes < 3; /* the case must exercise spikes and resets */
    }
    nc_tensor_free(batch), nc_tensor_free(out);
    nc_engine_free(e);
    nc_net_free(net);
    return failed;
}

static void test_nir_lif(void)
{
    const char *skip = NULL;
    int failed = nir_lif_case(0, &skip);
    nc_test_report("test_nir_lif (layer at once)", failed, skip);
    skip = NULL;
    failed = nir_lif_case(1, &skip);
    nc_test_report("test_nir_lif (step by step)", failed, skip);
}

/* ---- MaxPool strategies ------------------------------------------------------------ */

/* x [1, 2, 2] → IF (θ 1, v0 0) → maxpool 2×2 → flatten → output, T = 6.
 * Inputs .625 and .375 (and two zeros) give the trains
 *   n0: 0 1 0 1 1 0      n1: 0 0 1 0 0 1
 * pre-spike pools the running sums S0 0 1 1 2 3 3 and S1 0 0 1 1 1 2 and
 * passes their increments: 0 1 0 1 1 0 (the mean 3/6 is the larger mean, not
 * the max of spikes 0 1 1 1 1 1 that overestimates it); average: (n0 + n1)/4;
 * gated: running counts (current step included) n0 1,1,2,3,3 vs n1 0,1,1,1,2
 * from t = 2 on, the tie at t = 3 goes to n0 (first): 0 1 0 1 1 0. */
static void test_maxpool_strategies(void)
{
    nc_net *net = nc_net_new();
    int x = add_input(net, 3, (int64_t[]){1, 2, 2});
    int nr = add_neuron(net, "if", x, NC_NEURON_IF);
    float th = 1.0f;
    set_if(net, nr, 1, &th, 0.0f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    int mp = add_pool(net, NC_NODE_MAXPOOL, "pool", nr, 2, 2);
    int fl = add1(net, NC_NODE_FLATTEN, "flat", mp);
    add1(net, NC_NODE_OUTPUT, "y", fl);
    NC_CHECK(infer(net), "shapes");
    nc_tensor *in = nc_tensor_new4(1, 1, 2, 2);
    in->data[0] = 0.625f;
    in->data[1] = 0.375f;
    const float want_max[6] = {0, 1, 0, 1, 1, 0}, want_gated[6] = {0, 1, 0, 1, 1, 0};
    const float want_avg[6] = {0, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f};
    nc_maxpool_strategy strategies[3] = {NC_MAXPOOL_PRE_SPIKE, NC_MAXPOOL_GATED, NC_MAXPOOL_AVG};
    const float *wants[3] = {want_max, want_gated, want_avg};
    for (int k = 0; k < 3; k++) {
        net->nodes[mp].maxpool_strategy = strategies[k];
        nc_tensor *out = NULL;
        nc_run_options o = {.mode = NC_MODE_SNN, .T = 6};
        nc_error err = {0};
        NC_CHECK(run(net, in, &o, &out, &err) == NC_OK, "run");
        if (out)
            NC_CHECK(compare(nc_maxpool_strategy_name(strategies[k]), out->data, wants[k], 6, 0, 0), "%s",
                     nc_maxpool_strategy_name(strategies[k]));
        nc_tensor_free(out);
    }
    /* ANN mode is a plain max whatever the strategy */
    nc_tensor *out = NULL;
    nc_error err = {0};
    NC_CHECK(run(net, in, NULL, &out, &err) == NC_OK, "ann");
    if (out)
        NC_CHECK_CLOSE(out->data[0], 0.625, 0, 0, "ann max");
    nc_tensor_free(out);
    nc_tensor_free(in);
    nc_net_free(net);
}

/* ---- errors and registry ------------------------------------------------------------ */

static void test_errors(void)
{
    nc_net *net = small_mlp();
    nc_tensor *bad = nc_tensor_new2(4, 3), *out = NULL;
    nc_error err = {0};
    nc_engine *e = nc_engine_cpu_new();
    NC_CHECK(nc_engine_forward(e, bad, NULL, &out, &err) == NC_ERR_ARGUMENT, "forward before load");
    NC_CHECK(nc_engine_load(e, net, &err) == NC_OK, "load");
    NC_CHECK(nc_engine_forward(e, bad, NULL, &out, &err) == NC_ERR_SHAPE && !out, "bad shape");
    NC_CHECK(strstr(err.message, "[N, 2]") && strstr(err.message, "[4, 3]"), "names both shapes: %s",
             err.message);
    nc_run_options o = {.mode = NC_MODE_SNN, .T = 0};
    nc_tensor *good = nc_tensor_new2(1, 2);
    NC_CHECK(nc_engine_forward(e, good, &o, &out, &err) == NC_ERR_ARGUMENT, "T = 0");
    nc_engine_free(e);

    /* an impossible allocation: 2^31 steps × 1000 values */
    nc_net *big = nc_net_new();
    int x = add_input(big, 1, (int64_t[]){1000});
    int nr = add_neuron(big, "spiky", x, NC_NEURON_IF);
    float th = 1.0f;
    set_if(big, nr, 1, &th, 0.5f, NC_RESET_SUBTRACT, NC_FIRE_GE);
    add1(big, NC_NODE_OUTPUT, "y", nr);
    infer(big);
    nc_tensor *bx = nc_tensor_new2(1, 1000);
    o.T = 2147483647;
    e = nc_engine_cpu_new();
    nc_engine_load(e, big, &err);
    NC_CHECK(nc_engine_forward(e, bx, &o, &out, &err) == NC_ERR_MEMORY, "out of memory");
    NC_CHECK(strstr(err.message, "spiky") && strstr(err.message, "bytes"), "names node and bytes: %s",
             err.message);
    nc_engine_free(e);
    nc_tensor_free(bx), nc_tensor_free(bad), nc_tensor_free(good);
    nc_net_free(big);
    nc_net_free(net);
}

static void test_registry(void)
{
    nc_engine *e = NULL;
    nc_error err = {0};
    NC_CHECK(nc_engine_new("cpu", &e, &err) == NC_OK && e && strcmp(e->ops->name, "cpu") == 0, "cpu");
    nc_net *net = small_mlp();
    NC_CHECK(nc_engine_check(e, net, &err) == NC_OK, "cpu supports everything");
    char why[64];
    for (int i = 0; i < net->n_nodes; i++)
        NC_CHECK(e->ops->supports(e, net, i, why, sizeof why), "node %d", i);
    nc_engine_free(e);
    nc_engine_free(NULL);
    NC_CHECK(nc_engine_new("gpu", &e, &err) != NC_OK && !e, "gpu not in this build");
    NC_CHECK(strstr(err.message, "gpu") != NULL, "%s", err.message);
    NC_CHECK(nc_engine_new("loihi", &e, &err) == NC_OK && e && strcmp(e->ops->name, "loihi") == 0, "%s",
             err.message); /* tests/test_loihi.c tests it */
    nc_engine_free(e);
    NC_CHECK(nc_engine_new("tpu", &e, &err) == NC_ERR_ARGUMENT && strstr(err.message, "tpu"), "%s", err.message);
    const char *const *names = nc_engine_names();
    NC_CHECK(names && names[0] && strcmp(names[0], "cpu") == 0, "names list cpu first");
    nc_net_free(net);
}

int main(void)
{
    nc_test_cpu_path_or_skip();
    NC_RUN(test_cpu_path_taken);
    NC_RUN(test_ann_cnn);
    NC_RUN(test_residual_concat);
    NC_RUN(test_threads);
    NC_RUN(test_if_equals_qcfs);
    NC_RUN(test_spike_trains);
    NC_RUN(test_two_layer_train);
    NC_RUN(test_flatten_of_input);
    NC_RUN(test_event_driven);
    NC_RUN(test_fused_conv_maxpool);
    NC_RUN(test_snn_approaches_ann);
    NC_RUN(test_poisson);
    NC_RUN(test_cancel);
    NC_RUN(test_observer);
    NC_RUN(test_reuse);
    NC_RUN(test_scale_node);
    NC_RUN(test_sequence_input);
    NC_RUN(test_recurrent);
    test_nir_lif();
    NC_RUN(test_maxpool_strategies);
    NC_RUN(test_errors);
    NC_RUN(test_registry);
    return nc_test_done();
}
