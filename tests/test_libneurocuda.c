/* test_libneurocuda.c — the public interface (lib/neurocuda.h) alone, as a
 * program outside the tree would use it: convert the bundled model from the
 * dataset files and from streams (same table), save, reload, export, run a
 * forward pass, cancel, and get clear errors for bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "neurocuda.h"
#include "nc_test.h"

#define N_IMAGES 500
#define FMNIST "/usr/share/datasets/fashion-mnist/"

static char model_path[1024], tmp_dir[256];

/* ---- a stream over IDX files, normalised as the bundled model expects ---- */

typedef struct idx_stream {
    float images[N_IMAGES * 784];
    int32_t labels[N_IMAGES];
    int64_t next, batch;
    int poison;             /* 1: a NaN in the second batch */
} idx_stream;

static int read_idx(const char *path, long skip, unsigned char *out, long n)
{
    gzFile f = gzopen(path, "rb");
    unsigned char header[16];
    int ok = f && gzread(f, header, (unsigned)skip) == skip && gzread(f, out, (unsigned)n) == n;
    if (f)
        gzclose(f);
    return ok ? 0 : -1;
}

static int load_split(idx_stream *s, const char *prefix)
{
    char path[512];
    unsigned char *raw = malloc(N_IMAGES * 784);
    snprintf(path, sizeof path, FMNIST "%s-images-idx3-ubyte.gz", prefix);
    int rc = raw ? read_idx(path, 16, raw, N_IMAGES * 784) : -1;
    for (long i = 0; rc == 0 && i < N_IMAGES * 784; i++)
        s->images[i] = (raw[i] / 255.0f - 0.2860f) / 0.3530f;
    snprintf(path, sizeof path, FMNIST "%s-labels-idx1-ubyte.gz", prefix);
    if (rc == 0)
        rc = read_idx(path, 8, raw, N_IMAGES);
    for (long i = 0; rc == 0 && i < N_IMAGES; i++)
        s->labels[i] = raw[i];
    free(raw);
    s->batch = 64;
    return rc;
}

static int stream_next(void *user, const float **images, const int32_t **labels, int64_t *n, neurocuda_error *err)
{
    idx_stream *s = user;
    if (s->next >= N_IMAGES)
        return 0;
    *n = N_IMAGES - s->next < s->batch ? N_IMAGES - s->next : s->batch;
    *images = s->images + s->next * 784;
    *labels = s->labels + s->next;
    if (s->poison && s->next == s->batch)
        s->images[s->next * 784 + 5] = 0.0f / 0.0f;
    s->next += *n;
    return 1;
}

static int stream_rewind(void *user, neurocuda_error *err)
{
    ((idx_stream *)user)->next = 0;
    return 0;
}

static neurocuda_data *open_stream(idx_stream *s, const char *name)
{
    neurocuda_data *d = NULL;
    neurocuda_error err = {0};
    int st = neurocuda_data_stream(N_IMAGES, 1, 28, 28, 10, name, stream_next, stream_rewind, s, &d, &err);
    NC_CHECK(st == NEUROCUDA_OK, "%s", err.message);
    return d;
}

/* ---- helpers ---- */

static neurocuda_options *options(int with_files)
{
    neurocuda_options *o = neurocuda_options_new();
    static const char *keys[][2] = {{"mean", "0.2860"}, {"std", "0.3530"}, {"calib-images", "500"},
                                    {"limit", "500"}, {"eval-T", "8"}};
    neurocuda_error err = {0};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        NC_CHECK(neurocuda_options_set(o, keys[i][0], keys[i][1], &err) == NEUROCUDA_OK, "%s", err.message);
    if (!with_files)
        neurocuda_options_set(o, "data", "", &err);
    return o;
}

static neurocuda_model *open_model(void)
{
    neurocuda_model *m = NULL;
    neurocuda_error err = {0};
    NC_CHECK(neurocuda_model_open(model_path, &m, &err) == NEUROCUDA_OK, "%s", err.message);
    return m;
}

static void table_of(const neurocuda_results *r, char *buf, size_t size) { neurocuda_results_table(r, buf, size); }

/* ---- tests ---- */

static void test_engines(void)
{
    NC_CHECK(neurocuda_engine_count() >= 3, "cpu, gpu and loihi are listed (%d)", neurocuda_engine_count());
    NC_CHECK(neurocuda_engine_available("cpu", NULL, 0), "the cpu engine runs everywhere");
    char why[256];
    NC_CHECK(!neurocuda_engine_available("tpu", why, sizeof why) && strstr(why, "tpu"), "%s", why);
    NC_CHECK(strcmp(neurocuda_status_name(NEUROCUDA_ERR_IO), "io") == 0, "status names");
}

