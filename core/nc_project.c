/* nc_project.c — the native project file (layout in nc_project.h). */
#include "nc_project.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_config.h"
#include "nc_h5util.h"
#include "nc_sha256.h"

#define MAX_INPUTS 1024 /* inputs of one node a file may declare */

/* ---- in memory ---------------------------------------------------------------- */

nc_project *nc_project_new(void) { return calloc(1, sizeof(nc_project)); }

void nc_project_free(nc_project *p)
{
    if (!p)
        return;
    nc_net_free(p->net);
    for (int i = 0; i < p->n_stats; i++)
        nc_tensor_free(p->stats[i].data);
    for (int i = 0; i < p->n_meta; i++)
        free(p->meta[i].value);
    free(p->stats);
    free(p->meta);
    free(p->metrics);
    free(p);
}

void nc_project_set_net(nc_project *p, nc_net *net)
{
    if (p->net != net)
        nc_net_free(p->net);
    p->net = net;
}

nc_status nc_project_set_source(nc_project *p, const char *model_path, nc_error *err)
{
    char hex[65];
    if (strlen(model_path) >= sizeof p->source_path)
        return nc_fail(err, NC_ERR_ARGUMENT, "model path too long: '%s'", model_path);
    nc_status st = nc_sha256_file(model_path, hex, err);
    if (st != NC_OK)
        return st;
    snprintf(p->source_path, sizeof p->source_path, "%s", model_path);
    memcpy(p->source_sha256, hex, sizeof hex);
    return NC_OK;
}

static nc_status check_key(const char *key, nc_error *err)
{
    size_t n = key ? strlen(key) : 0;
    if (n == 0 || n >= NC_PROJECT_KEY_MAX)
        return nc_fail(err, NC_ERR_ARGUMENT, "a project key must have 1 to %d bytes", NC_PROJECT_KEY_MAX - 1);
    return NC_OK;
}

/* Grows an array of `size`-byte items to hold one more; 0 ok, -1 OOM. */
static int grow(void **items, int count, size_t size)
{
    void *bigger = realloc(*items, (size_t)(count + 1) * size);
    if (!bigger)
        return -1;
    *items = bigger;
    return 0;
}

nc_status nc_project_set_meta(nc_project *p, const char *key, const char *value, nc_error *err)
{
    nc_status st = check_key(key, err);
    if (st != NC_OK)
        return st;
    char *copy = strdup(value ? value : "");
    if (!copy)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    for (int i = 0; i < p->n_meta; i++) {
        if (strcmp(p->meta[i].key, key) == 0) {
            free(p->meta[i].value);
            p->meta[i].value = copy;
            return NC_OK;
        }
    }
    if (grow((void **)&p->meta, p->n_meta, sizeof *p->meta) != 0) {
        free(copy);
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    }
    snprintf(p->meta[p->n_meta].key, NC_PROJECT_KEY_MAX, "%s", key);
    p->meta[p->n_meta++].value = copy;
    return NC_OK;
}

const char *nc_project_get_meta(const nc_project *p, const char *key)
{
    for (int i = 0; i < p->n_meta; i++)
        if (strcmp(p->meta[i].key, key) == 0)
            return p->meta[i].value;
    return NULL;
}

nc_status nc_project_set_metric(nc_project *p, const char *key, double value, nc_error *err)
{
    nc_status st = check_key(key, err);
    if (st != NC_OK)
        return st;
    for (int i = 0; i < p->n_metrics; i++) {
        if (strcmp(p->metrics[i].key, key) == 0) {
            p->metrics[i].value = value;
            return NC_OK;
        }
    }
    if (grow((void **)&p->metrics, p->n_metrics, sizeof *p->metrics) != 0)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    snprintf(p->metrics[p->n_metrics].key, NC_PROJECT_KEY_MAX, "%s", key);
    p->metrics[p->n_metrics++].value = value;
    return NC_OK;
}

int nc_project_get_metric(const nc_project *p, const char *key, double *value)
{
    for (int i = 0; i < p->n_metrics; i++) {
        if (strcmp(p->metrics[i].key, key) == 0) {
            *value = p->metrics[i].value;
            return 1;
        }
    }
    return 0;
}

static int find_stat(const nc_project *p, const char *node, const char *name)
{
    for (int i = 0; i < p->n_stats; i++)
        if (strcmp(p->stats[i].node, node) == 0 && strcmp(p->stats[i].name, name) == 0)
            return i;
    return -1;
}

/* Takes ownership of t. */
static nc_status put_stat(nc_project *p, const char *node, const char *name, nc_tensor *t, nc_error *err)
{
    int i = find_stat(p, node, name);
    if (i < 0) {
        if (grow((void **)&p->stats, p->n_stats, sizeof *p->stats) != 0) {
            nc_tensor_free(t);
            return nc_fail(err, NC_ERR_MEMORY, "out of memory");
        }
        i = p->n_stats++;
        memset(&p->stats[i], 0, sizeof p->stats[i]);
        snprintf(p->stats[i].node, sizeof p->stats[i].node, "%s", node);
        snprintf(p->stats[i].name, sizeof p->stats[i].name, "%s", name);
    }
    nc_tensor_free(p->stats[i].data);
    p->stats[i].data = t;
    return NC_OK;
}

