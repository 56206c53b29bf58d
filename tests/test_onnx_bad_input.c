/* test_onnx_bad_input.c — the ONNX importer on broken, hostile and
 * unsupported files: each must return the right status with a message that
 * starts with the file name (and names the node where there is one), never
 * crash and never leak (run under ASan/valgrind).  A few good models serve as
 * controls: external data (dynamo layout), every TensorProto storage field,
 * and a QCFS network exported by PyTorch.
 *
 * Fixtures: tests/fixtures/onnx_bad/, written by tools/make_bad_onnx.py.
 * Empty, random, truncated and symlinked files are made here in a temp dir. */
#include "nc_test.h"

#include "../core/nc_onnx.h"
#include "../sim/nc_engine.h"

#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *fixture(const char *name, char *buf, size_t size)
{
    char rel[512];
    snprintf(rel, sizeof rel, "tests/fixtures/onnx_bad/%s", name);
    return nc_test_path(rel, buf, size);
}

static int write_file(const char *path, const void *data, size_t size)
{
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return -1;
    size_t put = fwrite(data, 1, size, fp);
    return fclose(fp) == 0 && put == size ? 0 : -1;
}

/* Imports `path` and checks the status, that the message starts with the
 * path, and that it contains each of the NULL-terminated `needles`. */
static void expect_load(const char *path, const nc_onnx_options *opts, nc_status want, ...)
{
    nc_net *net = (nc_net *)1;
    nc_error err = {0};
    nc_status st = nc_onnx_load(path, opts, &net, &err);
    NC_CHECK(st == want, "%s: got %s, want %s (%s)", path, nc_status_name(st), nc_status_name(want), err.message);
    if (want != NC_OK) {
        NC_CHECK(net == NULL, "%s: *out must be NULL on failure", path);
        NC_CHECK(!strncmp(err.message, path, strlen(path)), "message does not start with the path: %s",
                 err.message);
        va_list ap;
        va_start(ap, want);
        for (const char *s; (s = va_arg(ap, const char *));)
            NC_CHECK(strstr(err.message, s) != NULL, "message lacks '%s': %s", s, err.message);
        va_end(ap);
    }
    if (st == NC_OK)
        nc_net_free(net);
}

/* ---- files that are not ONNX ---- */

static void test_empty_file(void)
{
    char p[PATH_MAX];
    NC_CHECK(write_file(nc_test_file("empty.onnx", p, sizeof p), "", 0) == 0, "write");
    expect_load(p, NULL, NC_ERR_FORMAT, "is not a valid ONNX model", "torch.onnx.export", NULL);
}

static void test_random_bytes(void)
{
    char p[PATH_MAX];
    unsigned char buf[4096];
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof buf; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        buf[i] = (unsigned char)(s >> 24);
    }
    NC_CHECK(write_file(nc_test_file("random.onnx", p, sizeof p), buf, sizeof buf) == 0, "write");
    expect_load(p, NULL, NC_ERR_FORMAT, "protobuf parse failed", NULL);
}

static void test_missing_file(void)
{
    char p[PATH_MAX];
    expect_load(nc_test_file("does-not-exist.onnx", p, sizeof p), NULL, NC_ERR_IO, "cannot open", NULL);
}

static void test_not_a_tensor_file(void)
{
    char p[PATH_MAX];
    nc_tensor *t = (nc_tensor *)1;
    nc_error err = {0};
    NC_CHECK(write_file(nc_test_file("junk.pb", p, sizeof p), "\xff\xff\xff\xff", 4) == 0, "write");
    NC_CHECK(nc_onnx_read_tensor_file(p, &t, &err) == NC_ERR_FORMAT, "got: %s", err.message);
    NC_CHECK(t == NULL && !strncmp(err.message, p, strlen(p)), "%s", err.message);
}

