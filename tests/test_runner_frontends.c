/* test_runner_frontends.c — `neurocuda convert` and the workbench's job run
 * the same job: the description each front end builds plans the same stages,
 * and running both (and the real NcJob object) gives identical stage tables.
 * The same for `neurocuda run` of a converted net and the workbench's
 * simulation of it.  Needs the bundled model and Fashion-MNIST (skips
 * without them). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nc_test.h"
#include "nc_test_runner.h"

#include "../app/nc_cli.h"
#include "nc-job.h"

#define TEST_IMAGES 200

static char model_path[1024];
static char project_path[64] = "/tmp/nc-test-runner-XXXXXX";
static nc_net *model;

/* The CLI's command line and the workbench's settings for one job:
 * calibrate, convert, QCFS 1 epoch, BPTT 1 epoch, rows at T = 4. */
static char *cli_argv[] = {"convert",         model_path,      "-o",         project_path, "--mean",
                           "0.2860",          "--std",         "0.3530",     "--calib-images", "200",
                           "--limit",         "200",           "--finetune-qcfs", "1",     "--finetune-bptt",
                           "1",               "--train-images", "256",       "--val-images", "128",
                           "--batch",         "32",            "--train-T",  "4",          "--eval-T",
                           "4",               NULL};

static void workbench_settings(NcJobSettings *s)
{
    memset(s, 0, sizeof *s);
    s->dataset = g_strdup("fashion-mnist");
    s->pp.n_mean = s->pp.n_std = 1;
    s->pp.mean[0] = 0.2860f;
    s->pp.std[0] = 0.3530f;
    s->images = TEST_IMAGES;
    s->pipeline = nc_pipeline_options_default();
    s->pipeline.calib_images = 200;
    s->pipeline.finetune_qcfs_epochs = 1;
    s->pipeline.finetune_bptt_epochs = 1;
    s->pipeline.train.batch_size = 32;
    s->pipeline.train.train_count = 256;
    s->pipeline.train.val_count = 128;
    s->pipeline.train.T = 4;
    s->T = 4;
    s->engine = g_strdup("cpu");
    s->batch_size = s->pipeline.batch_size;
    s->raster_neurons = 64;
}