nc_status nc_project_add_stat(nc_project *p, const char *node, const char *name, int ndim, const int64_t *shape,
                              const float *data, nc_error *err)
{
    nc_status st = check_key(name, err);
    if (st != NC_OK)
        return st;
    if (!node || strlen(node) >= NC_NAME_MAX || ndim < 1 || ndim > 4)
        return nc_fail(err, NC_ERR_ARGUMENT, "statistic '%s': bad node name or 1..4 dimensions expected", name);
    nc_tensor *t = nc_tensor_new(ndim, shape);
    if (!t)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for statistic '%s'", name);
    memcpy(t->data, data, (size_t)nc_tensor_numel(t) * sizeof(float));
    return put_stat(p, node, name, t, err);
}

const nc_named_array *nc_project_get_stat(const nc_project *p, const char *node, const char *name)
{
    int i = find_stat(p, node, name);
    return i < 0 ? NULL : &p->stats[i];
}

/* ---- enum names ------------------------------------------------------------------ */

static const char *reset_name(nc_reset r) { return r == NC_RESET_ZERO ? "zero" : "subtract"; }
static const char *compare_name(nc_compare c) { return c == NC_FIRE_GT ? "gt" : "ge"; }

static int parse_kind(const char *text, nc_node_kind *out)
{
    for (int k = 0; k < NC_NODE_KIND_COUNT; k++)
        if (strcmp(text, nc_node_kind_name((nc_node_kind)k)) == 0)
            return *out = (nc_node_kind)k, 0;
    return -1;
}

static int parse_model(const char *text, nc_neuron_model *out)
{
    static const nc_neuron_model all[] = {NC_NEURON_RELU, NC_NEURON_CLIP, NC_NEURON_QCFS, NC_NEURON_IF};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(text, nc_neuron_model_name(all[i])) == 0)
            return *out = all[i], 0;
    return -1;
}

static int parse_support(const char *text, nc_support *out)
{
    for (int s = NC_SUPPORT_CONVERTED; s <= NC_SUPPORT_UNSUPPORTED; s++)
        if (strcmp(text, nc_support_name((nc_support)s)) == 0)
            return *out = (nc_support)s, 0;
    return -1;
}

/* ---- saving ------------------------------------------------------------------------ */

static nc_status save_window_attrs(const nc_node *nd, hid_t g, nc_error *err)
{
    nc_status st = nc_h5_attr_i32s(g, "kernel", 2, nd->kernel, err);
    if (st == NC_OK) st = nc_h5_attr_i32s(g, "stride", 2, nd->stride, err);
    if (st == NC_OK) st = nc_h5_attr_i32s(g, "pad", 4, nd->pad, err);
    if (st == NC_OK) st = nc_h5_attr_i32s(g, "dilation", 2, nd->dilation, err);
    if (st == NC_OK) st = nc_h5_attr_i64(g, "groups", nd->groups, err);
    if (st == NC_OK) st = nc_h5_attr_i64(g, "count_include_pad", nd->count_include_pad, err);
    if (st == NC_OK) st = nc_h5_attr_i64(g, "ceil_mode", nd->ceil_mode, err);
    if (st == NC_OK) st = nc_h5_attr_string(g, "maxpool_strategy", nc_maxpool_strategy_name(nd->maxpool_strategy), err);
    return st;
}

static nc_status save_neuron(const nc_neuron *nr, hid_t g, nc_error *err)
{
    int64_t n = nr->n_threshold;
    nc_status st = nc_h5_attr_string(g, "model", nc_neuron_model_name(nr->model), err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "clip_min", nr->clip_min, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "clip_max", nr->clip_max, err);
    if (st == NC_OK) st = nc_h5_attr_i64(g, "levels", nr->levels, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "shift", nr->shift, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "v0_fraction", nr->v0_fraction, err);
    if (st == NC_OK) st = nc_h5_attr_string(g, "reset", reset_name(nr->reset), err);
    if (st == NC_OK) st = nc_h5_attr_string(g, "compare", compare_name(nr->compare), err);
    if (st == NC_OK && n > 0) st = nc_h5_write_f32(g, "threshold", 1, &n, nr->threshold, err);
    return st;
}

static nc_status save_node(const nc_node *nd, int index, hid_t nodes, nc_error *err)
{
    char link[32];
    hid_t g;
    if ((unsigned)nd->kind >= NC_NODE_KIND_COUNT || nd->ndim < 0 || nd->ndim > 4)
        return nc_fail(err, NC_ERR_ARGUMENT, "node %d ('%s') has no valid kind or shape", index, nd->name);
    snprintf(link, sizeof link, "%06d", index);
    nc_status st = nc_h5_group_create(nodes, link, &g, err);
    if (st != NC_OK)
        return st;
    st = nc_h5_attr_string(g, "name", nd->name, err);
    if (st == NC_OK) st = nc_h5_attr_string(g, "kind", nc_node_kind_name(nd->kind), err);
    if (st == NC_OK && nd->ndim > 0) st = nc_h5_attr_i64s(g, "shape", nd->ndim, nd->shape, err);
    if (st == NC_OK && nd->n_inputs > 0) st = nc_h5_attr_i32s(g, "inputs", nd->n_inputs, nd->inputs, err);
    if (st == NC_OK) st = save_window_attrs(nd, g, err);
    if (st == NC_OK && nd->weight) st = nc_h5_write_tensor(g, "weight", nd->weight, err);
    if (st == NC_OK && nd->bias) st = nc_h5_write_tensor(g, "bias", nd->bias, err);
    if (st == NC_OK && nd->kind == NC_NODE_NEURON) st = save_neuron(&nd->neuron, g, err);
    nc_h5_close(&g);
    return st;
}