/* Half a real model fails cleanly; every other prefix must not crash. */
static void test_truncated(void)
{
    char src[PATH_MAX], p[PATH_MAX];
    size_t size = 0;
    unsigned char *data = nc_test_read_file(fixture("ok_qcfs.onnx", src, sizeof src), &size);
    NC_CHECK(data && size > 100, "cannot read %s", src);
    if (!data)
        return;
    nc_test_file("truncated.onnx", p, sizeof p);
    NC_CHECK(write_file(p, data, size / 2) == 0, "write");
    expect_load(p, NULL, NC_ERR_FORMAT, "truncated or corrupt", NULL);
    for (size_t n = 0; n < size; n += 7) {
        nc_net *net = NULL;
        if (write_file(p, data, n) != 0)
            break;
        if (nc_onnx_load(p, NULL, &net, NULL) == NC_OK)
            nc_net_free(net);
    }
    free(data);
}

/* ---- external data ---- */

static void test_external_missing(void)
{
    char p[PATH_MAX];
    expect_load(fixture("ext_missing.onnx", p, sizeof p), NULL, NC_ERR_IO, "'w'", "ext_missing.onnx.data", NULL);
}

static void test_external_escape(void)
{
    char p[PATH_MAX];
    expect_load(fixture("ext_parent.onnx", p, sizeof p), NULL, NC_ERR_FORMAT, "'../outside.onnx.data'",
                "not inside the model's folder", NULL);
    expect_load(fixture("ext_absolute.onnx", p, sizeof p), NULL, NC_ERR_FORMAT, "'/etc/passwd'",
                "not inside the model's folder", NULL);
}

static void test_external_too_short(void)
{
    char p[PATH_MAX];
    expect_load(fixture("ext_short.onnx", p, sizeof p), NULL, NC_ERR_FORMAT, "runs past the end",
                "ext_short.onnx.data", NULL);
}

/* A symlink named like the data file: inside the folder it is followed, to a
 * file outside it is refused. */
static void test_external_symlink(void)
{
    char src[PATH_MAX], model[PATH_MAX], link[PATH_MAX], inside[PATH_MAX], outside[PATH_MAX];
    size_t size = 0, dsize = 0;
    unsigned char *m = nc_test_read_file(fixture("ok_external.onnx", src, sizeof src), &size);
    unsigned char *d = nc_test_read_file(fixture("ok_external.onnx.data", src, sizeof src), &dsize);
    NC_CHECK(m && d, "fixtures missing");
    NC_CHECK(realpath(src, outside) != NULL, "realpath %s", src);
    nc_test_file("ok_external.onnx", model, sizeof model);
    nc_test_file("ok_external.onnx.data", link, sizeof link);
    nc_test_file("weights.bin", inside, sizeof inside);
    NC_CHECK(m && write_file(model, m, size) == 0 && d && write_file(inside, d, dsize) == 0, "write");
    unlink(link);
    NC_CHECK(symlink(outside, link) == 0, "symlink");
    expect_load(model, NULL, NC_ERR_FORMAT, "outside the model's folder", NULL);
    unlink(link);
    NC_CHECK(symlink("weights.bin", link) == 0, "symlink");
    expect_load(model, NULL, NC_OK, NULL);
    unlink(link);
    free(m);
    free(d);
}

static void test_memory_budget(void)
{
    char p[PATH_MAX];
    nc_onnx_options small = {0, NULL, 256};
    expect_load(fixture("ok_external.onnx", p, sizeof p), &small, NC_ERR_MEMORY, "memory budget", NULL);
    expect_load(fixture("huge_dims.onnx", p, sizeof p), NULL, NC_ERR_MEMORY, "'w'", NULL);
}

static void test_raw_size_mismatch(void)
{
    char p[PATH_MAX];
    expect_load(fixture("raw_mismatch.onnx", p, sizeof p), NULL, NC_ERR_FORMAT, "'w'", "12 bytes", NULL);
}

/* ---- graphs that do not fit together ---- */

static void test_dangling_input(void)
{
    char p[PATH_MAX];
    expect_load(fixture("dangling.onnx", p, sizeof p), NULL, NC_ERR_FORMAT, "node 'conv'", "'missing_weight'",
                NULL);
}

