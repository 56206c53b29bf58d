/* nc_test_util.h — fixture helpers that several C tests share: a seeded
 * random generator, small nets built node by node, reading fixtures and
 * counting correct SNN answers.  Everything is static inline, so a test
 * includes it after nc_test.h and uses what it needs.
 *
 * The random sequence of a test stays its own: define NC_TEST_RNG_SEED
 * before including this header to pick the seed. */
#ifndef NC_TEST_UTIL_H
#define NC_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/nc_dataset.h"
#include "../core/nc_net.h"
#include "../core/nc_tensor.h"
#include "../sim/nc_evaluate.h"
#include "../sim/nc_window.h"

#ifndef NC_TEST_RNG_SEED
#define NC_TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#endif

/* ---- random data (a 64-bit LCG: the same numbers on every machine) ---------- */

static inline uint32_t rnd(void)
{
    static uint64_t state = NC_TEST_RNG_SEED;
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(state >> 33);
}

static inline int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); } /* [lo, hi] */
static inline float rnd_float(void) { return (float)rnd() / 2147483648.0f * 2.0f - 1.0f; }          /* [-1, 1) */
static inline float rnd_range(float lo, float hi) { return lo + (rnd_float() + 1.0f) * 0.5f * (hi - lo); }

/* n values in [-1, 1), malloc'ed */
static inline float *rnd_array(int64_t n)
{
    float *a = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; a && i < n; i++)
        a[i] = rnd_float();
    return a;
}

static inline nc_tensor *rnd_tensor(int ndim, const int64_t *shape, float lo, float hi)
{
    nc_tensor *t = nc_tensor_new(ndim, shape);
    for (int64_t i = 0; t && i < nc_tensor_numel(t); i++)
        t->data[i] = rnd_range(lo, hi);
    return t;
}

/* The window of a k×k kernel over c×h×w with one stride and the same padding
 * on every side, no dilation: the convolutions and pools of the test nets. */
static inline nc_window square_window(int c, int h, int w, int k, int stride, int pad)
{
    nc_window g;
    int kk[2] = {k, k}, ss[2] = {stride, stride}, pp[4] = {pad, pad, pad, pad}, one[2] = {1, 1};
    nc_window_init(&g, c, h, w, kk, ss, pp, one, 0);
    return g;
}

/* ---- synthetic data ------------------------------------------------------------ */

/* 8×8 images, class = which quadrant is bright (4 classes), with noise. */
static inline nc_dataset *quadrant_dataset(int64_t count, uint64_t seed)
{
    nc_dataset *ds = calloc(1, sizeof *ds);
    ds->count = count;
    ds->channels = 1, ds->height = 8, ds->width = 8;
    ds->num_classes = 4;
    ds->images = malloc((size_t)count * 64 * sizeof(float));
    ds->labels = malloc((size_t)count * sizeof(int32_t));
    snprintf(ds->path, sizeof ds->path, "quadrants");
    for (int64_t k = 0; k < count; k++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int label = (int)((seed >> 33) % 4);
        ds->labels[k] = label;
        for (int y = 0; y < 8; y++)
            for (int x = 0; x < 8; x++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                float noise = (float)(uint32_t)(seed >> 40) / 16777216.0f * 0.6f;
                int quadrant = (y >= 4) * 2 + (x >= 4);
                ds->images[k * 64 + y * 8 + x] = (quadrant == label ? 0.7f : 0.0f) + noise;
            }
    }
    return ds;
}

static inline void free_dataset(nc_dataset *ds)
{
    free(ds->images);
    free(ds->labels);
    free(ds);
}

/* ---- net building ------------------------------------------------------------- */

static inline int add1(nc_net *net, nc_node_kind kind, const char *name, int in)
{
    return nc_net_add_node(net, kind, name, 1, &in);
}

static inline int add_input(nc_net *net, int ndim, const int64_t *shape)
{
    int i = nc_net_add_node(net, NC_NODE_INPUT, "x", 0, NULL);
    net->nodes[i].ndim = ndim;
    memcpy(net->nodes[i].shape, shape, (size_t)ndim * sizeof(int64_t));
    return i;
}

/* A k×k pool of `kind` (avg or max) with this stride on both axes, no padding. */
static inline int add_pool(nc_net *net, nc_node_kind kind, const char *name, int in, int k, int stride)
{
    int i = add1(net, kind, name, in);
    net->nodes[i].kernel[0] = net->nodes[i].kernel[1] = k;
    net->nodes[i].stride[0] = net->nodes[i].stride[1] = stride;
    return i;
}

static inline int add_neuron(nc_net *net, const char *name, int in, nc_neuron_model model)
{
    int i = add1(net, NC_NODE_NEURON, name, in);
    net->nodes[i].neuron.model = model;
    return i;
}

/* The residual tail of the engine tests: add(a, b) → concat(add, c) →
 * global average pool → flatten; returns the flatten node. */
static inline int add_concat_gap(nc_net *net, int a, int b, int c)
{
    int ad = nc_net_add_node(net, NC_NODE_ADD, "add", 2, (int[]){a, b});
    int cc = nc_net_add_node(net, NC_NODE_CONCAT, "cat", 2, (int[]){ad, c});
    return add1(net, NC_NODE_FLATTEN, "flat", add1(net, NC_NODE_GLOBAL_AVGPOOL, "gap", cc));
}