static nc_status save_net(const nc_net *net, hid_t file, nc_error *err)
{
    hid_t g, nodes = H5I_INVALID_HID;
    nc_status st = nc_h5_group_create(file, "net", &g, err);
    if (st != NC_OK)
        return st;
    st = nc_h5_attr_i64(g, "input", net->input, err);
    if (st == NC_OK) st = nc_h5_attr_i64(g, "output", net->output, err);
    if (st == NC_OK) st = nc_h5_attr_i64(g, "n_nodes", net->n_nodes, err);
    if (st == NC_OK) st = nc_h5_attr_string(g, "source_path", net->source_path, err);
    if (st == NC_OK) st = nc_h5_attr_string(g, "source_format", net->source_format, err);
    if (st == NC_OK) st = nc_h5_group_create(g, "nodes", &nodes, err);
    for (int i = 0; st == NC_OK && i < net->n_nodes; i++)
        st = save_node(&net->nodes[i], i, nodes, err);
    nc_h5_close(&nodes);
    nc_h5_close(&g);
    return st;
}

/* One string column of the report: the field at `offset` of each entry. */
static nc_status save_report_column(const nc_report *r, hid_t g, const char *name, size_t offset, nc_error *err)
{
    const char **col = malloc((size_t)(r->count + 1) * sizeof(char *));
    if (!col)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    for (int i = 0; i < r->count; i++)
        col[i] = (const char *)&r->entries[i] + offset;
    nc_status st = nc_h5_write_strings(g, name, r->count, col, err);
    free(col);
    return st;
}

static nc_status save_report(const nc_report *r, hid_t file, nc_error *err)
{
    hid_t g;
    int64_t n = r->count;
    nc_status st = nc_h5_group_create(file, "report", &g, err);
    if (st != NC_OK)
        return st;
    const char **support = malloc((size_t)(n + 1) * sizeof(char *));
    int32_t *opset = malloc((size_t)(n + 1) * sizeof(int32_t));
    if (!support || !opset)
        st = nc_fail(err, NC_ERR_MEMORY, "out of memory");
    for (int i = 0; st == NC_OK && i < r->count; i++) {
        support[i] = nc_support_name(r->entries[i].support);
        opset[i] = r->entries[i].opset;
    }
    if (st == NC_OK) st = save_report_column(r, g, "source_name", offsetof(nc_report_entry, source_name), err);
    if (st == NC_OK) st = save_report_column(r, g, "op_type", offsetof(nc_report_entry, op_type), err);
    if (st == NC_OK) st = save_report_column(r, g, "target", offsetof(nc_report_entry, target), err);
    if (st == NC_OK) st = save_report_column(r, g, "reason", offsetof(nc_report_entry, reason), err);
    if (st == NC_OK) st = nc_h5_write_strings(g, "support", n, support, err);
    if (st == NC_OK) st = nc_h5_write_i32(g, "opset", 1, &n, opset, err);
    free(support);
    free(opset);
    nc_h5_close(&g);
    return st;
}

static nc_status save_preprocess(const nc_project *p, hid_t file, nc_error *err)
{
    hid_t g;
    const nc_preprocess *pp = &p->preprocess;
    if (!p->has_preprocess)
        return NC_OK;
    if (pp->n_mean < 0 || pp->n_mean > NC_MAX_CHANNELS || pp->n_std < 0 || pp->n_std > NC_MAX_CHANNELS)
        return nc_fail(err, NC_ERR_ARGUMENT, "preprocessing has a bad number of mean/std values");
    nc_status st = nc_h5_group_create(file, "preprocess", &g, err);
    if (st == NC_OK) st = nc_h5_attr_f64(g, "scale", pp->scale, err);
    if (st == NC_OK && pp->n_mean > 0) st = nc_h5_attr_f32s(g, "mean", pp->n_mean, pp->mean, err);
    if (st == NC_OK && pp->n_std > 0) st = nc_h5_attr_f32s(g, "std", pp->n_std, pp->std, err);
    nc_h5_close(&g);
    return st;
}

static nc_status save_stats(const nc_project *p, hid_t calib, nc_error *err)
{
    hid_t stats, g = H5I_INVALID_HID;
    char link[32];
    nc_status st = nc_h5_group_create(calib, "stats", &stats, err);
    for (int i = 0; st == NC_OK && i < p->n_stats; i++) {
        snprintf(link, sizeof link, "%06d", i);
        st = nc_h5_group_create(stats, link, &g, err);
        if (st == NC_OK) st = nc_h5_attr_string(g, "node", p->stats[i].node, err);
        if (st == NC_OK) st = nc_h5_attr_string(g, "name", p->stats[i].name, err);
        if (st == NC_OK) st = nc_h5_write_tensor(g, "data", p->stats[i].data, err);
        nc_h5_close(&g);
    }
    nc_h5_close(&stats);
    return st;
}

