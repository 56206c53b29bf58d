/* test_project.c — the native project file (round trip, damaged files,
 * safe saving), SHA-256, and recordings read back with h5py. */
#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nc_test.h"
#include "nc_test_util.h"
#include "../core/nc_h5util.h"
#include "../core/nc_project.h"
#include "../core/nc_sha256.h"
#include "../sim/nc_simulate.h"

static void fill(nc_tensor *t, float scale)
{
    for (int64_t i = 0; i < nc_tensor_numel(t); i++)
        t->data[i] = scale * (float)((i * 31) % 17 - 8);
}

static int add(nc_net *net, nc_node_kind kind, const char *name, int a, int b)
{
    int in[2] = {a, b};
    return nc_net_add_node(net, kind, name, b >= 0 ? 2 : (a >= 0 ? 1 : 0), in);
}

static void set_if(nc_node *nd, int n, float base)
{
    float th[8];
    for (int i = 0; i < n; i++)
        th[i] = base + 0.125f * (float)i;
    nd->neuron.model = NC_NEURON_IF;
    nc_neuron_set_threshold(&nd->neuron, n, th, NULL);
}

/* A converted net using every node kind and every node field. */
static nc_net *full_net(void)
{
    nc_net *net = nc_net_new();
    int in = add(net, NC_NODE_INPUT, "input", -1, -1);
    nc_node *x = &net->nodes[in];
    x->ndim = 3, x->shape[0] = 3, x->shape[1] = 8, x->shape[2] = 8;
    int c1 = add(net, NC_NODE_CONV2D, "features/conv1", in, -1);
    net->nodes[c1].weight = nc_tensor_new4(4, 3, 3, 3);
    net->nodes[c1].bias = nc_tensor_new1(4);
    fill(net->nodes[c1].weight, 0.1f), fill(net->nodes[c1].bias, 0.01f);
    net->nodes[c1].pad[0] = net->nodes[c1].pad[1] = net->nodes[c1].pad[2] = net->nodes[c1].pad[3] = 1;
    int n1 = add(net, NC_NODE_NEURON, "features/if1", c1, -1);
    set_if(&net->nodes[n1], 4, 0.75f);
    net->nodes[n1].neuron.reset = NC_RESET_ZERO;
    net->nodes[n1].neuron.compare = NC_FIRE_GT;
    net->nodes[n1].neuron.v0_fraction = 0.25f;
    int mp = add(net, NC_NODE_MAXPOOL, "pool1", n1, -1);
    nc_node *m = &net->nodes[mp];
    m->kernel[0] = m->kernel[1] = 3, m->stride[0] = m->stride[1] = 2, m->ceil_mode = 1;
    m->maxpool_strategy = NC_MAXPOOL_GATED;
    int dw = add(net, NC_NODE_CONV2D, "dw", mp, -1);
    net->nodes[dw].weight = nc_tensor_new4(4, 1, 1, 1);
    net->nodes[dw].groups = 4;
    net->nodes[dw].dilation[0] = 2;
    fill(net->nodes[dw].weight, 0.5f);
    int af = add(net, NC_NODE_AFFINE, "bn", dw, -1);
    net->nodes[af].weight = nc_tensor_new1(4), net->nodes[af].bias = nc_tensor_new1(4);
    fill(net->nodes[af].weight, 0.2f), fill(net->nodes[af].bias, 0.3f);
    int q = add(net, NC_NODE_NEURON, "qcfs", af, -1);
    set_if(&net->nodes[q], 1, 2.0f);
    net->nodes[q].neuron.model = NC_NEURON_QCFS;
    net->nodes[q].neuron.levels = 4;
    net->nodes[q].neuron.shift = 0.375f;
    int sum = add(net, NC_NODE_ADD, "residual", q, mp);
    int ap = add(net, NC_NODE_AVGPOOL, "pool2", sum, -1);
    nc_node *p = &net->nodes[ap];
    p->kernel[0] = p->kernel[1] = 2, p->stride[0] = p->stride[1] = 1, p->pad[2] = 1, p->count_include_pad = 1;
    p->maxpool_strategy = NC_MAXPOOL_AVG;
    int cat = add(net, NC_NODE_CONCAT, "cat", ap, ap);
    int gap = add(net, NC_NODE_GLOBAL_AVGPOOL, "gap", cat, -1);
    int fl = add(net, NC_NODE_FLATTEN, "flatten", gap, -1);
    int fc = add(net, NC_NODE_DENSE, "fc", fl, -1);
    net->nodes[fc].weight = nc_tensor_new2(5, 8);
    fill(net->nodes[fc].weight, 0.05f);
    int cl = add(net, NC_NODE_NEURON, "relu6", fc, -1);
    net->nodes[cl].neuron.model = NC_NEURON_CLIP;
    net->nodes[cl].neuron.clip_min = 0, net->nodes[cl].neuron.clip_max = 6;
    int r = add(net, NC_NODE_NEURON, "relu", cl, -1);
    add(net, NC_NODE_OUTPUT, "logits", r, -1);
    snprintf(net->source_path, sizeof net->source_path, "/models/full.onnx");
    snprintf(net->source_format, sizeof net->source_format, "onnx");
    nc_report_add(&net->report, "/conv1/Conv", "Conv", 17, NC_SUPPORT_CONVERTED, "features/conv1", "%s", "");
    nc_report_add(&net->report, "bn1", "BatchNormalization", 17, NC_SUPPORT_FOLDED, "features/conv1", "folded");
    nc_report_add(&net->report, "mp", "MaxPool", 17, NC_SUPPORT_APPROXIMATED, "pool1", "gated max pool: ±1 spike");
    return inferred(net);
}