/* Infers the shapes; prints why not. */
static inline int infer(nc_net *net)
{
    nc_error err = {0};
    nc_status s = nc_net_infer_shapes(net, &err);
    if (s != NC_OK)
        printf("# infer: %s\n", err.message);
    return s == NC_OK;
}

/* A net built node by node, its shapes inferred; NULL (why printed, the net
 * freed) when they do not fit. */
static inline nc_net *inferred(nc_net *net)
{
    if (infer(net))
        return net;
    nc_net_free(net);
    return NULL;
}

/* A fair ANN for quadrant_dataset: the mean of each 4×4 quadrant is its
 * class score, with a bias towards class 3 (so that it errs, and the stages
 * have something to change).  x[1,8,8] → conv 1×1 → ReLU → AvgPool 4 → flatten → dense → y */
static inline nc_net *quadrant_ann(void)
{
    nc_net *net = nc_net_new();
    int64_t shape[3] = {1, 8, 8}, ws[4] = {1, 1, 1, 1}, bs[1] = {1}, fs[2] = {4, 4}, fb[1] = {4};
    int x = add_input(net, 3, shape);
    int c = add1(net, NC_NODE_CONV2D, "conv", x);
    net->nodes[c].weight = nc_tensor_new(4, ws);
    net->nodes[c].bias = nc_tensor_new(1, bs);
    net->nodes[c].weight->data[0] = 1.0f, net->nodes[c].bias->data[0] = 0.0f;
    int relu = add_neuron(net, "relu", c, NC_NEURON_RELU);
    int ap = add_pool(net, NC_NODE_AVGPOOL, "pool", relu, 4, 4);
    int fc = add1(net, NC_NODE_DENSE, "fc", add1(net, NC_NODE_FLATTEN, "flat", ap));
    net->nodes[fc].weight = nc_tensor_new(2, fs);
    net->nodes[fc].bias = nc_tensor_new(1, fb);
    for (int k = 0; k < 16; k++)
        net->nodes[fc].weight->data[k] = k % 5 == 0 ? 4.0f : 0.0f;
    memset(net->nodes[fc].bias->data, 0, 4 * sizeof(float));
    net->nodes[fc].bias->data[3] = 2.75f; /* too much for class 3: about a quarter of the others go to it */
    net->output = add1(net, NC_NODE_OUTPUT, "y", fc);
    net->input = x;
    snprintf(net->source_path, sizeof net->source_path, "quadrant ann");
    return inferred(net);
}

/* Ends a net built node by node: its output node reads node `from`, then
 * the shapes are inferred (inferred: NULL when they do not fit). */
static inline nc_net *with_output(nc_net *net, const char *name, int from)
{
    add1(net, NC_NODE_OUTPUT, name, from);
    return inferred(net);
}

/* ---- files and text ------------------------------------------------------------- */

static inline int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* A .npy fixture, or NULL (message printed). */
static inline nc_tensor *read_npy(const char *path)
{
    nc_tensor *t = NULL;
    nc_error err = {0};
    if (nc_npy_read(path, &t, &err) != NC_OK)
        printf("# %s\n", err.message);
    return t;
}

/* Prints a multi-line text as TAP comments. */
static inline void print_comment(const char *text)
{
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        int n = end ? (int)(end - line) : (int)strlen(line);
        printf("# %.*s\n", n, line);
        line += n + (end != NULL);
    }
}

/* ---- Fashion-MNIST ---------------------------------------------------------------- */

/* The preprocessing the fixture models were trained with. */
static inline nc_preprocess fmnist_pp(void)
{
    nc_preprocess pp;
    memset(&pp, 0, sizeof pp);
    pp.n_mean = pp.n_std = 1;
    pp.mean[0] = 0.2860f;
    pp.std[0] = 0.3530f;
    return pp;
}

/* check(name, train, test) for each of the n fixture models in names, on
 * the first 500 training and test_n test images of Fashion-MNIST,
 * preprocessed as the models were trained; a split that cannot be opened
 * is passed as NULL (why printed). */
static inline void check_fmnist_fixtures(const char *const *names, int n, int64_t test_n,
                                         void (*check)(const char *, const nc_dataset *, const nc_dataset *))
{
    nc_preprocess pp = fmnist_pp();
    nc_dataset *train = NULL, *test = NULL;
    nc_error err = {0};
    if (nc_dataset_open("fashion-mnist", NC_SPLIT_TRAIN, &pp, 500, &train, &err) != NC_OK ||
        nc_dataset_open("fashion-mnist", NC_SPLIT_TEST, &pp, test_n, &test, &err) != NC_OK)
        printf("# %s\n", err.message);
    for (int k = 0; k < n; k++)
        check(names[k], train, test);
    nc_dataset_free(train);
    nc_dataset_free(test);
}

/* How many of the bs samples of an SNN's output [T, bs, classes] are right:
 * the class with the largest output summed over the T steps (at most 64
 * classes are looked at). */
static inline int64_t snn_correct(const nc_tensor *out, int T, int64_t bs, const int32_t *labels)
{
    int64_t correct = 0, f = out->shape[2];
    for (int64_t s = 0; s < bs; s++) {
        float sum[64] = {0};
        for (int t = 0; t < T; t++)
            for (int64_t k = 0; k < f && k < 64; k++)
                sum[k] += out->data[(t * bs + s) * f + k];
        correct += nc_argmax(sum, f < 64 ? f : 64) == labels[s];
    }
    return correct;
}

#endif