static nc_status save_calibration(const nc_project *p, hid_t file, nc_error *err)
{
    hid_t g;
    const nc_project_calibration *c = &p->calibration;
    if (!c->set && p->n_stats == 0)
        return NC_OK;
    nc_status st = nc_h5_group_create(file, "calibration", &g, err);
    if (st == NC_OK && c->set) st = nc_h5_attr_string(g, "method", c->method, err);
    if (st == NC_OK && c->set) st = nc_h5_attr_f64(g, "percentile", c->percentile, err);
    if (st == NC_OK && c->set) st = nc_h5_attr_i64(g, "per_channel", c->per_channel, err);
    if (st == NC_OK) st = save_stats(p, g, err);
    nc_h5_close(&g);
    return st;
}

static nc_status save_keyed(const nc_project *p, hid_t file, nc_error *err)
{
    hid_t meta, metrics = H5I_INVALID_HID;
    int n = p->n_meta > p->n_metrics ? p->n_meta : p->n_metrics;
    const char **keys = malloc((size_t)(n + 1) * sizeof(char *));
    const char **values = malloc((size_t)(n + 1) * sizeof(char *));
    double *numbers = malloc((size_t)(n + 1) * sizeof(double));
    int64_t n_meta = p->n_meta, n_metrics = p->n_metrics;
    nc_status st = keys && values && numbers ? nc_h5_group_create(file, "metadata", &meta, err)
                                             : nc_fail(err, NC_ERR_MEMORY, "out of memory");
    for (int i = 0; st == NC_OK && i < p->n_meta; i++)
        keys[i] = p->meta[i].key, values[i] = p->meta[i].value;
    if (st == NC_OK) st = nc_h5_write_strings(meta, "keys", n_meta, keys, err);
    if (st == NC_OK) st = nc_h5_write_strings(meta, "values", n_meta, values, err);
    if (st == NC_OK) st = nc_h5_group_create(file, "metrics", &metrics, err);
    for (int i = 0; st == NC_OK && i < p->n_metrics; i++)
        keys[i] = p->metrics[i].key, numbers[i] = p->metrics[i].value;
    if (st == NC_OK) st = nc_h5_write_strings(metrics, "keys", n_metrics, keys, err);
    if (st == NC_OK) st = nc_h5_write_f64(metrics, "values", 1, &n_metrics, numbers, err);
    if (keys && values && numbers)
        nc_h5_close(&meta);
    nc_h5_close(&metrics);
    free(keys);
    free(values);
    free(numbers);
    return st;
}

static nc_status save_all(const nc_project *p, hid_t file, nc_error *err)
{
    hid_t src;
    nc_status st = nc_h5_attr_string(file, "format", NC_PROJECT_FORMAT, err);
    if (st == NC_OK) st = nc_h5_attr_i64(file, "version", NC_PROJECT_VERSION, err);
    if (st == NC_OK) st = nc_h5_attr_string(file, "created_by", "neurocuda " NC_VERSION, err);
    if (st == NC_OK) st = save_net(p->net, file, err);
    if (st == NC_OK) st = save_report(&p->net->report, file, err);
    if (st == NC_OK) st = save_preprocess(p, file, err);
    if (st == NC_OK) st = save_calibration(p, file, err);
    if (st == NC_OK && (st = nc_h5_group_create(file, "source", &src, err)) == NC_OK) {
        st = nc_h5_attr_string(src, "path", p->source_path, err);
        if (st == NC_OK) st = nc_h5_attr_string(src, "sha256", p->source_sha256, err);
        nc_h5_close(&src);
    }
    if (st == NC_OK) st = save_keyed(p, file, err);
    return st;
}

nc_status nc_project_save(const nc_project *p, const char *path, nc_error *err)
{
    nc_h5_writer w;
    if (!p->net)
        return nc_fail(err, NC_ERR_ARGUMENT, "cannot save project '%s': it has no network", path);
    nc_status st = nc_h5_create(&w, path, err);
    if (st == NC_OK) {
        st = save_all(p, w.file, err);
        st = st == NC_OK ? nc_h5_commit(&w, err) : (nc_h5_discard(&w), st);
    }
    if (st != NC_OK)
        nc_error_prefix(err, "cannot save project '%s'", path);
    return st;
}

/* ---- loading ------------------------------------------------------------------------ */

static nc_status get_int(hid_t obj, const char *name, int lo, int hi, int *out, nc_error *err)
{
    int64_t v;
    nc_status st = nc_h5_attr_get_i64(obj, name, &v, err);
    if (st == NC_OK && (v < lo || v > hi))
        st = nc_fail(err, NC_ERR_FORMAT, "attribute '%s' = %lld is out of range [%d, %d]", name, (long long)v, lo, hi);
    if (st == NC_OK)
        *out = (int)v;
    return st;
}

static nc_status get_float(hid_t obj, const char *name, float *out, nc_error *err)
{
    double v;
    nc_status st = nc_h5_attr_get_f64(obj, name, &v, err);
    if (st == NC_OK)
        *out = (float)v;
    return st;
}

/* An i32 array attribute of exactly n values. */
static nc_status get_ints(hid_t obj, const char *name, int n, int *out, nc_error *err)
{
    int got = 0;
    nc_status st = nc_h5_attr_get_i32s(obj, name, n, &got, out, err);
    if (st == NC_OK && got != n)
        st = nc_fail(err, NC_ERR_FORMAT, "attribute '%s' has %d values, %d expected", name, got, n);
    return st;
}