static int tensors_equal(const nc_tensor *a, const nc_tensor *b)
{
    if (!a || !b)
        return a == b;
    return a->ndim == b->ndim && memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)) == 0 &&
           memcmp(a->data, b->data, (size_t)nc_tensor_numel(a) * sizeof(float)) == 0;
}

static int neurons_equal(const nc_neuron *a, const nc_neuron *b)
{
    return a->model == b->model && a->clip_min == b->clip_min && a->clip_max == b->clip_max &&
           a->n_threshold == b->n_threshold && a->levels == b->levels && a->shift == b->shift &&
           a->v0_fraction == b->v0_fraction && a->reset == b->reset && a->compare == b->compare &&
           (a->n_threshold == 0 || memcmp(a->threshold, b->threshold, (size_t)a->n_threshold * sizeof(float)) == 0);
}

static void check_node_equal(const nc_node *a, const nc_node *b, int i)
{
    NC_CHECK(strcmp(a->name, b->name) == 0 && a->kind == b->kind, "node %d name/kind", i);
    NC_CHECK(a->n_inputs == b->n_inputs && (a->n_inputs == 0 ||
             memcmp(a->inputs, b->inputs, (size_t)a->n_inputs * sizeof(int)) == 0), "node %d inputs", i);
    NC_CHECK(a->ndim == b->ndim && memcmp(a->shape, b->shape, sizeof a->shape) == 0, "node %d shape", i);
    NC_CHECK(memcmp(a->kernel, b->kernel, sizeof a->kernel) == 0 && memcmp(a->stride, b->stride, sizeof a->stride) == 0 &&
             memcmp(a->pad, b->pad, sizeof a->pad) == 0 && memcmp(a->dilation, b->dilation, sizeof a->dilation) == 0,
             "node %d window", i);
    NC_CHECK(a->groups == b->groups && a->count_include_pad == b->count_include_pad && a->ceil_mode == b->ceil_mode &&
             a->maxpool_strategy == b->maxpool_strategy, "node %d options", i);
    NC_CHECK(tensors_equal(a->weight, b->weight) && tensors_equal(a->bias, b->bias), "node %d weights", i);
    NC_CHECK(neurons_equal(&a->neuron, &b->neuron), "node %d neuron", i);
}

