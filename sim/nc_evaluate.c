/* nc_evaluate.c — accuracy of a network over a dataset, batch by batch. */
#include "nc_evaluate.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double nc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int nc_argmax(const float *values, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (values[i] > values[best])
            best = i;
    return (int)best;
}

nc_status nc_check_dataset_fits(const nc_net *net, const nc_dataset *ds, nc_error *err)
{
    const nc_node *in = &net->nodes[net->input];
    int64_t want = nc_node_numel(in);
    int64_t have = (int64_t)ds->channels * ds->height * ds->width;
    int fits = in->ndim == 3 ? (in->shape[0] == ds->channels && in->shape[1] == ds->height &&
                                in->shape[2] == ds->width)
                             : want == have;
    if (fits)
        return NC_OK;
    char buf[96];
    return nc_fail(err, NC_ERR_SHAPE,
                   "%s: images are [%d, %d, %d] but the model '%s' expects %s; use a dataset of the size the "
                   "model was trained on",
                   ds->path, ds->channels, ds->height, ds->width, net->source_path,
                   nc_shape_str(in->ndim, in->shape, buf, sizeof buf));
}

static nc_tensor *batch_tensor(const nc_net *net, int64_t n)
{
    const nc_node *in = &net->nodes[net->input];
    int64_t shape[NC_MAX_DIMS] = {n};
    for (int i = 0; i < in->ndim; i++)
        shape[i + 1] = in->shape[i];
    return nc_tensor_new(in->ndim + 1, shape);
}

nc_status nc_evaluate(nc_engine *engine, const nc_dataset *ds, int batch, nc_mode mode,
                      nc_progress_fn progress, void *progress_user, nc_eval_result *result, nc_error *err)
{
    return nc_evaluate_dealt(engine, ds, batch, mode, 0, 1, progress, progress_user, result, err);
}

nc_status nc_evaluate_dealt(nc_engine *engine, const nc_dataset *ds, int batch, nc_mode mode, int rank, int ranks,
                            nc_progress_fn progress, void *progress_user, nc_eval_result *result, nc_error *err)
{
    const nc_net *net = engine->net;
    *result = (nc_eval_result){0};
    if (!net)
        return nc_fail(err, NC_ERR_ARGUMENT, "the engine has no network loaded");
    if (batch < 1)
        return nc_fail(err, NC_ERR_ARGUMENT, "batch size must be at least 1, got %d", batch);
    nc_status st = nc_check_dataset_fits(net, ds, err);
    if (st != NC_OK)
        return st;
    nc_tensor *input = batch_tensor(net, batch);
    int32_t *labels = malloc((size_t)batch * sizeof *labels);
    if (!input || !labels) {
        nc_tensor_free(input);
        free(labels);
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for a batch of %d images", batch);
    }
    nc_run_options opts = {.mode = mode, .T = 1};
    for (int64_t first = (int64_t)rank * batch; first < ds->count && st == NC_OK; first += (int64_t)ranks * batch) {
        int64_t n = ds->count - first < batch ? ds->count - first : batch;
        input->shape[0] = n;
        nc_dataset_batch(ds, first, n, input->data, labels);
        nc_tensor *out = NULL;
        double start = nc_now();
        st = nc_engine_forward(engine, input, &opts, &out, err);
        result->seconds += nc_now() - start;
        if (st != NC_OK)
            break;
        int64_t classes = nc_tensor_numel(out) / n;
        for (int64_t i = 0; i < n; i++)
            result->correct += nc_argmax(out->data + i * classes, classes) == labels[i];
        result->images += n;
        nc_tensor_free(out);
        result->accuracy = (double)result->correct / (double)result->images;
        nc_progress p = {"evaluate", result->images, ds->count, result->accuracy};
        if (progress && progress(progress_user, &p) != 0)
            st = nc_fail(err, NC_ERR_CANCELLED, "evaluation cancelled after %lld images",
                         (long long)result->images);
    }
    if (result->seconds > 0)
        result->images_per_second = (double)result->images / result->seconds;
    nc_tensor_free(input);
    free(labels);
    return st;
}

/* Correct answers of one SNN output [T, n, F]: argmax of the sum over steps. */
static int64_t snn_correct(const nc_tensor *out, int T, int64_t n, const int32_t *labels, float *total)
{
    int64_t F = out->shape[out->ndim - 1], right = 0;
    for (int64_t k = 0; k < n; k++) {
        memset(total, 0, (size_t)F * sizeof(float));
        for (int t = 0; t < T; t++)
            for (int64_t j = 0; j < F; j++)
                total[j] += out->data[((int64_t)t * n + k) * F + j];
        right += nc_argmax(total, F) == labels[k];
    }
    return right;
}

nc_status nc_evaluate_snn_range(nc_engine *engine, const nc_dataset *ds, int64_t first, int64_t count, int T,
                                int batch, double *accuracy, nc_error *err)
{
    const nc_net *net = engine->net;
    *accuracy = -1;
    if (!net || T < 1 || batch < 1 || first < 0 || count < 1 || first + count > ds->count)
        return nc_fail(err, NC_ERR_ARGUMENT, "SNN accuracy of images %lld..%lld of %s at T = %d: no network loaded, "
                       "or outside its %lld images", (long long)first, (long long)(first + count), ds->path, T,
                       (long long)ds->count);
    nc_tensor *input = batch_tensor(net, batch);
    int32_t *labels = malloc((size_t)batch * sizeof *labels);
    float *total = malloc((size_t)nc_node_numel(&net->nodes[net->output]) * sizeof(float));
    nc_status st = input && labels && total ? NC_OK : nc_fail(err, NC_ERR_MEMORY, "out of memory for a batch");
    nc_run_options opts = {.mode = NC_MODE_SNN, .T = T};
    int64_t right = 0;
    for (int64_t b = 0; st == NC_OK && b < count; b += batch) {
        int64_t n = count - b < batch ? count - b : batch;
        input->shape[0] = n;
        nc_dataset_batch(ds, first + b, n, input->data, labels);
        nc_tensor *out = NULL;
        st = nc_engine_forward(engine, input, &opts, &out, err);
        if (st == NC_OK)
            right += snn_correct(out, T, n, labels, total);
        nc_tensor_free(out);
    }
    if (st == NC_OK)
        *accuracy = (double)right / (double)count;
    nc_tensor_free(input);
    free(labels);
    free(total);
    return st;
}