static nc_status load_window(hid_t g, nc_node *nd, nc_error *err)
{
    char text[64];
    nc_status st = get_ints(g, "kernel", 2, nd->kernel, err);
    if (st == NC_OK) st = get_ints(g, "stride", 2, nd->stride, err);
    if (st == NC_OK) st = get_ints(g, "pad", 4, nd->pad, err);
    if (st == NC_OK) st = get_ints(g, "dilation", 2, nd->dilation, err);
    if (st == NC_OK) st = get_int(g, "groups", 0, INT_MAX, &nd->groups, err);
    if (st == NC_OK) st = get_int(g, "count_include_pad", 0, 1, &nd->count_include_pad, err);
    if (st == NC_OK) st = get_int(g, "ceil_mode", 0, 1, &nd->ceil_mode, err);
    if (st == NC_OK) st = nc_h5_attr_get_string(g, "maxpool_strategy", text, sizeof text, err);
    if (st == NC_OK && nc_maxpool_strategy_parse(text, &nd->maxpool_strategy) != 0)
        st = nc_fail(err, NC_ERR_FORMAT, "unknown maxpool strategy '%s'", text);
    return st;
}

static nc_status load_threshold(hid_t g, nc_neuron *nr, nc_error *err)
{
    float *data;
    int ndim;
    int64_t shape[1];
    if (!nc_h5_exists(g, "threshold"))
        return NC_OK;
    nc_status st = nc_h5_read_f32(g, "threshold", 1, &ndim, shape, &data, err);
    if (st != NC_OK)
        return st;
    if (ndim != 1 || shape[0] < 1 || shape[0] > INT_MAX)
        st = nc_fail(err, NC_ERR_FORMAT, "dataset 'threshold' must hold 1 or more values");
    else
        st = nc_neuron_set_threshold(nr, (int)shape[0], data, err);
    free(data);
    return st;
}

static nc_status load_neuron(hid_t g, nc_neuron *nr, nc_error *err)
{
    char text[64];
    nc_status st = nc_h5_attr_get_string(g, "model", text, sizeof text, err);
    if (st == NC_OK && parse_model(text, &nr->model) != 0)
        st = nc_fail(err, NC_ERR_FORMAT, "unknown neuron model '%s'", text);
    if (st == NC_OK) st = get_float(g, "clip_min", &nr->clip_min, err);
    if (st == NC_OK) st = get_float(g, "clip_max", &nr->clip_max, err);
    if (st == NC_OK) st = get_int(g, "levels", 0, INT_MAX, &nr->levels, err);
    if (st == NC_OK) st = get_float(g, "shift", &nr->shift, err);
    if (st == NC_OK) st = get_float(g, "v0_fraction", &nr->v0_fraction, err);
    if (st == NC_OK) st = nc_h5_attr_get_string(g, "reset", text, sizeof text, err);
    if (st == NC_OK && strcmp(text, "subtract") != 0 && strcmp(text, "zero") != 0)
        st = nc_fail(err, NC_ERR_FORMAT, "unknown reset '%s'", text);
    if (st == NC_OK) nr->reset = strcmp(text, "zero") == 0 ? NC_RESET_ZERO : NC_RESET_SUBTRACT;
    if (st == NC_OK) st = nc_h5_attr_get_string(g, "compare", text, sizeof text, err);
    if (st == NC_OK && strcmp(text, "ge") != 0 && strcmp(text, "gt") != 0)
        st = nc_fail(err, NC_ERR_FORMAT, "unknown comparison '%s'", text);
    if (st == NC_OK) nr->compare = strcmp(text, "gt") == 0 ? NC_FIRE_GT : NC_FIRE_GE;
    if (st == NC_OK) st = load_threshold(g, nr, err);
    return st;
}

static nc_status load_shape(hid_t g, nc_node *nd, nc_error *err)
{
    int n = 0;
    if (!nc_h5_attr_exists(g, "shape"))
        return NC_OK;
    nc_status st = nc_h5_attr_get_i64s(g, "shape", 4, &n, nd->shape, err);
    for (int i = 0; st == NC_OK && i < n; i++)
        if (nd->shape[i] < 0)
            st = nc_fail(err, NC_ERR_FORMAT, "attribute 'shape' has a negative dimension");
    nd->ndim = st == NC_OK ? n : 0;
    return st;
}

/* Reads the kind, name and inputs, and appends the node to the net. */
static nc_status add_node(hid_t g, nc_net *net, int index, nc_error *err)
{
    char name[NC_NAME_MAX], kind_text[64];
    int inputs[MAX_INPUTS], n_inputs = 0;
    nc_node_kind kind = NC_NODE_KIND_COUNT;
    nc_status st = nc_h5_attr_get_string(g, "name", name, sizeof name, err);
    if (st == NC_OK) st = nc_h5_attr_get_string(g, "kind", kind_text, sizeof kind_text, err);
    if (st == NC_OK && parse_kind(kind_text, &kind) != 0)
        st = nc_fail(err, NC_ERR_FORMAT, "unknown node kind '%s'", kind_text);
    if (st == NC_OK && nc_h5_attr_exists(g, "inputs"))
        st = nc_h5_attr_get_i32s(g, "inputs", MAX_INPUTS, &n_inputs, inputs, err);
    for (int i = 0; st == NC_OK && i < n_inputs; i++)
        if (inputs[i] < 0 || inputs[i] >= index)
            st = nc_fail(err, NC_ERR_FORMAT, "input %d is not an earlier node", inputs[i]);
    if (st == NC_OK && (kind == NC_NODE_INPUT) != (n_inputs == 0))
        st = nc_fail(err, NC_ERR_FORMAT, "%s", n_inputs ? "an input node has inputs" : "the node has no inputs");
    if (st == NC_OK && nc_net_add_node(net, kind, name, n_inputs, inputs) != index)
        st = nc_fail(err, NC_ERR_MEMORY, "out of memory");
    return st;
}