static void check_net_equal(const nc_net *a, const nc_net *b)
{
    NC_CHECK(a->n_nodes == b->n_nodes && a->input == b->input && a->output == b->output, "net size");
    for (int i = 0; i < a->n_nodes && i < b->n_nodes; i++)
        check_node_equal(&a->nodes[i], &b->nodes[i], i);
    NC_CHECK(strcmp(a->source_path, b->source_path) == 0 && strcmp(a->source_format, b->source_format) == 0, "source");
    NC_CHECK(a->report.count == b->report.count, "report count");
    for (int i = 0; i < a->report.count && i < b->report.count; i++)
        NC_CHECK(memcmp(&a->report.entries[i], &b->report.entries[i], sizeof(nc_report_entry)) == 0, "report %d", i);
}

static nc_project *full_project(void)
{
    char model[600];
    nc_project *p = nc_project_new();
    nc_project_set_net(p, full_net());
    FILE *f = fopen(nc_test_file("model.onnx", model, sizeof model), "wb");
    fputs("abc", f);
    fclose(f);
    nc_error err;
    NC_CHECK(nc_project_set_source(p, model, &err) == NC_OK, "%s", err.message);
    p->has_preprocess = 1;
    p->preprocess = (nc_preprocess){.scale = 1.0f / 255, .n_mean = 3, .mean = {0.485f, 0.456f, 0.406f},
                                    .n_std = 1, .std = {0.25f}};
    p->calibration = (nc_project_calibration){.set = 1, .method = "percentile", .percentile = 99.9, .per_channel = 1};
    const float mx[4] = {1, 2, 3, 4.5f}, pc[1] = {2.25f};
    int64_t s4[1] = {4}, s1[1] = {1};
    nc_project_add_stat(p, "features/if1", "max", 1, s4, mx, &err);
    nc_project_add_stat(p, "features/if1", "p99.9", 1, s4, mx, &err);
    nc_project_add_stat(p, "qcfs", "p99.9", 1, s1, pc, &err);
    nc_project_set_meta(p, "dataset", "fashion-mnist", &err);
    nc_project_set_meta(p, "note", "ünïcode ✓", &err);
    nc_project_set_metric(p, "ann_accuracy", 0.9123, &err);
    nc_project_set_metric(p, "qcfs_accuracy", 0.9011, &err);
    nc_project_set_metric(p, "snn_accuracy_T8", 0.8876, &err);
    return p;
}

static void test_sha256(void)
{
    char hex[65];
    nc_sha256_hex("abc", 3, hex);
    NC_CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "abc: %s", hex);
    nc_sha256_hex("", 0, hex);
    NC_CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0, "empty: %s", hex);
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    nc_sha256_hex(m, strlen(m), hex);
    NC_CHECK(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0, "448 bits: %s", hex);
    nc_sha256 s;
    uint8_t d[32];
    char a[1000];
    memset(a, 'a', sizeof a);
    nc_sha256_init(&s);
    for (int i = 0; i < 1000; i++)
        nc_sha256_update(&s, a, sizeof a);
    nc_sha256_final(&s, d);
    NC_CHECK(d[0] == 0xcd && d[1] == 0xc7 && d[31] == 0xd0, "a million 'a'");
    nc_error err;
    NC_CHECK(nc_sha256_file("/nonexistent/x", hex, &err) == NC_ERR_IO, "missing file");
}

