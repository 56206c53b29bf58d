/* test_onnx_conformance.c — ONNX's own test cases (Debian libonnx-testdata)
 * imported and run on the CPU engine in ANN mode.
 *
 * A case is listed when its model uses only ops the importer handles on the
 * data path (and possibly constant-only helpers), so that every case of a
 * supported op either passes or says `# SKIP <why>`.  Graph inputs 1..k
 * (weights in node tests) are bound as constants from input_k.pb; input_0.pb
 * is the data.  Outputs are compared with |got − want| ≤ 1e-5 + 1e-4·|want|.
 * A Softmax at the output is dropped by the importer (see docs/ONNX.md), so
 * those cases compare the argmax along the softmax axis instead. */
#include "nc_test.h"

#include "../core/nc_onnx.h"
#include "../sim/nc_engine.h"
#include "onnx.pb-c.h"

#include <dirent.h>
#include <sys/stat.h>

#define ATOL 1e-5
#define RTOL 1e-4
#define MAX_INPUTS 8

static const char *const DATA_OPS[] = {"Conv", "Gemm", "MatMul", "Relu", "Clip", "MaxPool", "AveragePool",
                                       "GlobalAveragePool", "ReduceMean", "BatchNormalization", "Flatten", "Reshape", "Add",
                                       "Concat", "Dropout", "Identity", "Softmax", "LogSoftmax", NULL};
static const char *const CONST_OPS[] = {"Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "Cast", "Slice",
                                        "Sub", "Mul", "Div", "ConstantOfShape", "Range", "Transpose", NULL};

static int counts[3]; /* passed, skipped, failed */

static int in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (!strcmp(*list, s))
            return 1;
    return 0;
}

/* What the test needs from model.onnx, read with protobuf-c directly. */
typedef struct case_info {
    int listed;                     /* only supported (+ constant) ops, at least one data op */
    int n_inputs;                   /* graph inputs that are not initializers */
    char inputs[MAX_INPUTS][128];
    int softmax_axis, softmax_coerce; /* softmax_axis ≥ −8 when a (Log)Softmax is present */
    int has_softmax;
} case_info;

static int read_case(const char *model_path, case_info *info)
{
    memset(info, 0, sizeof *info);
    FILE *fp = fopen(model_path, "rb");
    if (!fp)
        return -1;
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = malloc(size > 0 ? (size_t)size : 1);
    size_t got = buf ? fread(buf, 1, (size_t)size, fp) : 0;
    fclose(fp);
    Onnx__ModelProto *m = got == (size_t)size ? onnx__model_proto__unpack(NULL, got, buf) : NULL;
    free(buf);
    if (!m || !m->graph) {
        if (m)
            onnx__model_proto__free_unpacked(m, NULL);
        return -1;
    }
    int opset = 1, data_ops = 0, other = 0;
    for (size_t k = 0; k < m->n_opset_import; k++)
        if (!m->opset_import[k]->domain || !m->opset_import[k]->domain[0])
            opset = (int)m->opset_import[k]->version;
    for (size_t k = 0; k < m->graph->n_node; k++) {
        const Onnx__NodeProto *n = m->graph->node[k];
        const char *op = n->op_type ? n->op_type : "";
        data_ops += in_list(DATA_OPS, op);
        other += !in_list(DATA_OPS, op) && !in_list(CONST_OPS, op);
        if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax")) {
            info->has_softmax = 1;
            info->softmax_coerce = opset < 13;
            info->softmax_axis = opset < 13 ? 1 : -1;
            for (size_t a = 0; a < n->n_attribute; a++)
                if (!strcmp(n->attribute[a]->name, "axis"))
                    info->softmax_axis = (int)n->attribute[a]->i;
        }
    }
    info->listed = data_ops > 0 && !other;
    for (size_t i = 0; i < m->graph->n_input; i++) {
        const char *name = m->graph->input[i]->name ? m->graph->input[i]->name : "";
        int is_init = 0;
        for (size_t k = 0; k < m->graph->n_initializer; k++)
            is_init |= !strcmp(m->graph->initializer[k]->name ? m->graph->initializer[k]->name : "", name);
        if (!is_init && info->n_inputs < MAX_INPUTS)
            snprintf(info->inputs[info->n_inputs++], 128, "%s", name);
    }
    onnx__model_proto__free_unpacked(m, NULL);
    return 0;
}

/* The skip reason of an unsupported import: the first unsupported node's
 * reason, else the message without the file name. */
static void skip_reason(const nc_report *rep, const nc_error *err, const char *path, char *out, size_t size)
{
    for (int i = 0; i < rep->count; i++) {
        if (rep->entries[i].support == NC_SUPPORT_UNSUPPORTED) {
            snprintf(out, size, "%s", rep->entries[i].reason);
            return;
        }
    }
    const char *msg = err->message;
    size_t n = strlen(path);
    if (!strncmp(msg, path, n) && msg[n] == ':')
        msg += n + 2;
    snprintf(out, size, "%s", msg);
}