static void test_cycle(void)
{
    char p[PATH_MAX];
    expect_load(fixture("cycle.onnx", p, sizeof p), NULL, NC_ERR_FORMAT, "cycle", "loop_", NULL);
}

static void test_two_data_inputs(void)
{
    char p[PATH_MAX];
    expect_load(fixture("two_inputs.onnx", p, sizeof p), NULL, NC_ERR_FORMAT, "2 data inputs", "'a'", "'b'", NULL);
}

static void test_channel_mismatch(void)
{
    char p[PATH_MAX];
    expect_load(fixture("channel_mismatch.onnx", p, sizeof p), NULL, NC_ERR_SHAPE, "node 'conv1' (Conv, opset 13)",
                NULL);
}

/* A weight given as a graph input: unbound it is a second data input, bound
 * with the wrong shape a shape error, bound right it imports. */
static void test_binding_shape(void)
{
    char p[PATH_MAX];
    fixture("weight_input.onnx", p, sizeof p);
    nc_tensor *wrong = nc_tensor_new4(1, 1, 2, 2), *right = nc_tensor_new4(1, 1, 3, 3);
    nc_onnx_binding b = {"W", wrong};
    nc_onnx_options opts = {1, &b, 0};
    expect_load(p, NULL, NC_ERR_FORMAT, "'W'", "binding", NULL);
    expect_load(p, &opts, NC_ERR_SHAPE, "binding 'W'", "[1, 1, 2, 2]", "[1, 1, 3, 3]", NULL);
    b.value = right;
    expect_load(p, &opts, NC_OK, NULL);
    b.name = "nope";
    expect_load(p, &opts, NC_ERR_ARGUMENT, "'nope'", NULL);
    nc_tensor_free(wrong);
    nc_tensor_free(right);
}

/* ---- unsupported ops ---- */

static void test_unsupported_ops(void)
{
    char p[PATH_MAX];
    nc_net *net = NULL;
    nc_report rep;
    nc_error err = {0};
    fixture("unsupported_ops.onnx", p, sizeof p);
    expect_load(p, NULL, NC_ERR_UNSUPPORTED, "3 unsupported nodes", "gate (Sigmoid, opset 13)",
                "squash (Tanh, opset 13)", "leaky (LeakyRelu, opset 13)", "ReLU", NULL);
    nc_status st = nc_onnx_load_with_report(p, NULL, &net, &rep, &err);
    NC_CHECK(st == NC_ERR_UNSUPPORTED && net == NULL, "status %s", nc_status_name(st));
    NC_CHECK(rep.count == 5, "the report has every node: %d", rep.count);
    NC_CHECK(nc_report_count(&rep, NC_SUPPORT_UNSUPPORTED) == 3, "3 unsupported");
    NC_CHECK(rep.count > 0 && rep.entries[0].support == NC_SUPPORT_CONVERTED && !strcmp(rep.entries[0].target, "conv"),
             "conv converted");
    nc_report_clear(&rep);
}

static void test_softmax_in_the_middle(void)
{
    char p[PATH_MAX];
    expect_load(fixture("softmax_middle.onnx", p, sizeof p), NULL, NC_ERR_UNSUPPORTED,
                "mid_softmax (Softmax, opset 13)", "middle", NULL);
}

static void test_null_error(void)
{
    char p[PATH_MAX];
    nc_net *net = NULL;
    NC_CHECK(nc_onnx_load(fixture("cycle.onnx", p, sizeof p), NULL, &net, NULL) == NC_ERR_FORMAT, "no err");
    NC_CHECK(nc_onnx_load(NULL, NULL, &net, NULL) == NC_ERR_ARGUMENT, "NULL path");
}

/* ---- good controls ---- */

/* Imports `name`.onnx, runs `name`_input.pb and compares with _output.pb;
 * the imported net (the caller frees it), or NULL. */