static int same_number(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static int same_rows(const nc_runner *a, const nc_runner *b)
{
    if (nc_runner_row_count(a) != nc_runner_row_count(b))
        return 0;
    for (int k = 0; k < nc_runner_row_count(a); k++) {
        const nc_stage_row *x = nc_runner_row(a, k), *y = nc_runner_row(b, k);
        int same = strcmp(x->name, y->name) == 0 && same_number(x->ann, y->ann) && same_number(x->qcfs, y->qcfs) &&
                   x->T == y->T && x->images == y->images;
        for (int t = 0; same && t < x->T; t++)
            same = x->snn[t] == y->snn[t];
        if (!same) {
            printf("# row %d: %s %.4f %.4f T %d | %s %.4f %.4f T %d\n", k, x->name, x->ann, x->qcfs, x->T, y->name,
                   y->ann, y->qcfs, y->T);
            return 0;
        }
    }
    return 1;
}

static nc_runner *run_desc(const nc_runner_desc *d)
{
    nc_runner *r = nc_test_run_job(d, "runner");
    NC_CHECK(r != NULL, "the runner ran the job");
    return r;
}

static nc_runner_desc cli_desc(void)
{
    nc_runner_desc d;
    memset(&d, 0, sizeof d);
    optind = 1;
    int rc = nc_cli_convert_describe((int)(sizeof cli_argv / sizeof cli_argv[0]) - 1, cli_argv, model, &d);
    NC_CHECK(rc == 0, "the convert command line parses (exit %d)", rc);
    return d;
}

/* The job as each front end describes it; s must be cleared after. */
static void describe_both(nc_runner_desc *c, NcJobSettings *s, nc_runner_desc *w)
{
    *c = cli_desc();
    workbench_settings(s);
    nc_job_settings_describe_run(s, model, model_path, w);
}

/* Both descriptions plan the same stages, in the same order. */
static void test_same_plan(void)
{
    nc_runner_desc c, w;
    NcJobSettings s;
    describe_both(&c, &s, &w);
    nc_runner *a = NULL, *b = NULL;
    nc_error err = {0};
    NC_CHECK(nc_runner_new(&c, &a, &err) == NC_OK && nc_runner_new(&w, &b, &err) == NC_OK, "%s", err.message);
    if (a && b) {
        NC_CHECK(nc_runner_stage_count(a) == nc_runner_stage_count(b) + 1, "the CLI plans a save stage more");
        for (int i = 0; i < nc_runner_stage_count(b); i++) {
            const nc_run_stage *x = nc_runner_stage(a, i), *y = nc_runner_stage(b, i);
            NC_CHECK(x->kind == y->kind && x->row == y->row && x->mode == y->mode && x->ann == y->ann &&
                         x->qcfs == y->qcfs, "stage %d is the same", i);
        }
        NC_CHECK(nc_runner_eval_T(a) == 4 && nc_runner_eval_T(b) == 4, "rows measured at T = 4");
    }
    nc_runner_free(a);
    nc_runner_free(b);
    nc_job_settings_clear(&s);
}

static void job_done(GObject *source, GAsyncResult *result, gpointer user_data)
{
    GError *error = NULL;
    NC_CHECK(nc_job_run_finish(NC_JOB(source), result, &error), "the job ran: %s", error ? error->message : "");
    g_clear_error(&error);
    *(gboolean *)user_data = TRUE;
}

static NcJob *run_job(const NcJobSettings *s)
{
    NcJob *job = nc_job_new(model, model_path, s);
    gboolean done = FALSE;
    nc_job_run_async(job, NULL, job_done, &done);
    while (!done)
        g_main_context_iteration(NULL, TRUE);
    return job;
}

/* The CLI's runner, the workbench's runner and the real job: one table. */
static void test_same_tables(void)
{
    nc_runner_desc c, w;
    NcJobSettings s;
    describe_both(&c, &s, &w);
    nc_runner *a = run_desc(&c), *b = run_desc(&w);
    NC_CHECK(a && b && nc_runner_row_count(a) == 3, "three rows: converted, QCFS, BPTT");
    NC_CHECK(a && b && same_rows(a, b), "the CLI's and the workbench's descriptions give identical rows");
    NcJob *job = run_job(&s);
    int n = 0;
    const NcStageAccuracy *rows = nc_job_get_stages(job, &n);
    NC_CHECK(b && n == nc_runner_row_count(b), "the job shows every row (%d)", n);
    for (int k = 0; b && k < n && k < nc_runner_row_count(b); k++) {
        const nc_stage_row *x = nc_runner_row(b, k);
        NC_CHECK(strcmp(rows[k].name, x->name) == 0 && same_number(rows[k].ann, x->ann) &&
                     same_number(rows[k].qcfs, x->qcfs) && rows[k].T == x->T && rows[k].snn == x->snn[x->T - 1],
                 "job row %d (%s) equals the runner's", k, x->name);
    }
    g_object_unref(job);
    nc_runner_free(a);
    nc_runner_free(b);
    nc_job_settings_clear(&s);
}

/* --target-T 4 on the command line and Target T 4 in the workbench plan the
 * recipe's stages: QCFS, bias calibration, BPTT, each measured and judged. */
static void test_same_recipe_plan(void)
{
    char *argv[] = {"convert", model_path, "-o", project_path, "--mean", "0.2860", "--std", "0.3530",
                    "--limit", "200", "--target-T", "4", "--time-budget", "2", NULL};
    nc_runner_desc c, w;
    memset(&c, 0, sizeof c);
    optind = 1;
    NC_CHECK(nc_cli_convert_describe((int)(sizeof argv / sizeof argv[0]) - 1, argv, model, &c) == 0, "parses");
    NcJobSettings s;
    workbench_settings(&s);
    s.pipeline.finetune_qcfs_epochs = s.pipeline.finetune_bptt_epochs = 0; /* the recipe decides */
    s.target_T = 4;
    s.time_budget_minutes = 2;
    nc_job_settings_describe_run(&s, model, model_path, &w);
    NC_CHECK(c.keep_best_T == 4 && w.keep_best_T == 4 && c.time_budget == 120 && w.time_budget == 120,
             "both keep the best stage at T = 4 within 2 minutes");
    NC_CHECK(c.pipeline.levels == 4 && w.pipeline.levels == 4 && c.pipeline.calibrate_bias_T == 4 &&
                 w.pipeline.calibrate_bias_T == 4 && w.pipeline.train.distill_alpha == 0.5,
             "L = 4, bias calibration for 4, distillation");
    nc_runner *a = NULL, *b = NULL;
    nc_error err = {0};
    NC_CHECK(nc_runner_new(&c, &a, &err) == NC_OK && nc_runner_new(&w, &b, &err) == NC_OK, "%s", err.message);
    if (a && b) {
        NC_CHECK(nc_runner_stage_count(a) == nc_runner_stage_count(b) + 1, "the CLI plans a save stage more");
        int selects = 0;
        for (int i = 0; i < nc_runner_stage_count(b); i++) {
            const nc_run_stage *x = nc_runner_stage(a, i), *y = nc_runner_stage(b, i);
            NC_CHECK(x->kind == y->kind && x->row == y->row && x->mode == y->mode, "stage %d is the same", i);
            selects += y->kind == NC_RUN_SELECT;
        }
        NC_CHECK(selects == 4, "four rows judged on held-out images (%d)", selects);
    }
    nc_runner_free(a);
    nc_runner_free(b);
    nc_job_settings_clear(&s);
}

/* `run` of a converted net: T = 6, 100 images, batch 25. */
static char *run_argv[] = {"run", project_path, "--mean", "0.2860", "--std", "0.3530", "--limit", "100", "-T", "6",
                           "--batch", "25", NULL};

static nc_net *converted_net(void)
{
    nc_runner_desc d = nc_runner_desc_default();
    d.source = model;
    d.pp.n_mean = d.pp.n_std = 1;
    d.pp.mean[0] = 0.2860f;
    d.pp.std[0] = 0.3530f;
    d.pipeline.calib_images = 200;
    d.dataset = NULL; /* no test split: convert only */
    nc_runner *r = NULL;
    nc_error err = {0};
    nc_dataset *train = NULL;
    nc_status st = nc_dataset_open("fashion-mnist", NC_SPLIT_TRAIN, &d.pp, 200, &train, &err);
    d.train_data = train;
    if (st == NC_OK)
        st = nc_runner_new(&d, &r, &err);
    if (st == NC_OK)
        st = nc_runner_run(r, NULL, &err);
    NC_CHECK(st == NC_OK, "conversion: %s", err.message);
    nc_net *net = st == NC_OK ? nc_net_clone(nc_runner_net(r)) : NULL;
    nc_runner_free(r);
    nc_dataset_free(train);
    return net;
}

/* `neurocuda run` and the workbench simulating one spiking net: one plan
 * (open, a kept measurement) and one row, step by step. */
static void test_run_agrees(void)
{
    nc_net *snn = converted_net();
    if (!snn)
        return;
    nc_runner_desc c, w;
    memset(&c, 0, sizeof c);
    optind = 1;
    int rc = nc_cli_run_describe((int)(sizeof run_argv / sizeof run_argv[0]) - 1, run_argv, snn, &c);
    NC_CHECK(rc == 0, "the run command line parses (exit %d)", rc);
    NcJobSettings s;
    workbench_settings(&s);
    s.pipeline.finetune_qcfs_epochs = s.pipeline.finetune_bptt_epochs = 0; /* a spiking net is simulated */
    s.images = 100;
    s.T = 6;
    s.batch_size = 25;
    nc_job_settings_describe_run(&s, snn, project_path, &w);
    nc_runner *a = rc == 0 ? run_desc(&c) : NULL, *b = run_desc(&w);
    NC_CHECK(a && nc_runner_stage_count(a) == 2 && nc_runner_stage(a, 0)->kind == NC_RUN_OPEN &&
                 nc_runner_stage(a, 1)->kind == NC_RUN_MEASURE && nc_runner_stage(a, 1)->keep,
             "run plans: open, one measurement that keeps its record");
    NC_CHECK(a && b && nc_runner_stage_count(a) == nc_runner_stage_count(b), "the workbench plans the same");
    NC_CHECK(a && nc_runner_row_count(a) == 1 && nc_runner_row(a, 0)->T == 6 && nc_runner_row(a, 0)->images == 100 &&
                 nc_runner_record(a, 0),
             "one row of 100 images at T = 6, its record kept");
    NC_CHECK(a && b && same_rows(a, b), "the CLI's run and the workbench's simulation give identical rows");
    /* the record the CLI prints and saves is the one a plain simulation makes */
    nc_engine *e = NULL;
    nc_dataset *test = NULL;
    nc_record *rec = NULL;
    nc_error err = {0};
    nc_simulate_options so = {.T = 6, .seed = 1, .batch_size = 25};
    nc_status st = nc_engine_new("cpu", &e, &err);
    if (st == NC_OK)
        st = nc_dataset_open("fashion-mnist", NC_SPLIT_TEST, &c.pp, 100, &test, &err);
    if (st == NC_OK)
        st = nc_simulate(e, snn, test, &so, NULL, NULL, &rec, &err);
    NC_CHECK(st == NC_OK && a && nc_runner_record(a, 0), "plain simulation: %s", err.message);
    for (int t = 1; st == NC_OK && a && nc_runner_record(a, 0) && t <= 6; t++)
        NC_CHECK(nc_record_accuracy(rec, t) == nc_record_accuracy(nc_runner_record(a, 0), t) &&
                     nc_record_ann_accuracy(rec) == nc_record_ann_accuracy(nc_runner_record(a, 0)),
                 "step %d: the runner's record equals nc_simulate's", t);
    nc_record_free(rec);
    nc_dataset_free(test);
    nc_engine_free(e);
    nc_runner_free(a);
    nc_runner_free(b);
    nc_job_settings_clear(&s);
    nc_net_free(snn);
}

int main(void)
{
    nc_test_path("assets/models/fmnist_cnn.onnx", model_path, sizeof model_path);
    if (access(model_path, R_OK) != 0 || access("/usr/share/datasets/fashion-mnist", R_OK) != 0) {
        nc_test_report("front ends run one job", 0, "the bundled model or Fashion-MNIST is missing");
        return nc_test_done();
    }
    int fd = mkstemp(project_path);
    if (fd >= 0)
        close(fd);
    model = nc_cli_load_model(model_path);
    NC_RUN(test_same_plan);
    if (model) {
        NC_RUN(test_same_recipe_plan);
        NC_RUN(test_same_tables);
        NC_RUN(test_run_agrees);
    }
    nc_net_free(model);
    unlink(project_path);
    return nc_test_done();
}