/* Argmax agreement along the softmax axis: the expected value at the
 * engine's argmax must be the expected maximum (ties allowed). */
static int check_argmax(const float *got, const nc_tensor *want, const case_info *info, char *why, size_t size)
{
    int rank = want->ndim, axis = info->softmax_axis < 0 ? info->softmax_axis + rank : info->softmax_axis;
    int64_t outer = 1, len = 1, inner = 1;
    for (int d = 0; d < rank; d++) {
        if (d < axis)
            outer *= want->shape[d];
        else if (d == axis || info->softmax_coerce)
            len *= want->shape[d];
        else
            inner *= want->shape[d];
    }
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t best = 0, base = o * len * inner + i;
            float max = want->data[base];
            for (int64_t k = 1; k < len; k++) {
                if (got[base + k * inner] > got[base + best * inner])
                    best = k;
                if (want->data[base + k * inner] > max)
                    max = want->data[base + k * inner];
            }
            if (!(want->data[base + best * inner] >= max - 1e-6f * fabsf(max))) {
                snprintf(why, size, "argmax differs in group %lld", (long long)(o * inner + i));
                return 1;
            }
        }
    }
    return 0;
}

static int check_values(const float *got, const nc_tensor *want, char *why, size_t size)
{
    int64_t n = nc_tensor_numel(want), bad = 0, first = -1;
    double max_err = 0;
    for (int64_t k = 0; k < n; k++) {
        double e = fabs((double)got[k] - want->data[k]);
        if (!(e <= ATOL + RTOL * fabs(want->data[k]))) {
            if (first < 0)
                first = k;
            bad++;
        }
        if (e > max_err || e != e)
            max_err = e;
    }
    if (bad)
        snprintf(why, size, "%lld of %lld values differ, first at %lld: %.9g vs %.9g; max error %.3g",
                 (long long)bad, (long long)n, (long long)first, got[first], want->data[first], max_err);
    return bad > 0;
}

/* Per-sample output shape of the net against the expected [N, ...]. */
static int check_shape(const nc_net *net, const nc_tensor *want, char *why, size_t size)
{
    const nc_node *o = &net->nodes[net->output];
    int same = o->ndim == want->ndim - 1;
    for (int d = 0; same && d < o->ndim; d++)
        same = o->shape[d] == want->shape[d + 1];
    if (!same) {
        char a[96], b[96];
        snprintf(why, size, "per-sample output shape %s, expected %s", nc_shape_str(o->ndim, o->shape, a, 96),
                 nc_shape_str(want->ndim - 1, want->shape + 1, b, 96));
    }
    return !same;
}

typedef struct tensors {
    int n;
    nc_tensor *t[MAX_INPUTS];
    nc_tensor *want;
} tensors;

static void tensors_free(tensors *ts)
{
    for (int i = 0; i < ts->n; i++)
        nc_tensor_free(ts->t[i]);
    nc_tensor_free(ts->want);
    memset(ts, 0, sizeof *ts);
}

/* Reads input_<first..last>.pb into ts->t[...] and, when want is set, output_0.pb. */
static int read_tensors(const char *set_dir, int first, int last, int want, tensors *ts, char *why, size_t size)
{
    char path[1024];
    nc_error err = {0};
    for (int i = first; i <= last; i++) {
        snprintf(path, sizeof path, "%s/input_%d.pb", set_dir, i);
        if (nc_onnx_read_tensor_file(path, &ts->t[i], &err) != NC_OK) {
            snprintf(why, size, "%s", err.message);
            return -1;
        }
    }
    snprintf(path, sizeof path, "%s/output_0.pb", set_dir);
    if (want && nc_onnx_read_tensor_file(path, &ts->want, &err) != NC_OK) {
        snprintf(why, size, "%s", err.message);
        return -1;
    }
    return 0;
}

/* Imports with the set's bindings, runs, compares.  Returns 0 pass, 1 fail,
 * 2 skip (why holds the reason). */