static nc_net *run_control(const char *name, nc_mode mode, double atol)
{
    char p[PATH_MAX], f[128];
    nc_error err = {0};
    nc_net *net = NULL;
    nc_tensor *x = NULL, *want = NULL, *got = NULL;
    snprintf(f, sizeof f, "%s.onnx", name);
    nc_status st = nc_onnx_load(fixture(f, p, sizeof p), NULL, &net, &err);
    NC_CHECK(st == NC_OK, "%s", err.message);
    snprintf(f, sizeof f, "%s_input.pb", name);
    NC_CHECK(nc_onnx_read_tensor_file(fixture(f, p, sizeof p), &x, &err) == NC_OK, "%s", err.message);
    snprintf(f, sizeof f, "%s_output.pb", name);
    NC_CHECK(nc_onnx_read_tensor_file(fixture(f, p, sizeof p), &want, &err) == NC_OK, "%s", err.message);
    nc_engine *e = nc_engine_cpu_new();
    nc_run_options ro = {.mode = mode, .T = 1};
    if (net && x && want && e) {
        st = nc_engine_load(e, net, &err);
        if (st == NC_OK)
            st = nc_engine_forward(e, x, &ro, &got, &err);
        NC_CHECK(st == NC_OK, "engine: %s", err.message);
    }
    if (got && want) {
        NC_CHECK(nc_tensor_numel(got) == nc_tensor_numel(want), "size");
        for (int64_t k = 0; k < nc_tensor_numel(want) && k < nc_tensor_numel(got); k++)
            NC_CHECK_CLOSE(got->data[k], want->data[k], atol, 1e-4, "%s output %lld", name, (long long)k);
    }
    nc_engine_free(e);
    nc_tensor_free(x);
    nc_tensor_free(want);
    nc_tensor_free(got);
    return net;
}

static void test_external_data_ok(void) { nc_net_free(run_control("ok_external", NC_MODE_ANN, 1e-5)); }

static void test_storage_fields_ok(void)
{
    nc_net *net = run_control("ok_fields", NC_MODE_ANN, 1e-5);
    /* the cast double constant is folded into the Gemm's bias */
    int fc = net ? nc_net_find(net, "fc") : -1;
    NC_CHECK(fc >= 0 && net->nodes[fc].bias, "fc has a bias");
    NC_CHECK(net && net->nodes[net->n_nodes - 2].kind == NC_NODE_DENSE, "nothing after the dense layer");
    nc_net_free(net);
}

/* Which folds happen: MatMul+Add → one dense layer with a bias; a BN whose
 * conv output has another reader → an affine node; a dead branch → removed. */
static void test_fold_rules(void)
{
    nc_net *net = run_control("ok_fold", NC_MODE_ANN, 1e-5);
    if (!net)
        return;
    int bn = nc_net_find(net, "bn"), mm = nc_net_find(net, "matmul");
    NC_CHECK(bn >= 0 && net->nodes[bn].kind == NC_NODE_AFFINE, "BN with a shared input is an affine node");
    NC_CHECK(mm >= 0 && net->nodes[mm].kind == NC_NODE_DENSE && net->nodes[mm].bias, "MatMul+Add is a dense+bias");
    NC_CHECK(nc_net_find(net, "bias") < 0 && nc_net_find(net, "dead") < 0, "no node for the Add or the dead branch");
    const nc_report *r = &net->report;
    NC_CHECK(r->count == 8, "every ONNX node reported (%d)", r->count);
    for (int i = 0; i < r->count; i++) {
        if (!strcmp(r->entries[i].source_name, "bias"))
            NC_CHECK(r->entries[i].support == NC_SUPPORT_FOLDED && !strcmp(r->entries[i].target, "matmul"),
                     "bias Add folded into matmul");
        if (!strcmp(r->entries[i].source_name, "dead"))
            NC_CHECK(r->entries[i].support == NC_SUPPORT_REMOVED, "dead branch removed");
    }
    nc_net_free(net);
}