static void test_round_trip(void)
{
    char path[600];
    nc_error err;
    nc_project *p = full_project(), *q = NULL;
    nc_test_file("full.ncsnn", path, sizeof path);
    NC_CHECK(nc_project_save(p, path, &err) == NC_OK, "%s", err.message);
    NC_CHECK(nc_project_load(path, &q, &err) == NC_OK, "%s", err.message);
    if (!q)
        goto done;
    check_net_equal(p->net, q->net);
    NC_CHECK(strcmp(q->source_sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0,
             "source sha256");
    NC_CHECK(strcmp(p->source_path, q->source_path) == 0, "source path");
    NC_CHECK(q->has_preprocess && memcmp(&p->preprocess, &q->preprocess, sizeof p->preprocess) == 0, "preprocess");
    NC_CHECK(memcmp(&p->calibration, &q->calibration, sizeof p->calibration) == 0, "calibration");
    NC_CHECK(q->n_stats == 3, "stats");
    for (int i = 0; i < p->n_stats && i < q->n_stats; i++) {
        const nc_named_array *b = nc_project_get_stat(q, p->stats[i].node, p->stats[i].name);
        NC_CHECK(b && tensors_equal(p->stats[i].data, b->data), "stat %d", i);
    }
    NC_CHECK(q->n_meta == 2 && strcmp(nc_project_get_meta(q, "note"), "ünïcode ✓") == 0, "metadata");
    double v = 0;
    NC_CHECK(q->n_metrics == 3 && nc_project_get_metric(q, "qcfs_accuracy", &v) && v == 0.9011, "metrics");
    /* a second save of the loaded project gives the same content */
    nc_project *r = NULL;
    NC_CHECK(nc_project_save(q, path, &err) == NC_OK && nc_project_load(path, &r, &err) == NC_OK, "%s", err.message);
    if (r)
        check_net_equal(q->net, r->net);
    nc_project_free(r);
done:
    nc_project_free(q);
    nc_project_free(p);
}

/* A bare project: an empty report and no optional groups. */
static void test_minimal_round_trip(void)
{
    char path[600];
    nc_error err;
    nc_project *p = nc_project_new(), *q = NULL;
    nc_net *net = nc_net_new();
    int in = nc_net_add_node(net, NC_NODE_INPUT, "x", 0, NULL);
    net->nodes[in].ndim = 1, net->nodes[in].shape[0] = 7;
    nc_net_add_node(net, NC_NODE_OUTPUT, "y", 1, &in);
    nc_net_infer_shapes(net, &err);
    nc_project_set_net(p, net);
    nc_test_file("minimal.ncsnn", path, sizeof path);
    NC_CHECK(nc_project_save(p, path, &err) == NC_OK, "%s", err.message);
    NC_CHECK(nc_project_load(path, &q, &err) == NC_OK, "%s", err.message);
    if (q) {
        check_net_equal(p->net, q->net);
        NC_CHECK(!q->has_preprocess && !q->calibration.set && q->n_stats == 0 && q->n_meta == 0, "nothing extra");
    }
    nc_project_free(q);
    nc_project_free(p);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static unsigned char *read_all(const char *path, long *size)
{
    *size = file_size(path);
    unsigned char *buf = malloc((size_t)*size + 1);
    FILE *f = fopen(path, "rb");
    if (!f || fread(buf, 1, (size_t)*size, f) != (size_t)*size)
        *size = -1;
    if (f)
        fclose(f);
    return buf;
}

static void write_all(const char *path, const unsigned char *buf, long size)
{
    FILE *f = fopen(path, "wb");
    fwrite(buf, 1, (size_t)size, f);
    fclose(f);
}

/* Loading must fail with NC_ERR_FORMAT and name the file. */
static void expect_format_error(const char *path, const char *what)
{
    nc_error err = {0};
    nc_project *q = NULL;
    nc_status st = nc_project_load(path, &q, &err);
    NC_CHECK(st == NC_ERR_FORMAT && !q, "%s: status %s (%s)", what, nc_status_name(st), err.message);
    NC_CHECK(strstr(err.message, path) != NULL, "%s: message names the file: %s", what, err.message);
    nc_project_free(q);
}

static void test_truncated_and_random(void)
{
    char good[600], bad[600];
    nc_error err;
    nc_project *p = full_project();
    nc_test_file("good.ncsnn", good, sizeof good);
    nc_test_file("bad.ncsnn", bad, sizeof bad);
    NC_CHECK(nc_project_save(p, good, &err) == NC_OK, "%s", err.message);
    long size;
    unsigned char *bytes = read_all(good, &size);
    const long cuts[] = {0, 7, 8, 100, 512, 1024, size / 4, size / 2, 3 * size / 4, size - 100, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "truncated to %ld of %ld bytes", cuts[i], size);
        write_all(bad, bytes, cuts[i]);
        expect_format_error(bad, what);
    }
    nc_error e1;
    nc_project_load(bad, &(nc_project *){NULL}, &e1);
    printf("# e.g. %s\n", e1.message);
    unsigned char noise[4096];
    uint32_t x = 99;
    for (size_t i = 0; i < sizeof noise; i++)
        noise[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 16);
    write_all(bad, noise, sizeof noise);
    expect_format_error(bad, "random bytes");
    /* the HDF5 signature, then noise */
    memcpy(noise, bytes, 8);
    write_all(bad, noise, sizeof noise);
    expect_format_error(bad, "signature then random bytes");
    /* damage inside a valid file: any result but a crash, never a bogus OK status code */
    int loaded = 0, refused = 0, rounds = getenv("NC_PROJECT_FUZZ") ? atoi(getenv("NC_PROJECT_FUZZ")) : 40;
    for (int k = 0; k < rounds; k++) {
        unsigned char *copy = malloc((size_t)size);
        memcpy(copy, bytes, (size_t)size);
        long at = 64 + (long)((x = x * 1103515245u + 12345u) >> 8) % (size - 80);
        for (int b = 0; b < 8; b++)
            copy[at + b] ^= (unsigned char)(0x5a + 17 * b);
        write_all(bad, copy, size);
        nc_project *q = NULL;
        nc_status st = nc_project_load(bad, &q, &err);
        NC_CHECK(st == NC_OK || st == NC_ERR_FORMAT || st == NC_ERR_SHAPE || st == NC_ERR_ARGUMENT,
                 "damaged at %ld: %s", at, nc_status_name(st));
        loaded += st == NC_OK, refused += st != NC_OK;
        if (q) /* what loads must be what was saved: the damage hit unused bytes */
            check_net_equal(p->net, q->net);
        nc_project_free(q);
        free(copy);
    }
    printf("# %d damaged copies: %d loaded (damage in unused bytes), %d refused\n", rounds, loaded, refused);
    free(bytes);
    nc_project_free(p);
}

static void test_wrong_files(void)
{
    char path[600];
    nc_error err;
    nc_project *q = NULL;
    NC_CHECK(nc_project_load("/nonexistent/dir/x.ncsnn", &q, &err) == NC_ERR_IO, "missing file is IO");
    /* valid HDF5, not a project */
    nc_h5_writer w;
    nc_test_file("other.h5", path, sizeof path);
    nc_h5_create(&w, path, &err);
    nc_h5_attr_string(w.file, "format", "something-else", &err);
    nc_h5_commit(&w, &err);
    expect_format_error(path, "not a project");
    /* a newer version */
    nc_h5_create(&w, path, &err);
    nc_h5_attr_string(w.file, "format", NC_PROJECT_FORMAT, &err);
    nc_h5_attr_i64(w.file, "version", 2, &err);
    nc_h5_commit(&w, &err);
    NC_CHECK(nc_project_load(path, &q, &err) == NC_ERR_UNSUPPORTED, "version 2: %s", err.message);
    /* /net as an external link to another file: refused */
    char target[600];
    nc_project *p = full_project();
    nc_project_save(p, nc_test_file("target.ncsnn", target, sizeof target), &err);
    nc_h5_create(&w, path, &err);
    nc_h5_attr_string(w.file, "format", NC_PROJECT_FORMAT, &err);
    nc_h5_attr_i64(w.file, "version", 1, &err);
    H5Lcreate_external(target, "/net", w.file, "net", H5P_DEFAULT, H5P_DEFAULT);
    nc_h5_commit(&w, &err);
    expect_format_error(path, "external link");
    nc_project_load(path, &q, &err);
    NC_CHECK(strstr(err.message, "external") != NULL, "says why: %s", err.message);
    /* a node whose input comes later: a damaged graph */
    nc_project *bad = full_project();
    bad->net->nodes[3].inputs[0] = 5;
    nc_test_file("badgraph.ncsnn", path, sizeof path);
    NC_CHECK(nc_project_save(bad, path, &err) == NC_OK, "%s", err.message);
    expect_format_error(path, "input from a later node");
    nc_project_free(bad);
    nc_project_free(p);
}

static int count_temp_files(void)
{
    int n = 0;
    DIR *d = opendir(nc_test_dir());
    for (struct dirent *e; d && (e = readdir(d));)
        n += strstr(e->d_name, ".tmp-") != NULL;
    if (d)
        closedir(d);
    return n;
}

static void test_safe_save(void)
{
    char path[600], dir[600];
    nc_error err;
    nc_project *p = full_project();
    nc_test_file("keep.ncsnn", path, sizeof path);
    NC_CHECK(nc_project_save(p, path, &err) == NC_OK, "%s", err.message);
    long size;
    unsigned char *before = read_all(path, &size);
    /* a save that fails half-way (a node of no valid kind) */
    nc_project *broken = full_project();
    broken->net->nodes[5].kind = (nc_node_kind)99;
    NC_CHECK(nc_project_save(broken, path, &err) == NC_ERR_ARGUMENT, "broken net refused: %s", err.message);
    long size2;
    unsigned char *after = read_all(path, &size2);
    NC_CHECK(size2 == size && memcmp(before, after, (size_t)size) == 0, "existing file intact");
    NC_CHECK(count_temp_files() == 0, "temporary file removed");
    free(after);
    /* an unwritable folder (root can write anyway: then only check no damage) */
    nc_test_file("ro", dir, sizeof dir);
    mkdir(dir, 0755);
    char ro[700];
    snprintf(ro, sizeof ro, "%s/keep.ncsnn", dir);
    write_all(ro, before, size);
    chmod(dir, 0555);
    nc_status st = nc_project_save(p, ro, &err);
    if (geteuid() == 0)
        printf("# running as root: the read-only folder is writable (status %s)\n", nc_status_name(st));
    else
        NC_CHECK(st == NC_ERR_IO, "unwritable folder: %s", err.message);
    after = read_all(ro, &size2);
    NC_CHECK(size2 == size && (st == NC_OK || memcmp(before, after, (size_t)size) == 0), "file intact");
    chmod(dir, 0755);
    free(after);
    /* a folder that does not exist */
    NC_CHECK(nc_project_save(p, "/nonexistent/dir/x.ncsnn", &err) == NC_ERR_IO, "missing folder: %s", err.message);
    free(before);
    nc_project_free(broken);
    nc_project_free(p);
}

/* ---- recordings read back with h5py ------------------------------------------------ */

static const char *find_python(void)
{
    static const char *candidates[] = {NULL, "python3", "/usr/bin/python3"};
    static char chosen[512];
    candidates[0] = getenv("NC_PYTHON");
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        char cmd[700];
        if (!candidates[i])
            continue;
        snprintf(cmd, sizeof cmd, "%s -c 'import h5py, numpy' >/dev/null 2>&1", candidates[i]);
        if (system(cmd) == 0) {
            snprintf(chosen, sizeof chosen, "%s", candidates[i]);
            return chosen;
        }
    }
    return NULL;
}