static nc_status load_node(hid_t nodes, nc_net *net, int index, nc_error *err)
{
    char link[32];
    hid_t g;
    snprintf(link, sizeof link, "%06d", index);
    nc_status st = nc_h5_group_open(nodes, link, &g, err);
    if (st == NC_OK) st = add_node(g, net, index, err);
    nc_node *nd = st == NC_OK ? &net->nodes[index] : NULL;
    if (st == NC_OK) st = load_shape(g, nd, err);
    if (st == NC_OK) st = load_window(g, nd, err);
    if (st == NC_OK && nc_h5_exists(g, "weight")) st = nc_h5_read_tensor(g, "weight", &nd->weight, err);
    if (st == NC_OK && nc_h5_exists(g, "bias")) st = nc_h5_read_tensor(g, "bias", &nd->bias, err);
    if (st == NC_OK && nd->kind == NC_NODE_NEURON) st = load_neuron(g, &nd->neuron, err);
    nc_h5_close(&g);
    if (st != NC_OK)
        nc_error_prefix(err, "node %s%s%s%s", link, nd ? " ('" : "", nd ? nd->name : "", nd ? "')" : "");
    return st;
}

/* Stored shapes must be what the graph gives (when stored). */
static nc_status check_shapes(nc_net *net, const nc_node *stored, nc_error *err)
{
    nc_status st = nc_net_infer_shapes(net, err);
    if (st != NC_OK) /* a graph that does not fit together is a damaged file */
        return err ? (err->code = NC_ERR_FORMAT) : NC_ERR_FORMAT;
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *a = &stored[i], *b = &net->nodes[i];
        if (a->ndim == 0)
            continue;
        if (a->ndim != b->ndim || memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)) != 0) {
            char x[96], y[96];
            return nc_fail(err, NC_ERR_FORMAT, "node '%s': stored shape %s but the graph gives %s", b->name,
                           nc_shape_str(a->ndim, a->shape, x, sizeof x), nc_shape_str(b->ndim, b->shape, y, sizeof y));
        }
    }
    return NC_OK;
}

static nc_status load_nodes(hid_t g, nc_net *net, int n_nodes, nc_error *err)
{
    hid_t nodes;
    nc_status st = nc_h5_group_open(g, "nodes", &nodes, err);
    for (int i = 0; st == NC_OK && i < n_nodes; i++)
        st = load_node(nodes, net, i, err);
    nc_h5_close(&nodes);
    if (st != NC_OK)
        return st;
    /* Keep the stored shapes to compare with the inferred ones. */
    nc_node *stored = malloc((size_t)n_nodes * sizeof(nc_node));
    if (!stored)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    memcpy(stored, net->nodes, (size_t)n_nodes * sizeof(nc_node));
    st = check_shapes(net, stored, err);
    free(stored);
    return st;
}

static nc_status load_net(hid_t file, nc_net **out, nc_error *err)
{
    hid_t g;
    int n_nodes, input, output;
    nc_net *net = nc_net_new();
    nc_status st = net ? nc_h5_group_open(file, "net", &g, err) : nc_fail(err, NC_ERR_MEMORY, "out of memory");
    if (st != NC_OK) {
        nc_net_free(net);
        return st;
    }
    st = get_int(g, "n_nodes", 2, 1 << 24, &n_nodes, err);
    if (st == NC_OK) st = get_int(g, "input", 0, n_nodes - 1, &input, err);
    if (st == NC_OK) st = get_int(g, "output", 0, n_nodes - 1, &output, err);
    if (st == NC_OK) st = nc_h5_attr_get_string(g, "source_path", net->source_path, sizeof net->source_path, err);
    if (st == NC_OK) st = nc_h5_attr_get_string(g, "source_format", net->source_format, sizeof net->source_format, err);
    if (st == NC_OK) st = load_nodes(g, net, n_nodes, err);
    if (st == NC_OK && (net->input != input || net->output != output))
        st = nc_fail(err, NC_ERR_FORMAT, "the stored input/output indices do not match the nodes");
    nc_h5_close(&g);
    if (st != NC_OK)
        nc_net_free(net);
    else
        *out = net;
    return st;
}

/* Copies a column string into a fixed field; too long is a format error. */
static nc_status copy_field(char *dst, size_t size, const char *src, const char *what, nc_error *err)
{
    if (strlen(src) >= size)
        return nc_fail(err, NC_ERR_FORMAT, "a %s is longer than %zu bytes", what, size - 1);
    memcpy(dst, src, strlen(src) + 1);
    return NC_OK;
}

