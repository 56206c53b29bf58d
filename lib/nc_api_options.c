/* nc_api_options.c — job settings as KEY = VALUE text (neurocuda.h), with
 * the names, ranges and defaults of the `neurocuda convert` flags, so that a
 * job described through the library and through the CLI is the same job. */
#include "nc_api_private.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

neurocuda_options *neurocuda_options_new(void)
{
    neurocuda_options *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    snprintf(o->data, sizeof o->data, "fashion-mnist");
    snprintf(o->engine, sizeof o->engine, "cpu");
    o->pipeline = nc_pipeline_options_default();
    o->seed = 1;
    return o;
}

void neurocuda_options_free(neurocuda_options *o) { free(o); }

/* ---- value parsers: 0 ok, -1 bad (the caller writes the message) ---- */

static int parse_long(const char *text, long min, long max, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *text, double min, double max, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *text, int *out)
{
    if (!strcmp(text, "1") || !strcmp(text, "true") || !strcmp(text, "yes")) {
        *out = 1;
        return 0;
    }
    if (!strcmp(text, "0") || !strcmp(text, "false") || !strcmp(text, "no")) {
        *out = 0;
        return 0;
    }
    return -1;
}

static int parse_positive_list(const char *text, float *values, int *count, int positive)
{
    int n = nc_parse_float_list(text, values, NC_MAX_CHANNELS);
    if (n < 1)
        return -1;
    for (int i = 0; positive && i < n; i++)
        if (!(values[i] > 0))
            return -1;
    *count = n;
    return 0;
}

/* ---- the keys ---- */

/* Integer keys: where the value goes, and its range. */
typedef struct int_key {
    const char *key;
    long min, max;
    size_t offset;        /* of an int field in neurocuda_options           */
    int is_int64;         /* the field is int64_t                            */
} int_key;

#define FIELD(f) offsetof(neurocuda_options, f)
static const int_key int_keys[] = {
    {"limit", 1, 1L << 40, FIELD(limit), 1},
    {"threads", 0, 4096, FIELD(threads), 0},
    {"L", 1, 4096, FIELD(pipeline.levels), 0},
    {"T", 1, 100000, FIELD(pipeline.target_T), 0},
    {"calib-images", 1, 1L << 30, FIELD(pipeline.calib_images), 1},
    {"finetune-qcfs", 0, 10000, FIELD(pipeline.finetune_qcfs_epochs), 0},
    {"finetune-bptt", 0, 10000, FIELD(pipeline.finetune_bptt_epochs), 0},
    {"train-T", 1, 4096, FIELD(pipeline.train.T), 0},
    {"batch", 1, 1 << 16, FIELD(pipeline.train.batch_size), 0},
    {"train-images", 1, 1L << 30, FIELD(pipeline.train.train_count), 1},
    {"val-images", 0, 1L << 30, FIELD(pipeline.train.val_count), 1},
    {"eval-T", 1, 4096, FIELD(eval_T), 0},
    {"sim-T", 1, 4096, FIELD(sim_T), 0},
    {"target-T", 1, 4096, FIELD(target_T), 0},
    {"calibrate-bias", 1, 4096, FIELD(pipeline.calibrate_bias_T), 0},
    {"bias-images", 1, 1L << 30, FIELD(pipeline.bias_calib_images), 1},
};

static int set_int(neurocuda_options *o, const int_key *k, const char *value, neurocuda_error *err)
{
    long v;
    if (parse_long(value, k->min, k->max, &v) != 0)
        return nc_api_fail(err, NC_ERR_ARGUMENT, "option %s needs a whole number from %ld to %ld, got '%s'", k->key,
                           k->min, k->max, value);
    char *field = (char *)o + k->offset;
    if (k->is_int64)
        *(int64_t *)field = v;
    else
        *(int *)field = (int)v;
    if (!strcmp(k->key, "val-images"))
        o->val_images_set = 1;
    return NEUROCUDA_OK;
}

static int bad(neurocuda_error *err, const char *key, const char *allowed, const char *value)
{
    return nc_api_fail(err, NC_ERR_ARGUMENT, "option %s must be %s, got '%s'", key, allowed, value);
}