/* The number after "key": in a flat JSON object (NAN if absent). */
static double json_number(const char *json, const char *key)
{
    char pattern[300];
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    const char *at = strstr(json, pattern);
    return at ? strtod(at + strlen(pattern), NULL) : NAN;
}

static nc_net *sim_net(void)
{
    nc_net *net = nc_net_new();
    int in = nc_net_add_node(net, NC_NODE_INPUT, "image", 0, NULL);
    net->nodes[in].ndim = 3, net->nodes[in].shape[0] = 1, net->nodes[in].shape[1] = 3, net->nodes[in].shape[2] = 3;
    int c = nc_net_add_node(net, NC_NODE_CONV2D, "conv", 1, &in);
    net->nodes[c].weight = nc_tensor_new4(2, 1, 2, 2);
    fill(net->nodes[c].weight, 0.2f);
    int n1 = nc_net_add_node(net, NC_NODE_NEURON, "block/if", 1, &c);
    set_if(&net->nodes[n1], 2, 0.5f);
    int f = nc_net_add_node(net, NC_NODE_FLATTEN, "flat", 1, &n1);
    int d = nc_net_add_node(net, NC_NODE_DENSE, "fc", 1, &f);
    net->nodes[d].weight = nc_tensor_new2(3, 8);
    fill(net->nodes[d].weight, 0.1f);
    nc_net_add_node(net, NC_NODE_OUTPUT, "out", 1, &d);
    return inferred(net);
}

