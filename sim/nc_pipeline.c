/* nc_pipeline.c — the conversion pipeline (see nc_pipeline.h). */
#include "nc_pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

nc_pipeline_options nc_pipeline_options_default(void)
{
    nc_pipeline_options o = {0};
    o.method = NC_CALIB_DEFAULT_METHOD;
    o.levels = 8;
    o.maxpool = NC_MAXPOOL_PRE_SPIKE;
    o.snn = nc_snn_options_default();
    o.calib_images = NC_CALIBRATE_DEFAULT_IMAGES;
    o.batch_size = NC_CALIBRATE_DEFAULT_BATCH;
    o.train = nc_train_options_default(NC_TRAIN_BPTT);
    return o;
}

void nc_pipeline_result_clear(nc_pipeline_result *r)
{
    if (!r)
        return;
    nc_calib_free(r->stats);
    memset(r, 0, sizeof *r);
}

nc_status nc_pipeline_calibrate(nc_engine *engine, nc_net *net, const nc_dataset *calib,
                                const nc_pipeline_options *opts, nc_progress_fn progress, void *progress_user,
                                nc_pipeline_result *result, nc_error *err)
{
    nc_pipeline_options o = opts ? *opts : nc_pipeline_options_default();
    memset(result, 0, sizeof *result);
    if (o.levels < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "L (QCFS quantisation steps) must be at least 1, got %d", o.levels);
    nc_status st = nc_convert_prepare(net, o.maxpool, err);
    if (st != NC_OK)
        return st;
    if (nc_convert_has_qcfs(net) && nc_convert_count_relu(net) == 0) {
        snprintf(result->warnings, sizeof result->warnings,
                 "the model holds QCFS activations: their λ and L are used, no calibration");
        return NC_OK;
    }
    if (!calib)
        return nc_fail(err, NC_ERR_ARGUMENT, "calibration needs a dataset (--data)");
    nc_calibrate_options copts = {.n_images = o.calib_images, .batch_size = o.batch_size,
                                  .progress = progress, .progress_user = progress_user};
    st = nc_calibrate(engine, net, calib, &copts, &result->stats, err);
    result->calibrated = st == NC_OK;
    return st;
}

nc_status nc_pipeline_finish(nc_net *net, const nc_pipeline_options *opts, nc_pipeline_result *result,
                             nc_error *err)
{
    nc_pipeline_options o = opts ? *opts : nc_pipeline_options_default();
    nc_status st = NC_OK;
    if (result->calibrated) {
        nc_thresholds *th = NULL;
        int target_T = o.target_T > 0 ? o.target_T : o.levels;
        st = nc_calibrate_thresholds(result->stats, net, o.method, o.per_channel, target_T, o.snn.v0_fraction,
                                     &th, err);
        if (st == NC_OK) {
            snprintf(result->warnings, sizeof result->warnings, "%s", th->warnings);
            st = nc_convert_to_qcfs(net, th, o.levels, err);
        }
        nc_thresholds_free(th);
    }
    return st == NC_OK ? nc_convert_to_snn(net, &o.snn, err) : st;
}

nc_status nc_pipeline_convert(nc_engine *engine, nc_net *net, const nc_dataset *calib,
                              const nc_pipeline_options *opts, nc_progress_fn progress, void *progress_user,
                              nc_pipeline_result *result, nc_error *err)
{
    nc_status st = nc_pipeline_calibrate(engine, net, calib, opts, progress, progress_user, result, err);
    if (st == NC_OK)
        st = nc_pipeline_finish(net, opts, result, err);
    return st == NC_OK ? nc_engine_load(engine, net, err) : st;
}