/* Shape → Gather → Unsqueeze → Concat → Reshape and friends fold at import. */
static void test_constant_folding(void)
{
    nc_net *net = run_control("ok_constfold", NC_MODE_ANN, 1e-5);
    if (!net)
        return;
    NC_CHECK(net->n_nodes == 4, "input, flatten, affine, output (got %d nodes)", net->n_nodes);
    NC_CHECK(nc_report_count(&net->report, NC_SUPPORT_FOLDED) == 14, "14 folded nodes (got %d)",
             nc_report_count(&net->report, NC_SUPPORT_FOLDED));
    nc_net_free(net);
}

/* ReduceMean over H, W (opset 18, axes as an input) is a global average pool. */
static void test_reduce_mean_ok(void)
{
    nc_net *net = run_control("ok_reduce", NC_MODE_ANN, 1e-5);
    NC_CHECK(net && nc_net_find(net, "mean") >= 0 && net->nodes[nc_net_find(net, "mean")].kind == NC_NODE_GLOBAL_AVGPOOL,
             "mean is a global average pool");
    nc_net_free(net);
}

/* The PyTorch QCFS chain becomes one QCFS neuron per activation. */
static void test_qcfs_chain(void)
{
    nc_net *net = run_control("ok_qcfs", NC_MODE_QCFS, 1e-4);
    if (!net)
        return;
    int found = 0;
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        if (n->kind != NC_NODE_NEURON)
            continue;
        NC_CHECK(n->neuron.model == NC_NEURON_QCFS, "%s is qcfs", n->name);
        NC_CHECK(n->neuron.shift == 0.5f, "shift");
        if (found == 0)
            NC_CHECK(n->neuron.levels == 8 && n->neuron.n_threshold == 1 && n->neuron.threshold[0] == 2.0f,
                     "first QCFS: L=8, λ=2 (got L=%d, %d thresholds)", n->neuron.levels, n->neuron.n_threshold);
        if (found == 1)
            NC_CHECK(n->neuron.levels == 4 && n->neuron.n_threshold == 3 && n->neuron.threshold[1] == 1.5f,
                     "second QCFS: L=4, λ per channel (got L=%d, %d thresholds)", n->neuron.levels,
                     n->neuron.n_threshold);
        found++;
    }
    NC_CHECK(found == 2, "two QCFS neurons, found %d", found);
    int floors = 0;
    for (int i = 0; i < net->report.count; i++)
        floors += !strcmp(net->report.entries[i].op_type, "Floor") &&
                  net->report.entries[i].support == NC_SUPPORT_FOLDED;
    NC_CHECK(floors == 2, "both Floors folded into the neurons");
    NC_CHECK(nc_report_count(&net->report, NC_SUPPORT_UNSUPPORTED) == 0, "nothing unsupported");
    nc_net_free(net);
}

int main(void)
{
    NC_RUN(test_empty_file);
    NC_RUN(test_random_bytes);
    NC_RUN(test_missing_file);
    NC_RUN(test_not_a_tensor_file);
    NC_RUN(test_truncated);
    NC_RUN(test_external_missing);
    NC_RUN(test_external_escape);
    NC_RUN(test_external_too_short);
    NC_RUN(test_external_symlink);
    NC_RUN(test_memory_budget);
    NC_RUN(test_raw_size_mismatch);
    NC_RUN(test_dangling_input);
    NC_RUN(test_cycle);
    NC_RUN(test_two_data_inputs);
    NC_RUN(test_channel_mismatch);
    NC_RUN(test_binding_shape);
    NC_RUN(test_unsupported_ops);
    NC_RUN(test_softmax_in_the_middle);
    NC_RUN(test_null_error);
    NC_RUN(test_external_data_ok);
    NC_RUN(test_storage_fields_ok);
    NC_RUN(test_fold_rules);
    NC_RUN(test_constant_folding);
    NC_RUN(test_reduce_mean_ok);
    NC_RUN(test_qcfs_chain);
    return nc_test_done();
}
