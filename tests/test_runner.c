/* test_runner.c — the pipeline runner's jobs that the CLI's `eval` and
 * `bench` describe, and the engine it makes (sim/nc_runner.h):
 *   - the engine's threads: desc.threads > 0 wins, else the engine's own
 *     "threads" setting (--engine-opt threads=N) holds;
 *   - a measure-only job measures an ANN as it is (eval): the row equals
 *     nc_evaluate's answer and the net is not converted;
 *   - a conversion with no test split (bench) converts and measures nothing. */
#include "nc_test.h"
#include "nc_test_util.h"
#include "nc_test_runner.h"

#include "../sim/nc_engine_registry.h"
#include "../sim/nc_runner.h"

/* The engine's threads, seen by an observer once the open stage made it. */
static nc_status see_threads(void *user, nc_runner *r, const nc_run_stage *stage, nc_runner_event ev, nc_error *err)
{
    (void)err;
    if (stage->kind == NC_RUN_OPEN && ev == NC_RUNNER_STAGE_END)
        *(int *)user = nc_runner_engine(r)->threads;
    return NC_OK;
}

/* A measure-only job of the quadrant ANN on `test`; the caller frees it. */
static nc_runner *measure_job(const nc_net *ann, const nc_dataset *test, const nc_engine_settings *settings,
                              int threads, int *seen_threads)
{
    nc_runner_desc d = nc_runner_desc_default();
    d.source = ann, d.source_path = "quadrant ann";
    d.dataset = NULL, d.test_data = test;
    d.engine_settings = settings, d.threads = threads;
    d.measure_only = 1, d.skip_qcfs = 1;
    d.batch_size = 16;
    nc_runner_observer obs = {.user = seen_threads, .event = see_threads};
    nc_runner *r = NULL;
    nc_error err = {0};
    nc_status st = nc_runner_new(&d, &r, &err);
    if (st == NC_OK)
        st = nc_runner_run(r, &obs, &err);
    NC_CHECK(st == NC_OK, "measure-only job: %s", err.message);
    return r;
}

static void test_engine_threads(void)
{
    nc_net *ann = quadrant_ann();
    nc_dataset *test = quadrant_dataset(40, 5);
    nc_engine_settings three = {0};
    nc_error err = {0};
    NC_CHECK(nc_engine_settings_add(&three, "threads=3", &err) == NC_OK, "setting: %s", err.message);
    static const struct {
        int with_setting, threads, expect;
        const char *what;
    } cases[] = {
        {1, 0, 3, "threads=3 holds when the job gives no threads"},
        {1, 2, 2, "the job's threads (2) win over threads=3"},
        {0, 0, 0, "no setting, no threads: every core (0)"},
        {0, 1, 1, "the job's threads alone (1)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        int seen = -1;
        nc_runner *r = measure_job(ann, test, cases[k].with_setting ? &three : NULL, cases[k].threads, &seen);
        NC_CHECK(seen == cases[k].expect, "%s (engine threads %d)", cases[k].what, seen);
        nc_runner_free(r);
    }
    free_dataset(test);
    nc_net_free(ann);
}

static void test_measure_only(void)
{
    nc_net *ann = quadrant_ann();
    nc_dataset *test = quadrant_dataset(90, 6);
    int seen = -1;
    nc_runner *r = measure_job(ann, test, NULL, 0, &seen);
    NC_CHECK(nc_runner_stage_count(r) == 2 && nc_runner_stage(r, 0)->kind == NC_RUN_OPEN &&
                 nc_runner_stage(r, 1)->kind == NC_RUN_MEASURE,
             "open, then one measurement");
    const nc_stage_row *row = nc_runner_row(r, 0);
    /* the same measurement made directly */
    nc_engine *e = nc_engine_cpu_new();
    nc_eval_result direct = {0};
    nc_error err = {0};
    NC_CHECK(nc_engine_load(e, ann, &err) == NC_OK &&
                 nc_evaluate(e, test, 16, NC_MODE_ANN, NULL, NULL, &direct, &err) == NC_OK,
             "evaluate: %s", err.message);
    NC_CHECK(row && nc_runner_row_count(r) == 1 && strcmp(row->name, "evaluated") == 0, "one row, \"evaluated\"");
    NC_CHECK(row && row->ann == direct.accuracy && row->ann_correct == direct.correct && row->images == 90,
             "the row is nc_evaluate's answer (%.4f, %lld of 90)", row ? row->ann : -1.0,
             row ? (long long)row->ann_correct : -1LL);
    NC_CHECK(row && row->ann_images_per_second > 0 && row->T == 0 && isnan(row->qcfs),
             "its speed; no SNN steps, no QCFS-ANN");
    NC_CHECK(!nc_runner_is_spiking(nc_runner_net(r)), "the ANN was not converted");
    nc_engine_free(e);
    nc_runner_free(r);

    nc_runner_desc d = nc_runner_desc_default();
    d.source = ann, d.test_data = test, d.measure_only = 1;
    d.pipeline.finetune_qcfs_epochs = 1;
    NC_CHECK(nc_runner_new(&d, &r, &err) == NC_ERR_ARGUMENT && strstr(err.message, "measure-only"),
             "a measure-only job that fine-tunes is refused: %s", err.message);
    free_dataset(test);
    nc_net_free(ann);
}

static void test_convert_without_test_split(void)
{
    nc_net *ann = quadrant_ann();
    nc_dataset *train = quadrant_dataset(120, 7);
    nc_runner_desc d = nc_runner_desc_default();
    d.source = ann;
    d.dataset = NULL, d.train_data = train;
    d.pipeline.calib_images = 100;
    nc_runner *r = nc_test_run_job(&d, "convert");
    NC_CHECK(r != NULL, "the job converts");
    if (r) {
        NC_CHECK(nc_runner_stage_count(r) == 3 && nc_runner_stage(r, 2)->kind == NC_RUN_CONVERT &&
                     nc_runner_row_count(r) == 0,
                 "load, calibrate, convert; no row");
        NC_CHECK(nc_runner_is_spiking(nc_runner_net(r)) && !nc_runner_is_spiking(ann),
                 "the job's net is the SNN; the source stays the ANN");
    }
    nc_runner_free(r);
    free_dataset(train);
    nc_net_free(ann);
}

int main(void)
{
    NC_RUN(test_engine_threads);
    NC_RUN(test_measure_only);
    NC_RUN(test_convert_without_test_split);
    return nc_test_done();
}