/* Keys whose values are names, lists or flags. */
static int set_text(neurocuda_options *o, const char *key, const char *value, neurocuda_error *err)
{
    nc_pipeline_options *p = &o->pipeline;
    nc_train_options *t = &p->train;
    double d;
    int b;
    nc_error e = {0};
    if (!strcmp(key, "data")) {
        if (strlen(value) >= sizeof o->data)
            return bad(err, key, "a shorter path", value);
        snprintf(o->data, sizeof o->data, "%s", value);
    } else if (!strcmp(key, "output")) {
        if (strlen(value) >= sizeof o->output)
            return bad(err, key, "a shorter path", value);
        snprintf(o->output, sizeof o->output, "%s", value);
    } else if (!strcmp(key, "mean")) {
        if (parse_positive_list(value, o->pp.mean, &o->pp.n_mean, 0) != 0)
            return bad(err, key, "numbers separated by commas (at most 16)", value);
    } else if (!strcmp(key, "std")) {
        if (parse_positive_list(value, o->pp.std, &o->pp.n_std, 1) != 0)
            return bad(err, key, "positive numbers separated by commas (at most 16)", value);
    } else if (!strcmp(key, "scale")) {
        if (parse_double(value, 1e-30, 1e30, &d) != 0)
            return bad(err, key, "a positive number", value);
        o->pp.scale = (float)d;
    } else if (!strcmp(key, "engine")) {
        if (!nc_engine_find(value))
            return bad(err, key, "the name of an engine (cpu, gpu, loihi)", value);
        snprintf(o->engine, sizeof o->engine, "%s", value);
    } else if (!strcmp(key, "engine-opt")) {
        if (nc_engine_settings_add(&o->settings, value, &e) != NC_OK)
            return nc_api_error(err, &e, e.code);
    } else if (!strcmp(key, "threshold")) {
        if (nc_calib_method_parse(value, &p->method) != 0)
            return bad(err, key, "max, p99, p99.9, p99.99 or mmse", value);
    } else if (!strcmp(key, "per-channel")) {
        if (parse_bool(value, &p->per_channel) != 0)
            return bad(err, key, "0 or 1", value);
    } else if (!strcmp(key, "maxpool")) {
        if (nc_maxpool_strategy_parse(value, &p->maxpool) != 0)
            return bad(err, key, "avg, pre-spike or gated", value);
    } else if (!strcmp(key, "v0")) {
        if (parse_double(value, 0, 1, &d) != 0)
            return bad(err, key, "a fraction of the threshold from 0 to 1", value);
        p->snn.v0_fraction = (float)d;
    } else if (!strcmp(key, "reset")) {
        if (strcmp(value, "subtract") && strcmp(value, "zero"))
            return bad(err, key, "subtract or zero", value);
        p->snn.reset = strcmp(value, "zero") == 0 ? NC_RESET_ZERO : NC_RESET_SUBTRACT;
    } else if (!strcmp(key, "fire")) {
        if (strcmp(value, "ge") && strcmp(value, "gt"))
            return bad(err, key, "ge or gt", value);
        p->snn.compare = strcmp(value, "gt") == 0 ? NC_FIRE_GT : NC_FIRE_GE;
    } else if (!strcmp(key, "lr")) {
        if (parse_double(value, 0, 1e6, &d) != 0)
            return bad(err, key, "a number ≥ 0", value);
        t->learning_rate = d;
    } else if (!strcmp(key, "optimizer")) {
        if (nc_optimizer_parse(value, &t->optimizer) != 0)
            return bad(err, key, "adam or sgd", value);
    } else if (!strcmp(key, "surrogate")) {
        if (nc_surrogate_parse(value, &t->surrogate) != 0)
            return bad(err, key, "triangle, sigmoid, atan or rect", value);
    } else if (!strcmp(key, "train-threshold")) {
        if (parse_bool(value, &t->train_threshold) != 0)
            return bad(err, key, "0 or 1", value);
    } else if (!strcmp(key, "augment")) {
        if (parse_bool(value, &b) != 0)
            return bad(err, key, "0 or 1", value);
        t->crop_padding = b ? 2 : 0;
        t->flip = b;
    } else if (!strcmp(key, "time-budget")) {
        if (parse_double(value, 1e-3, 1e6, &d) != 0)
            return bad(err, key, "minutes > 0", value);
        o->time_budget = d;
    } else if (!strcmp(key, "distill")) {
        if (nc_train_distill_parse(value, t) != 0)
            return bad(err, key, "a weight in [0, 1], optionally with a temperature > 0 (0.5 or 0.5,2)", value);
    } else if (!strcmp(key, "encoding")) {
        if (strcmp(value, "direct") && strcmp(value, "poisson"))
            return bad(err, key, "direct or poisson", value);
        o->encoding = strcmp(value, "poisson") == 0 ? NC_ENCODING_POISSON : NC_ENCODING_DIRECT;
    } else if (!strcmp(key, "seed")) {
        long v;
        if (parse_long(value, 0, 0x7fffffffL, &v) != 0)
            return bad(err, key, "a whole number ≥ 0", value);
        o->seed = (uint64_t)v;
    } else
        return nc_api_fail(err, NC_ERR_ARGUMENT,
                           "unknown option '%s'; the options are those of `neurocuda convert` (neurocuda.h)", key);
    return NEUROCUDA_OK;
}

int neurocuda_options_set(neurocuda_options *o, const char *key, const char *value, neurocuda_error *err)
{
    if (!o || !key || !value)
        return nc_api_fail(err, NC_ERR_ARGUMENT, "neurocuda_options_set: no options, key or value");
    for (size_t i = 0; i < sizeof int_keys / sizeof int_keys[0]; i++)
        if (!strcmp(key, int_keys[i].key))
            return set_int(o, &int_keys[i], value, err);
    return set_text(o, key, value, err);
}

nc_runner_desc nc_api_describe(const neurocuda_options *o, const neurocuda_model *m)
{
    nc_runner_desc d = nc_runner_desc_default();
    d.source = m->net;
    d.source_path = m->path;
    d.dataset = o->data[0] ? o->data : NULL;
    d.pp = o->pp;
    d.test_images = o->limit;
    d.engine = o->engine;
    d.engine_settings = &o->settings;
    d.threads = o->threads;
    d.pipeline = o->pipeline;
    d.held_out = o->val_images_set ? o->pipeline.train.val_count : -1;
    d.eval_T = o->eval_T;
    d.encoding = o->encoding;
    d.seed = o->seed;
    d.output = o->output[0] ? o->output : NULL;
    return d;
}