static int run_set(const char *model, const char *set_dir, const case_info *info, char *why, size_t size)
{
    tensors ts = {.n = info->n_inputs};
    if (info->n_inputs < 1) {
        snprintf(why, size, "the model has no graph input");
        return 1;
    }
    /* bindings first: the data files of cases the importer refuses (optional
     * or sequence inputs) are not TensorProtos */
    if (read_tensors(set_dir, 1, info->n_inputs - 1, 0, &ts, why, size) != 0) {
        tensors_free(&ts);
        return 1;
    }
    nc_onnx_binding b[MAX_INPUTS];
    for (int i = 1; i < info->n_inputs; i++)
        b[i - 1] = (nc_onnx_binding){info->inputs[i], ts.t[i]};
    nc_onnx_options opts = {info->n_inputs - 1, b, 0};
    nc_net *net = NULL;
    nc_report rep;
    nc_error err = {0};
    nc_status st = nc_onnx_load_with_report(model, &opts, &net, &rep, &err);
    int result = 0, softmax_removed = 0;
    if (st == NC_ERR_UNSUPPORTED) {
        skip_reason(&rep, &err, model, why, size);
        result = 2;
    } else if (st != NC_OK) {
        snprintf(why, size, "import: %s", err.message);
        result = 1;
    }
    for (int i = 0; i < rep.count; i++)
        softmax_removed |= rep.entries[i].support == NC_SUPPORT_REMOVED && strstr(rep.entries[i].op_type, "Softmax");
    nc_report_clear(&rep);
    if (!result && read_tensors(set_dir, 0, 0, 1, &ts, why, size) != 0)
        result = 1;
    nc_engine *e = result ? NULL : nc_engine_cpu_new();
    nc_tensor *out = NULL;
    if (!result && !e) {
        snprintf(why, size, "no CPU engine");
        result = 1;
    }
    nc_run_options ro = {.mode = NC_MODE_ANN, .T = 1};
    if (!result && (nc_engine_load(e, net, &err) != NC_OK || nc_engine_forward(e, ts.t[0], &ro, &out, &err) != NC_OK)) {
        snprintf(why, size, "engine: %s", err.message);
        result = 1;
    }
    if (!result)
        result = check_shape(net, ts.want, why, size);
    if (!result && nc_tensor_numel(out) != nc_tensor_numel(ts.want)) {
        snprintf(why, size, "engine gave %lld values, expected %lld", (long long)nc_tensor_numel(out),
                 (long long)nc_tensor_numel(ts.want));
        result = 1;
    }
    if (!result)
        result = softmax_removed && info->has_softmax ? check_argmax(out->data, ts.want, info, why, size)
                                                      : check_values(out->data, ts.want, why, size);
    nc_tensor_free(out);
    nc_engine_free(e);
    nc_net_free(net);
    tensors_free(&ts);
    return result;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int starts_with(const struct dirent *d, const char *prefix)
{
    return !strncmp(d->d_name, prefix, strlen(prefix));
}

static int is_case(const struct dirent *d) { return starts_with(d, "test_"); }
static int is_set(const struct dirent *d) { return starts_with(d, "test_data_set_"); }

static void run_case(const char *root_name, const char *dir)
{
    char model[1024], name[512], why[1024] = "";
    case_info info;
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    snprintf(name, sizeof name, "%s/%s", root_name, strrchr(dir, '/') + 1);
    if (read_case(model, &info) != 0 || !info.listed)
        return;
    struct dirent **sets;
    int n_sets = scandir(dir, &sets, is_set, alphasort), result = n_sets > 0 ? 0 : 1;
    if (n_sets <= 0)
        snprintf(why, sizeof why, "no test_data_set_* folder");
    for (int s = 0; s < n_sets; s++) {
        char set_dir[1024];
        snprintf(set_dir, sizeof set_dir, "%s/%s", dir, sets[s]->d_name);
        if (!result)
            result = run_set(model, set_dir, &info, why, sizeof why);
        free(sets[s]);
    }
    free(n_sets > 0 ? sets : NULL);
    counts[result == 0 ? 0 : result == 2 ? 1 : 2]++;
    if (result == 1)
        printf("# %s: %s\n", name, why);
    nc_test_report(name, result == 1, result == 2 ? why : NULL);
}

static void run_root(const char *root, const char *root_name)
{
    struct dirent **cases;
    int n = scandir(root, &cases, is_case, alphasort);
    for (int i = 0; i < n; i++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", root, cases[i]->d_name);
        if (is_dir(dir))
            run_case(root_name, dir);
        free(cases[i]);
    }
    if (n >= 0)
        free(cases);
}

int main(void)
{
    const char *base = getenv("NC_ONNX_TESTDATA");
    char node[1024], torch[1024];
    base = base ? base : "/usr/share/libonnx-testdata/data";
    snprintf(node, sizeof node, "%s/node", base);
    snprintf(torch, sizeof torch, "%s/pytorch-converted", base);
    if (!is_dir(node)) {
        nc_test_report("onnx-conformance", 0, "libonnx-testdata is not installed (apt install libonnx-testdata)");
        return nc_test_done();
    }
    run_root(node, "node");
    run_root(torch, "pytorch-converted");
    printf("# conformance: %d passed, %d skipped, %d failed\n", counts[0], counts[1], counts[2]);
    return nc_test_done();
}
