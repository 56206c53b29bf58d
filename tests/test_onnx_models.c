/* test_onnx_models.c — real PyTorch exports, end to end: every model in
 * tests/fixtures/models is imported with nc_onnx_load, run by the CPU engine
 * in ANN mode on <name>.input.npy, and compared with PyTorch's logits in
 * <name>.logits.npy (|a − b| ≤ 1e-4 + 1e-4·|b|).
 *
 * Fixtures come from tools/train_models.py (TorchScript exporter, opset 13):
 * <name>.onnx next to the reference pair, or assets/models/<name>.onnx for the
 * bundled model.  tools/export_onnx.py --exporter dynamo (PyTorch ≥ 2.5) adds
 * <name>_dynamo.onnx + <name>_dynamo.onnx.data; without them that case is a
 * SKIP, since the same weights must then come through the dynamo path. */
#include "nc_test.h"
#include "nc_test_util.h"

#include "nc_dataset.h"
#include "nc_engine.h"
#include "nc_onnx.h"

#include <dirent.h>
#include <sys/stat.h>

#define ATOL 1e-4
#define RTOL 1e-4
#define MAX_MODELS 64
#define DYNAMO_SKIP "dynamo export not generated (needs PyTorch ≥ 2 — run tools/export_onnx.py --exporter dynamo)"

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The stems of every <stem>.input.npy in dir, sorted; returns the count. */
static int list_models(const char *dir, char **names, int max)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    const char *suffix = ".input.npy";
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        size_t len = strlen(e->d_name), sl = strlen(suffix);
        if (len > sl && strcmp(e->d_name + len - sl, suffix) == 0)
            names[n++] = strndup(e->d_name, len - sl);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, compare_names);
    return n;
}

/* Compares logits elementwise; prints the first mismatches and the max error. */
static int compare_logits(const char *label, const nc_tensor *got, const nc_tensor *want)
{
    char a[64], b[64];
    if (got->ndim != want->ndim || nc_tensor_numel(got) != nc_tensor_numel(want)) {
        printf("# %s: output shape %s, expected %s\n", label, nc_shape_str(got->ndim, got->shape, a, sizeof a),
               nc_shape_str(want->ndim, want->shape, b, sizeof b));
        return 1;
    }
    int64_t n = nc_tensor_numel(want), bad = 0;
    int64_t classes = want->ndim == 2 ? want->shape[1] : n;
    double max_err = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = got->data[i], w = want->data[i], e = fabs(g - w);
        max_err = e > max_err || e != e ? e : max_err;
        if (!(e <= ATOL + RTOL * fabs(w)) && bad++ < 5)
            printf("# %s: sample %lld class %lld: got %.7g, PyTorch %.7g\n", label, (long long)(i / classes),
                   (long long)(i % classes), g, w);
    }
    printf("# %s: max |error| %.3g over %lld logits, %lld beyond %.0e + %.0e·|ref|\n", label, max_err, (long long)n,
           (long long)bad, ATOL, RTOL);
    return bad != 0;
}

/* Import, load into the CPU engine, run in ANN mode, compare. */
static int run_model(const char *label, const char *onnx, const nc_tensor *input, const nc_tensor *want)
{
    nc_net *net = NULL;
    nc_engine *engine = NULL;
    nc_tensor *out = NULL;
    nc_error err = {0};
    nc_run_options opts = {.mode = NC_MODE_ANN, .T = 1};
    nc_status st = nc_onnx_load(onnx, NULL, &net, &err);
    if (!st) {
        engine = nc_engine_cpu_new();
        st = engine ? nc_engine_load(engine, net, &err) : nc_fail(&err, NC_ERR_MEMORY, "nc_engine_cpu_new failed");
    }
    if (!st)
        st = nc_engine_forward(engine, input, &opts, &out, &err);
    int failed = st != NC_OK;
    if (failed)
        printf("# %s: %s: %s\n", label, nc_status_name(st), err.message);
    else
        failed = compare_logits(label, out, want);
    nc_tensor_free(out);
    nc_engine_free(engine);
    nc_net_free(net);
    return failed;
}

static nc_tensor *read_reference(const char *dir, const char *name, const char *kind)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s.npy", dir, name, kind);
    return read_npy(path);
}

/* <dir>/<name>.onnx, or assets/models/<name>.onnx for the bundled model. */
static void torchscript_path(const char *dir, const char *name, char *out, size_t size)
{
    snprintf(out, size, "%s/%s.onnx", dir, name);
    if (exists(out))
        return;
    char assets[1024];
    nc_test_path("assets/models", assets, sizeof assets);
    snprintf(out, size, "%s/%s.onnx", assets, name);
}

/* One model: its TorchScript export and, when generated, its dynamo export. */
static void test_model(const char *dir, const char *name)
{
    char onnx[1200], label[256];
    nc_tensor *input = read_reference(dir, name, "input");
    nc_tensor *want = read_reference(dir, name, "logits");
    int have_refs = input && want;

    torchscript_path(dir, name, onnx, sizeof onnx);
    snprintf(label, sizeof label, "%s (torchscript)", name);
    if (!exists(onnx))
        printf("# %s: no %s.onnx in %s or assets/models\n", label, name, dir);
    nc_test_report(label, !have_refs || !exists(onnx) || run_model(label, onnx, input, want), NULL);

    snprintf(onnx, sizeof onnx, "%s/%s_dynamo.onnx", dir, name);
    snprintf(label, sizeof label, "%s (dynamo)", name);
    if (!exists(onnx))
        nc_test_report(label, 0, DYNAMO_SKIP);
    else
        nc_test_report(label, !have_refs || run_model(label, onnx, input, want), NULL);
    nc_tensor_free(input);
    nc_tensor_free(want);
}

int main(void)
{
    char dir[1024];
    char *names[MAX_MODELS];
    nc_test_path("tests/fixtures/models", dir, sizeof dir);
    int n = list_models(dir, names, MAX_MODELS);
    if (n == 0) {
        printf("# no <name>.input.npy in %s; run /usr/bin/python3 tools/train_models.py\n", dir);
        nc_test_report("fixture models present", 1, NULL);
    }
    for (int i = 0; i < n; i++) {
        test_model(dir, names[i]);
        free(names[i]);
    }
    return nc_test_done();
}