nc_status nc_pipeline_finetune(nc_net *net, nc_train_mode stage, const nc_dataset *train,
                               const nc_pipeline_options *opts, nc_train_result *result, nc_error *err)
{
    memset(result, 0, sizeof *result);
    int epochs = stage == NC_TRAIN_QCFS ? opts->finetune_qcfs_epochs : opts->finetune_bptt_epochs;
    if (epochs <= 0)
        return NC_OK;
    if (!train)
        return nc_fail(err, NC_ERR_ARGUMENT, "fine-tuning needs a training dataset (--data)");
    nc_train_options t = opts->train;
    t.mode = stage;
    t.epochs = epochs;
    nc_status st = nc_train(net, train, &t, result, err);
    if (st != NC_OK)
        nc_error_prefix(err, "%s stage", stage == NC_TRAIN_QCFS ? "QCFS" : "BPTT");
    return st;
}

/* Per-channel max and percentiles of every calibrated layer, so the project
 * file keeps what the thresholds were chosen from. */
static nc_status add_calibration_stats(nc_project *p, const nc_calib_stats *stats, nc_error *err)
{
    for (int layer = 0; layer < nc_calib_layer_count(stats); layer++) {
        int channels = nc_calib_channels(stats, layer);
        float *values = malloc((size_t)channels * 4 * sizeof(float));
        if (!values)
            return nc_fail(err, NC_ERR_MEMORY, "out of memory for calibration statistics");
        nc_status st = NC_OK;
        for (int c = 0; c < channels && st == NC_OK; c++) {
            nc_act_stats s;
            st = nc_calib_get_stats(stats, layer, c, &s, err);
            values[c] = s.max, values[channels + c] = s.p99;
            values[2 * channels + c] = s.p99_9, values[3 * channels + c] = s.p99_99;
        }
        static const char *names[4] = {"max", "p99", "p99.9", "p99.99"};
        int64_t shape[1] = {channels};
        for (int k = 0; k < 4 && st == NC_OK; k++)
            st = nc_project_add_stat(p, nc_calib_layer_name(stats, layer), names[k], 1, shape,
                                     values + (size_t)k * channels, err);
        free(values);
        if (st != NC_OK)
            return st;
    }
    return NC_OK;
}

static nc_status add_settings(nc_project *p, const nc_pipeline_options *o, nc_error *err)
{
    char text[64];
    nc_status st = nc_project_set_meta(p, "maxpool", nc_maxpool_strategy_name(o->maxpool), err);
    snprintf(text, sizeof text, "%d", o->levels);
    if (st == NC_OK)
        st = nc_project_set_meta(p, "levels", text, err);
    snprintf(text, sizeof text, "%g", o->snn.v0_fraction);
    if (st == NC_OK)
        st = nc_project_set_meta(p, "v0_fraction", text, err);
    if (st == NC_OK)
        st = nc_project_set_meta(p, "reset", o->snn.reset == NC_RESET_SUBTRACT ? "subtract" : "zero", err);
    if (st == NC_OK)
        st = nc_project_set_meta(p, "compare", o->snn.compare == NC_FIRE_GE ? "ge" : "gt", err);
    return st;
}

nc_status nc_pipeline_make_project(nc_net *net, const char *source_path, const nc_preprocess *pp,
                                   const nc_pipeline_options *opts, const nc_pipeline_result *result,
                                   nc_project **out, nc_error *err)
{
    nc_pipeline_options o = opts ? *opts : nc_pipeline_options_default();
    nc_project *p = nc_project_new();
    if (!p)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for a project");
    nc_project_set_net(p, net);
    nc_status st = source_path ? nc_project_set_source(p, source_path, err) : NC_OK;
    if (pp) {
        p->has_preprocess = 1;
        p->preprocess = *pp;
    }
    if (st == NC_OK && result && result->calibrated) {
        p->calibration.set = 1;
        snprintf(p->calibration.method, sizeof p->calibration.method, "%s", nc_calib_method_name(o.method));
        p->calibration.percentile = nc_calib_method_percentile(o.method);
        p->calibration.per_channel = o.per_channel;
        st = add_calibration_stats(p, result->stats, err);
    }
    if (st == NC_OK)
        st = add_settings(p, &o, err);
    if (st != NC_OK) {
        nc_project_free(p);
        return st;
    }
    *out = p;
    return NC_OK;
}