typedef struct report_columns {
    int64_t n[5];
    char **text[5]; /* source_name, op_type, target, reason, support */
    int32_t *opset;
} report_columns;

static nc_status fill_report(nc_report *r, const report_columns *c, nc_error *err)
{
    nc_status st = NC_OK;
    for (int64_t i = 0; st == NC_OK && i < c->n[0]; i++) {
        nc_support support;
        if (parse_support(c->text[4][i], &support) != 0)
            return nc_fail(err, NC_ERR_FORMAT, "report entry %lld: unknown support '%s'", (long long)i, c->text[4][i]);
        nc_report_entry *e = nc_report_add(r, "", "", c->opset[i], support, "", "%s", "");
        if (!e)
            return nc_fail(err, NC_ERR_MEMORY, "out of memory");
        st = copy_field(e->source_name, sizeof e->source_name, c->text[0][i], "report source name", err);
        if (st == NC_OK) st = copy_field(e->op_type, sizeof e->op_type, c->text[1][i], "report op type", err);
        if (st == NC_OK) st = copy_field(e->target, sizeof e->target, c->text[2][i], "report target", err);
        if (st == NC_OK) st = copy_field(e->reason, sizeof e->reason, c->text[3][i], "report reason", err);
    }
    return st;
}

static nc_status load_report(hid_t file, nc_report *r, nc_error *err)
{
    static const char *const names[5] = {"source_name", "op_type", "target", "reason", "support"};
    report_columns c = {{0}, {0}, NULL};
    int64_t n_opset = 0, shape[1];
    int ndim;
    hid_t g;
    nc_status st = nc_h5_group_open(file, "report", &g, err);
    for (int k = 0; st == NC_OK && k < 5; k++)
        st = nc_h5_read_strings(g, names[k], &c.n[k], &c.text[k], err);
    if (st == NC_OK) st = nc_h5_read_i32(g, "opset", 1, &ndim, shape, &c.opset, err);
    if (st == NC_OK) n_opset = ndim == 1 ? shape[0] : -1;
    for (int k = 1; st == NC_OK && k < 5; k++)
        if (c.n[k] != c.n[0] || n_opset != c.n[0])
            st = nc_fail(err, NC_ERR_FORMAT, "the report columns differ in length");
    if (st == NC_OK) st = fill_report(r, &c, err);
    for (int k = 0; k < 5; k++)
        nc_h5_free_strings(c.n[k], c.text[k]);
    free(c.opset);
    nc_h5_close(&g);
    if (st != NC_OK)
        nc_error_prefix(err, "report");
    return st;
}

static nc_status load_preprocess(hid_t file, nc_project *p, nc_error *err)
{
    hid_t g;
    double scale;
    nc_preprocess *pp = &p->preprocess;
    if (!nc_h5_exists(file, "preprocess"))
        return NC_OK;
    nc_status st = nc_h5_group_open(file, "preprocess", &g, err);
    if (st == NC_OK) st = nc_h5_attr_get_f64(g, "scale", &scale, err);
    if (st == NC_OK) pp->scale = (float)scale;
    if (st == NC_OK && nc_h5_attr_exists(g, "mean"))
        st = nc_h5_attr_get_f32s(g, "mean", NC_MAX_CHANNELS, &pp->n_mean, pp->mean, err);
    if (st == NC_OK && nc_h5_attr_exists(g, "std"))
        st = nc_h5_attr_get_f32s(g, "std", NC_MAX_CHANNELS, &pp->n_std, pp->std, err);
    p->has_preprocess = st == NC_OK;
    nc_h5_close(&g);
    return st;
}

static nc_status load_stat(hid_t stats, int i, nc_project *p, nc_error *err)
{
    char link[32], node[NC_NAME_MAX], name[NC_PROJECT_KEY_MAX];
    hid_t g;
    nc_tensor *t = NULL;
    snprintf(link, sizeof link, "%06d", i);
    nc_status st = nc_h5_group_open(stats, link, &g, err);
    if (st == NC_OK) st = nc_h5_attr_get_string(g, "node", node, sizeof node, err);
    if (st == NC_OK) st = nc_h5_attr_get_string(g, "name", name, sizeof name, err);
    if (st == NC_OK) st = nc_h5_read_tensor(g, "data", &t, err);
    if (st == NC_OK) st = put_stat(p, node, name, t, err);
    nc_h5_close(&g);
    if (st != NC_OK)
        nc_error_prefix(err, "calibration statistic %s", link);
    return st;
}

static nc_status load_calibration(hid_t file, nc_project *p, nc_error *err)
{
    hid_t g, stats = H5I_INVALID_HID;
    int64_t count = 0;
    nc_project_calibration *c = &p->calibration;
    if (!nc_h5_exists(file, "calibration"))
        return NC_OK;
    nc_status st = nc_h5_group_open(file, "calibration", &g, err);
    if (st == NC_OK && nc_h5_attr_exists(g, "method")) {
        st = nc_h5_attr_get_string(g, "method", c->method, sizeof c->method, err);
        if (st == NC_OK) st = nc_h5_attr_get_f64(g, "percentile", &c->percentile, err);
        if (st == NC_OK) st = get_int(g, "per_channel", 0, 1, &c->per_channel, err);
        c->set = st == NC_OK;
    }
    if (st == NC_OK) st = nc_h5_group_open(g, "stats", &stats, err);
    if (st == NC_OK) st = nc_h5_group_size(stats, &count, err);
    for (int i = 0; st == NC_OK && i < count; i++)
        st = load_stat(stats, i, p, err);
    nc_h5_close(&stats);
    nc_h5_close(&g);
    return st;
}