static void test_recording_h5py(void)
{
    const char *py = find_python();
    if (!py) {
        nc_test_report("test_recording_h5py", 0, "python3 with h5py not found (set NC_PYTHON)");
        return;
    }
    static float images[6 * 9];
    static int32_t labels[6] = {0, 1, 2, 0, 1, 2};
    for (int i = 0; i < 54; i++)
        images[i] = (float)((i * 5) % 9) / 4.0f;
    nc_dataset ds = {.count = 6, .channels = 1, .height = 3, .width = 3, .images = images, .labels = labels,
                     .num_classes = 3, .path = "in-memory"};
    nc_net *net = sim_net();
    nc_engine *e = nc_engine_cpu_new();
    nc_record *rec = NULL;
    nc_error err;
    nc_simulate_options o = {.T = 6, .batch_size = 4, .record = {.raster_samples = 3, .trace_neurons = 3}};
    int failed = nc_simulate(e, net, &ds, &o, NULL, NULL, &rec, &err) != NC_OK;
    char path[600], cmd[2000], json[8192] = "";
    nc_test_file("run.h5", path, sizeof path);
    if (!failed && nc_record_save(rec, path, &err) != NC_OK)
        failed = 1, printf("# save: %s\n", err.message);
    char script[600];
    nc_test_path("tests/h5py_read_recording.py", script, sizeof script);
    snprintf(cmd, sizeof cmd, "%s '%s' '%s'", py, script, path);
    FILE *pipe = failed ? NULL : popen(cmd, "r");
    size_t n = pipe ? fread(json, 1, sizeof json - 1, pipe) : 0;
    json[n] = 0;
    int rc = pipe ? pclose(pipe) : -1;
    printf("# h5py: %.300s\n", json);
    failed |= rc != 0;
    if (!failed) {
        nc_layer_stats s;
        nc_record_layer_stats(rec, 0, &s);
        failed |= json_number(json, "samples") != 6 || json_number(json, "T") != 6;
        failed |= fabs(json_number(json, "accuracy_last") - nc_record_accuracy(rec, 6)) > 1e-12;
        failed |= fabs(json_number(json, "ann_accuracy") - nc_record_ann_accuracy(rec)) > 1e-12;
        failed |= json_number(json, "layer.block/if.spikes") != (double)s.spikes;
        failed |= fabs(json_number(json, "layer.block/if.firing_rate") - s.firing_rate) > 1e-12;
        failed |= fabs(json_number(json, "layer.block/if.local_mse") - s.local.mse) > 1e-12;
        nc_raster r;
        nc_record_raster(rec, 0, &r);
        int64_t events = 0;
        for (int smp = 0; smp < r.samples; smp++)
            for (int j = 0; j < r.neurons; j++)
                for (int t = 0; t < r.T; t++)
                    events += nc_raster_spike(&r, smp, j, t);
        failed |= json_number(json, "layer.block/if.events") != (double)events;
        if (failed)
            printf("# values differ from the record\n");
    }
    nc_test_report("test_recording_h5py", failed, NULL);
    nc_record_free(rec);
    nc_engine_free(e);
    nc_net_free(net);
}

int main(void)
{
    NC_RUN(test_sha256);
    NC_RUN(test_round_trip);
    NC_RUN(test_minimal_round_trip);
    NC_RUN(test_truncated_and_random);
    NC_RUN(test_wrong_files);
    NC_RUN(test_safe_save);
    test_recording_h5py();
    return nc_test_done();
}
