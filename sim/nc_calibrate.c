/* nc_calibrate.c — two ANN passes over calibration images feeding nc_calib. */
#include "nc_calibrate.h"

#include <string.h>

typedef struct calib_run {
    nc_engine *engine;
    const nc_dataset *data;
    nc_calib_stats *stats;
    nc_tensor *batch;   /* [batch, input shape], reused                */
    int64_t n_images;
    int batch_size;
    nc_progress_fn progress;
    void *progress_user;
    int64_t done;       /* images over both passes, for progress       */
} calib_run;

/* A batch tensor shaped like the net's input node, checked against the data. */
static nc_status make_batch(const nc_net *net, const nc_dataset *data, int batch_size, nc_tensor **out,
                            nc_error *err)
{
    const nc_node *in = &net->nodes[net->input];
    int64_t per_sample = (int64_t)data->channels * data->height * data->width;
    if (nc_node_numel(in) != per_sample) {
        char buf[96];
        return nc_fail(err, NC_ERR_SHAPE, "calibration: the net's input '%s' is %s but images of %s are [%d, %d, %d]",
                       in->name, nc_shape_str(in->ndim, in->shape, buf, sizeof buf), data->path, data->channels,
                       data->height, data->width);
    }
    int64_t shape[NC_MAX_DIMS] = {batch_size};
    for (int d = 0; d < in->ndim && d + 1 < NC_MAX_DIMS; d++)
        shape[d + 1] = in->shape[d];
    *out = nc_tensor_new(in->ndim + 1, shape);
    return *out ? NC_OK : nc_fail(err, NC_ERR_MEMORY, "calibration: out of memory for a batch of %d", batch_size);
}

static int report_progress(calib_run *run)
{
    if (!run->progress)
        return 0;
    nc_progress p = {"calibrate", run->done, 2 * run->n_images, 0};
    return run->progress(run->progress_user, &p);
}

/* One pass over the images with the observer hooked to the stats. */
static nc_status run_pass(calib_run *run, nc_calib_pass pass, nc_error *err)
{
    nc_status st = nc_calib_begin_pass(run->stats, pass, err);
    if (st != NC_OK)
        return st;
    nc_observer obs = {nc_calib_add, NULL, run->stats};
    nc_run_options opts;
    memset(&opts, 0, sizeof opts);
    opts.mode = NC_MODE_ANN;
    opts.T = 1;
    opts.observer = &obs;
    for (int64_t first = 0; first < run->n_images; first += run->batch_size) {
        int64_t n = run->n_images - first < run->batch_size ? run->n_images - first : run->batch_size;
        run->batch->shape[0] = n; /* the buffer holds batch_size samples */
        nc_dataset_batch(run->data, first, n, run->batch->data, NULL);
        nc_tensor *out = NULL;
        st = nc_engine_forward(run->engine, run->batch, &opts, &out, err);
        nc_tensor_free(out);
        if (st != NC_OK)
            return st;
        run->done += n;
        if (report_progress(run))
            return nc_fail(err, NC_ERR_CANCELLED, "calibration cancelled after %lld of %lld images",
                           (long long)run->done, (long long)(2 * run->n_images));
    }
    return nc_calib_end_pass(run->stats, err);
}

nc_status nc_calibrate(nc_engine *engine, const nc_net *net, const nc_dataset *data,
                       const nc_calibrate_options *opts, nc_calib_stats **out, nc_error *err)
{
    *out = NULL;
    nc_calibrate_options o;
    memset(&o, 0, sizeof o);
    if (opts)
        o = *opts;
    calib_run run = {engine, data, NULL, NULL, 0, 0, o.progress, o.progress_user, 0};
    run.n_images = o.n_images > 0 ? o.n_images : NC_CALIBRATE_DEFAULT_IMAGES;
    if (run.n_images > data->count)
        run.n_images = data->count;
    run.batch_size = o.batch_size > 0 ? o.batch_size : NC_CALIBRATE_DEFAULT_BATCH;
    if (run.n_images < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "calibration: the dataset %s has no images", data->path);
    nc_status st = nc_engine_load(engine, net, err);
    if (st == NC_OK)
        st = make_batch(net, data, run.batch_size, &run.batch, err);
    if (st == NC_OK)
        st = nc_calib_new(net, o.bins, &run.stats, err);
    if (st == NC_OK)
        st = run_pass(&run, NC_CALIB_PASS_MAX, err);
    if (st == NC_OK)
        st = run_pass(&run, NC_CALIB_PASS_HISTOGRAM, err);
    nc_tensor_free(run.batch);
    if (st != NC_OK) {
        nc_calib_free(run.stats);
        return st;
    }
    *out = run.stats;
    return NC_OK;
}

nc_status nc_calibrate_thresholds(const nc_calib_stats *stats, const nc_net *net, nc_calib_method method,
                                  int per_channel, int T, float phi, nc_thresholds **out, nc_error *err)
{
    nc_calib_choice choice = {method, per_channel, T, phi};
    return nc_calib_thresholds(stats, net->n_nodes, &choice, out, err);
}