static nc_status load_source(hid_t file, nc_project *p, nc_error *err)
{
    hid_t g;
    nc_status st = nc_h5_group_open(file, "source", &g, err);
    if (st == NC_OK) st = nc_h5_attr_get_string(g, "path", p->source_path, sizeof p->source_path, err);
    if (st == NC_OK) st = nc_h5_attr_get_string(g, "sha256", p->source_sha256, sizeof p->source_sha256, err);
    size_t n = strlen(p->source_sha256);
    if (st == NC_OK && n != 0 && (n != 64 || strspn(p->source_sha256, "0123456789abcdef") != 64))
        st = nc_fail(err, NC_ERR_FORMAT, "source attribute 'sha256' is not 64 hex digits");
    nc_h5_close(&g);
    return st;
}

static nc_status load_metadata(hid_t file, nc_project *p, nc_error *err)
{
    hid_t g;
    int64_t nk = 0, nv = 0;
    char **keys = NULL, **values = NULL;
    nc_status st = nc_h5_group_open(file, "metadata", &g, err);
    if (st == NC_OK) st = nc_h5_read_strings(g, "keys", &nk, &keys, err);
    if (st == NC_OK) st = nc_h5_read_strings(g, "values", &nv, &values, err);
    if (st == NC_OK && nk != nv)
        st = nc_fail(err, NC_ERR_FORMAT, "metadata: %lld keys but %lld values", (long long)nk, (long long)nv);
    for (int64_t i = 0; st == NC_OK && i < nk; i++)
        if (nc_project_set_meta(p, keys[i], values[i], err) != NC_OK)
            st = err ? (err->code = NC_ERR_FORMAT) : NC_ERR_FORMAT;
    nc_h5_free_strings(nk, keys);
    nc_h5_free_strings(nv, values);
    nc_h5_close(&g);
    return st;
}

static nc_status load_metrics(hid_t file, nc_project *p, nc_error *err)
{
    hid_t g;
    int64_t nk = 0, shape[1] = {0};
    int ndim = 0;
    char **keys = NULL;
    double *values = NULL;
    nc_status st = nc_h5_group_open(file, "metrics", &g, err);
    if (st == NC_OK) st = nc_h5_read_strings(g, "keys", &nk, &keys, err);
    if (st == NC_OK) st = nc_h5_read_f64(g, "values", 1, &ndim, shape, &values, err);
    if (st == NC_OK && (ndim != 1 || shape[0] != nk))
        st = nc_fail(err, NC_ERR_FORMAT, "metrics: %lld keys but not as many values", (long long)nk);
    for (int64_t i = 0; st == NC_OK && i < nk; i++)
        if (nc_project_set_metric(p, keys[i], values[i], err) != NC_OK)
            st = err ? (err->code = NC_ERR_FORMAT) : NC_ERR_FORMAT;
    nc_h5_free_strings(nk, keys);
    free(values);
    nc_h5_close(&g);
    return st;
}

static nc_status check_header(hid_t file, nc_error *err)
{
    char format[64];
    int64_t version;
    nc_status st = nc_h5_attr_get_string(file, "format", format, sizeof format, err);
    if (st != NC_OK || strcmp(format, NC_PROJECT_FORMAT) != 0)
        return nc_fail(err, NC_ERR_FORMAT, "not a NeuroCUDA project (root attribute format = \"%s\" missing)",
                       NC_PROJECT_FORMAT);
    st = nc_h5_attr_get_i64(file, "version", &version, err);
    if (st != NC_OK)
        return st;
    if (version > NC_PROJECT_VERSION)
        return nc_fail(err, NC_ERR_UNSUPPORTED, "project version %lld is newer than this program reads (%d): update NeuroCUDA",
                       (long long)version, NC_PROJECT_VERSION);
    if (version < 1)
        return nc_fail(err, NC_ERR_FORMAT, "bad project version %lld", (long long)version);
    return NC_OK;
}

static nc_status load_all(hid_t file, void *project, nc_error *err)
{
    nc_project *p = project;
    nc_status st = check_header(file, err);
    if (st == NC_OK) st = load_net(file, &p->net, err);
    if (st == NC_OK) st = load_report(file, &p->net->report, err);
    if (st == NC_OK) st = load_preprocess(file, p, err);
    if (st == NC_OK) st = load_calibration(file, p, err);
    if (st == NC_OK) st = load_source(file, p, err);
    if (st == NC_OK) st = load_metadata(file, p, err);
    if (st == NC_OK) st = load_metrics(file, p, err);
    return st;
}

nc_status nc_project_load(const char *path, nc_project **out, nc_error *err)
{
    *out = NULL;
    nc_project *p = nc_project_new();
    nc_status st = p ? nc_h5_load(path, load_all, p, "project", err) : nc_fail(err, NC_ERR_MEMORY, "out of memory");
    if (st != NC_OK) {
        nc_project_free(p);
        return st;
    }
    *out = p;
    return NC_OK;
}