static void test_bad_options(void)
{
    neurocuda_options *o = neurocuda_options_new();
    neurocuda_error err = {0};
    NC_CHECK(neurocuda_options_set(o, "treshold", "max", &err) == NEUROCUDA_ERR_ARGUMENT &&
                 strstr(err.message, "treshold"), "%s", err.message);
    NC_CHECK(neurocuda_options_set(o, "threshold", "p42", &err) == NEUROCUDA_ERR_ARGUMENT &&
                 strstr(err.message, "p99.9"), "%s", err.message);
    NC_CHECK(neurocuda_options_set(o, "L", "0", &err) == NEUROCUDA_ERR_ARGUMENT, "%s", err.message);
    NC_CHECK(neurocuda_options_set(o, "engine", "tpu", &err) == NEUROCUDA_ERR_ARGUMENT, "%s", err.message);
    /* the recipe's keys: good values taken, bad ones named */
    static const char *good[][2] = {{"distill", "0.5,2"}, {"distill", "0"}, {"calibrate-bias", "8"},
                                    {"bias-images", "256"}, {"target-T", "4"}, {"time-budget", "2.5"}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        NC_CHECK(neurocuda_options_set(o, good[i][0], good[i][1], &err) == NEUROCUDA_OK, "%s %s: %s", good[i][0],
                 good[i][1], err.message);
    NC_CHECK(neurocuda_options_set(o, "distill", "1.5", &err) == NEUROCUDA_ERR_ARGUMENT &&
                 strstr(err.message, "distill"), "%s", err.message);
    NC_CHECK(neurocuda_options_set(o, "distill", "0.5,0", &err) == NEUROCUDA_ERR_ARGUMENT, "τ = 0 refused");
    NC_CHECK(neurocuda_options_set(o, "target-T", "0", &err) == NEUROCUDA_ERR_ARGUMENT, "%s", err.message);
    NC_CHECK(neurocuda_options_set(o, "time-budget", "-1", &err) == NEUROCUDA_ERR_ARGUMENT, "%s", err.message);
    neurocuda_options_free(o);
}

static void test_missing_file(void)
{
    neurocuda_model *m = NULL;
    neurocuda_error err = {0};
    int st = neurocuda_model_open("/nonexistent/model.onnx", &m, &err);
    NC_CHECK(st == NEUROCUDA_ERR_IO && m == NULL && strstr(err.message, "/nonexistent/model.onnx"), "%d %s", st,
             err.message);
}

static void test_convert_files_and_streams(void)
{
    neurocuda_model *ann = open_model(), *a = NULL, *b = NULL;
    neurocuda_results *ra = NULL, *rb = NULL;
    neurocuda_error err = {0};
    neurocuda_options *of = options(1), *os = options(0);
    NC_CHECK(neurocuda_convert(ann, of, NULL, NULL, NULL, NULL, &a, &ra, &err) == NEUROCUDA_OK, "%s", err.message);
    idx_stream *train = calloc(1, sizeof *train), *test = calloc(1, sizeof *test);
    NC_CHECK(load_split(train, "train") == 0 && load_split(test, "t10k") == 0, "the IDX files are readable");
    neurocuda_data *dtrain = open_stream(train, "train stream"), *dtest = open_stream(test, "test stream");
    NC_CHECK(neurocuda_convert(ann, os, dtrain, dtest, NULL, NULL, &b, &rb, &err) == NEUROCUDA_OK, "%s",
             err.message);
    if (ra && rb) {
        char ta[4096], tb[4096], lines[4096];
        table_of(ra, ta, sizeof ta);
        table_of(rb, tb, sizeof tb);
        for (const char *line = strtok(strcpy(lines, ta), "\n"); line; line = strtok(NULL, "\n"))
            printf("# %s\n", line); /* TAP: every line of the table a comment */
        NC_CHECK(strcmp(ta, tb) == 0, "files and streams give one table:\n%s\n%s", ta, tb);
        NC_CHECK(neurocuda_results_rows(ra) == 1 && neurocuda_results_T(ra, 0) == 8, "one row of 8 steps");
        NC_CHECK(neurocuda_results_snn(ra, 0, 8) > 0.8, "the SNN classifies (%.3f)", neurocuda_results_snn(ra, 0, 8));
        NC_CHECK(neurocuda_results_images(ra, 0) == N_IMAGES, "500 images");
    }
    if (b) { /* save, reopen, export, forward */
        char path[512], nir[512];
        snprintf(path, sizeof path, "%s/b.ncsnn", tmp_dir);
        snprintf(nir, sizeof nir, "%s/b.nir", tmp_dir);
        NC_CHECK(neurocuda_model_save(b, path, &err) == NEUROCUDA_OK, "%s", err.message);
        neurocuda_model *c = NULL;
        NC_CHECK(neurocuda_model_open(path, &c, &err) == NEUROCUDA_OK && neurocuda_model_is_spiking(c), "%s",
                 err.message);
        NC_CHECK(neurocuda_model_export_nir(b, nir, 1, &err) == NEUROCUDA_OK && access(nir, F_OK) == 0, "%s",
                 err.message);
        int64_t dims[4];
        NC_CHECK(neurocuda_model_input_shape(b, dims) == 3 && dims[0] == 1 && dims[1] == 28, "input 1×28×28");
        NC_CHECK(neurocuda_model_classes(b) == 10, "10 classes");
        float *out = malloc(8 * 2 * 10 * sizeof(float));
        NC_CHECK(neurocuda_model_forward(c, test->images, 2, 8, out, &err) == NEUROCUDA_OK, "%s", err.message);
        int best = 0;
        for (int k = 1; k < 10; k++)
            best = out[(7 * 2 + 0) * 10 + k] > out[(7 * 2 + 0) * 10 + best] ? k : best;
        NC_CHECK(best == test->labels[0], "the first test image is classified (%d, label %d)", best, test->labels[0]);
        char report[8192];
        NC_CHECK(neurocuda_model_report(c, report, sizeof report) > 100 && strstr(report, "spiking"), "%s", report);
        neurocuda_results *rc = NULL;
        NC_CHECK(neurocuda_evaluate(c, os, dtest, NULL, NULL, &rc, &err) == NEUROCUDA_OK, "%s", err.message);
        NC_CHECK(rc && neurocuda_results_layers(rc) > 0, "evaluation keeps the layers' numbers");
        neurocuda_layer layer;
        if (rc && neurocuda_results_layer(rc, 0, &layer) == 0)
            NC_CHECK(layer.firing_rate > 0 && layer.sops > 0, "%s: rate %g, sops %g", layer.name, layer.firing_rate,
                     layer.sops);
        if (rc && rb)
            NC_CHECK(neurocuda_results_snn(rc, 0, 8) == neurocuda_results_snn(rb, 0, 8), "evaluate repeats the row");
        neurocuda_results_free(rc);
        free(out);
        neurocuda_model_free(c);
    }
    neurocuda_results_free(ra);
    neurocuda_results_free(rb);
    neurocuda_model_free(a);
    neurocuda_model_free(b);
    neurocuda_data_free(dtrain);
    neurocuda_data_free(dtest);
    free(train);
    free(test);
    neurocuda_options_free(of);
    neurocuda_options_free(os);
    neurocuda_model_free(ann);
}

static int cancel_at_calibration(void *user, const neurocuda_progress *p)
{
    ++*(int *)user;
    return strcmp(p->stage, "calibrate") == 0;
}

static void test_cancel_writes_nothing(void)
{
    neurocuda_model *ann = open_model(), *snn = NULL;
    neurocuda_options *o = options(1);
    neurocuda_error err = {0};
    char path[512];
    snprintf(path, sizeof path, "%s/cancelled.ncsnn", tmp_dir);
    neurocuda_options_set(o, "output", path, &err);
    int calls = 0;
    int st = neurocuda_convert(ann, o, NULL, NULL, cancel_at_calibration, &calls, &snn, NULL, &err);
    NC_CHECK(st == NEUROCUDA_ERR_CANCELLED && snn == NULL && calls > 0, "%d %s", st, err.message);
    NC_CHECK(access(path, F_OK) != 0, "no project file after a cancel");
    neurocuda_options_free(o);
    neurocuda_model_free(ann);
}

static void test_bad_stream(void)
{
    neurocuda_model *ann = open_model(), *snn = NULL;
    neurocuda_options *o = options(0);
    idx_stream *train = calloc(1, sizeof *train);
    NC_CHECK(load_split(train, "train") == 0, "the IDX file is readable");
    train->poison = 1;
    neurocuda_data *d = open_stream(train, "the poisoned loader");
    neurocuda_error err = {0};
    int st = neurocuda_convert(ann, o, d, NULL, NULL, NULL, &snn, NULL, &err);
    NC_CHECK(st == NEUROCUDA_ERR_ARGUMENT && strstr(err.message, "the poisoned loader: batch 2, sample 0 holds NaN"),
             "%d %s", st, err.message);
    neurocuda_data *wrong = NULL;
    st = neurocuda_data_stream(N_IMAGES, 3, 28, 28, 10, "rgb", stream_next, stream_rewind, train, &wrong, &err);
    NC_CHECK(st == NEUROCUDA_OK, "%s", err.message);
    st = neurocuda_convert(ann, o, wrong, NULL, NULL, NULL, &snn, NULL, &err);
    NC_CHECK(st == NEUROCUDA_ERR_SHAPE && strstr(err.message, "[3, 28, 28]"), "%d %s", st, err.message);
    neurocuda_data_free(wrong);
    neurocuda_data_free(d);
    free(train);
    neurocuda_options_free(o);
    neurocuda_model_free(ann);
}

int main(void)
{
    const char *src = getenv("NC_SOURCE_DIR");
    snprintf(model_path, sizeof model_path, "%s/assets/models/fmnist_cnn.onnx", src ? src : ".");
    if (nc_test_temp_dir(tmp_dir, sizeof tmp_dir, "test_libneurocuda") != 0)
        return 1;
    NC_RUN(test_engines);
    NC_RUN(test_bad_options);
    NC_RUN(test_missing_file);
    if (access(FMNIST "train-images-idx3-ubyte.gz", R_OK) != 0) {
        nc_test_report("test_convert_files_and_streams", 0, "dataset-fashion-mnist is not installed");
    } else {
        NC_RUN(test_convert_files_and_streams);
        NC_RUN(test_cancel_writes_nothing);
        NC_RUN(test_bad_stream);
    }
    nc_test_remove_dir(tmp_dir);
    return nc_test_done();
}
