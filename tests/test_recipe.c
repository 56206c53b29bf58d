/* test_recipe.c — the --target-T recipe (sim/nc_recipe.h) and the runner
 * policies it relies on (sim/nc_runner.h: keep_best_T, time_budget):
 *   - the rules: which stages and settings for which net summary and T;
 *   - nc_net_summarise on small nets built here;
 *   - a whole recipe run on a small ANN and synthetic data: every stage is
 *     judged on the held-out images and the job ends holding the best;
 *     each stage's time and accuracies reach the project file;
 *   - each training stage's time plan (sim/nc_budget.h) in a whole run:
 *     the later stages reserved, the share, one epoch when over-full. */
#include "nc_test.h"
#include "nc_test_util.h"
#include "nc_test_runner.h"

#include "../sim/nc_recipe.h"

static nc_recipe plan_for(nc_net_summary s, int T, double minutes)
{
    nc_recipe r;
    nc_error err = {0};
    nc_pipeline_options base = nc_pipeline_options_default();
    base.train.batch_size = 17; /* not the recipe's to decide: kept */
    NC_CHECK(nc_recipe_plan(&s, T, minutes, &base, &r, &err) == NC_OK, "plan: %s", err.message);
    NC_CHECK(r.opts.train.batch_size == 17, "the base's batch is kept");
    return r;
}

static void test_rules_shallow_net(void)
{
    nc_net_summary mlp = {.relu_layers = 2, .weighted = 3};
    nc_recipe r = plan_for(mlp, 4, 0);
    NC_CHECK(r.opts.levels == 4 && r.opts.train.T == 4, "L = train-T = T");
    NC_CHECK(r.opts.method == NC_CALIB_P99 && !r.opts.per_channel, "p99, per layer at T = 4");
    NC_CHECK(r.opts.calibrate_bias_T == 4, "bias calibration for T");
    NC_CHECK(r.opts.finetune_qcfs_epochs == 2 && r.opts.finetune_bptt_epochs == NC_RECIPE_MAX_BPTT_EPOCHS,
             "a shallow net: 2 QCFS epochs, then BPTT");
    NC_CHECK(r.opts.train.distill_alpha == 0.5 && r.opts.train.distill_tau == 2.0, "distillation on");
    NC_CHECK(r.opts.train.learning_rate == 1e-4 && r.opts.train.optimizer == NC_OPTIMIZER_ADAM, "Adam 1e-4");
    NC_CHECK(r.opts.train.rollback == 1, "rollback on: a stage that starts the wrong way goes on from its best");
    NC_CHECK(r.keep_best_T == 4 && r.eval_T == 4, "judged and measured at T");
    NC_CHECK(r.time_budget == 60.0 * NC_RECIPE_DEFAULT_MINUTES, "the default budget");
    NC_CHECK(strstr(r.reasons, "L = 4") && strstr(r.reasons, "threshold p99") && strstr(r.reasons, "per layer"),
             "the reasons name the choices:\n%s", r.reasons);
    r = plan_for(mlp, 16, 2.5);
    NC_CHECK(r.opts.method == NC_CALIB_P99_9 && r.opts.levels == 16, "p99.9 and L = 16 at T = 16");
    NC_CHECK(r.time_budget == 150.0, "2.5 minutes");
}

static void test_rules_deep_nets(void)
{
    nc_net_summary resnet = {.relu_layers = 5, .weighted = 7, .residual = 1, .batchnorm = 1, .avgpools = 1};
    nc_recipe r = plan_for(resnet, 8, 0);
    NC_CHECK(r.opts.per_channel, "a residual net: per-channel thresholds");
    NC_CHECK(r.opts.finetune_qcfs_epochs == NC_RECIPE_MAX_QCFS_EPOCHS, "a residual net: the full QCFS stage");
    NC_CHECK(r.opts.method == NC_CALIB_P99, "p99 at T = 8");
    nc_net_summary vgg = {.relu_layers = 5, .weighted = 6, .batchnorm = 1, .avgpools = 2};
    r = plan_for(vgg, 8, 0);
    NC_CHECK(!r.opts.per_channel && r.opts.finetune_qcfs_epochs == NC_RECIPE_MAX_QCFS_EPOCHS,
             "a deep plain net: per layer, the full QCFS stage");
    nc_net_summary small_bn = {.relu_layers = 2, .weighted = 3, .batchnorm = 1, .maxpools = 2};
    r = plan_for(small_bn, 8, 0);
    NC_CHECK(r.opts.finetune_qcfs_epochs == NC_RECIPE_MAX_QCFS_EPOCHS && r.opts.maxpool == NC_MAXPOOL_PRE_SPIKE,
             "BatchNorm: the full QCFS stage; MaxPool pre-spike");
    NC_CHECK(strstr(r.reasons, "MaxPool pre-spike") != NULL, "the MaxPool rule is explained");
    nc_recipe bad;
    nc_error err = {0};
    NC_CHECK(nc_recipe_plan(&vgg, 0, 0, NULL, &bad, &err) == NC_ERR_ARGUMENT && strstr(err.message, "--target-T"),
             "T = 0 refused: %s", err.message);
}

/* x[1,4,4] → conv → ReLU → add(·, conv) → ReLU → maxpool → flatten → dense → y */
static nc_net *residual_net(void)
{
    nc_net *net = nc_net_new();
    int64_t shape[3] = {1, 4, 4}, ws[4] = {1, 1, 1, 1};
    int x = add_input(net, 3, shape);
    int c1 = add1(net, NC_NODE_CONV2D, "c1", x);
    net->nodes[c1].weight = nc_tensor_new(4, ws);
    int r1 = add_neuron(net, "r1", c1, NC_NEURON_RELU);
    int c2 = add1(net, NC_NODE_CONV2D, "c2", r1);
    net->nodes[c2].weight = nc_tensor_new(4, ws);
    int in[2] = {c2, r1};
    int sum = nc_net_add_node(net, NC_NODE_ADD, "sum", 2, in);
    int r2 = add_neuron(net, "r2", sum, NC_NEURON_RELU);
    int mp = add_pool(net, NC_NODE_MAXPOOL, "mp", r2, 2, 2);
    int fc = add1(net, NC_NODE_DENSE, "fc", add1(net, NC_NODE_FLATTEN, "f", mp));
    int64_t fs[2] = {2, 4};
    net->nodes[fc].weight = nc_tensor_new(2, fs);
    net->output = add1(net, NC_NODE_OUTPUT, "y", fc);
    net->input = x;
    return infer(net) ? net : NULL;
}

static void test_summary(void)
{
    nc_net *net = residual_net();
    NC_CHECK(net != NULL, "net");
    if (!net)
        return;
    nc_net_summary s;
    nc_net_summarise(net, &s);
    NC_CHECK(s.relu_layers == 2 && s.weighted == 3 && s.residual && s.maxpools == 1 && s.avgpools == 0,
             "2 ReLU, 3 weighted, residual, 1 MaxPool");
    NC_CHECK(!s.batchnorm, "no BatchNorm");
    nc_report_add(&net->report, "bn1", "BatchNormalization", 13, NC_SUPPORT_FOLDED, "c1", "folded");
    nc_net_summarise(net, &s);
    NC_CHECK(s.batchnorm, "a folded BatchNormalization in the import report counts");
    NC_CHECK(s.macs > 0, "MACs counted");
    nc_net_free(net);
}

/* ---- a whole recipe run ----------------------------------------------------- */

static int count_stages(const nc_runner *r, nc_run_stage_kind kind)
{
    int n = 0;
    for (int i = 0; i < nc_runner_stage_count(r); i++)
        n += nc_runner_stage(r, i)->kind == kind;
    return n;
}

/* Each row's time is the time of the stage before its measurement, and the
 * project file holds every row's time, held-out and test accuracy. */
static void check_stage_times_and_accuracy(const nc_runner *r)
{
    for (int i = 0; i + 1 < nc_runner_stage_count(r); i++) {
        const nc_run_stage *s = nc_runner_stage(r, i), *next = nc_runner_stage(r, i + 1);
        if (s->kind == NC_RUN_FINETUNE || s->kind == NC_RUN_CALIBRATE_BIAS)
            NC_CHECK(nc_runner_row_seconds(r, next->row) == nc_runner_stage_seconds(r, i),
                     "row %d's time is stage %d's (%s)", next->row, i, s->label);
    }
    nc_project *p = NULL;
    nc_error err = {0};
    NC_CHECK(nc_runner_make_project(r, &p, &err) == NC_OK, "project: %s", err.message);
    static const char *const rows[] = {"converted", "qcfs_finetuned", "bias_calibrated", "bptt_finetuned"};
    static const char *const prefixes[] = {"", "qcfs_finetuned_", "bias_calibrated_", "bptt_finetuned_"};
    for (int k = 0; p && k < 4; k++) {
        char key[96];
        double secs = -1, held = -1, test = -1;
        snprintf(key, sizeof key, "seconds_%s", rows[k]);
        nc_project_get_metric(p, key, &secs);
        snprintf(key, sizeof key, "%sheld_out_accuracy", prefixes[k]);
        nc_project_get_metric(p, key, &held);
        snprintf(key, sizeof key, "%ssnn_accuracy_t4", prefixes[k]);
        nc_project_get_metric(p, key, &test);
        NC_CHECK(secs > 0 && secs == nc_runner_row_seconds(r, k), "seconds_%s %.3f s (the runner's %.3f)", rows[k],
                 secs, nc_runner_row_seconds(r, k));
        NC_CHECK(held == nc_runner_held_out_accuracy(r, k) && test == nc_runner_row(r, k)->snn[3],
                 "%s: held-out %.4f, test %.4f in the project file", rows[k], held, test);
    }
    nc_project_free(p);
}

/* The recipe at T = 4 within `minutes` on the quadrant ANN and its data:
 * 256 images trained on per epoch, 140 held out. */
static nc_runner_desc recipe_job(const nc_net *ann, const nc_dataset *train, const nc_dataset *test, double minutes)
{
    nc_runner_desc d = nc_runner_desc_default();
    d.source = ann;
    /* the project file fingerprints its source: a file stands in for the net built here */
    static char source[512];
    FILE *f = fopen(nc_test_file("quadrant.ann", source, sizeof source), "w");
    NC_CHECK(f && fputs("the quadrant ANN of test_recipe.c\n", f) >= 0 && fclose(f) == 0, "write %s", source);
    d.source_path = source;
    d.dataset = NULL;
    d.train_data = train, d.test_data = test;
    d.held_out = 200;
    d.pipeline.calib_images = 200;
    d.pipeline.bias_calib_images = 100;
    d.pipeline.train.batch_size = 32;
    d.pipeline.train.train_count = 256;
    nc_recipe plan;
    nc_error err = {0};
    NC_CHECK(nc_recipe_describe(ann, 4, minutes, &d, &plan, &err) == NC_OK, "describe: %s", err.message);
    return d;
}

static void test_recipe_run_keeps_the_best(void)
{
    nc_net *ann = quadrant_ann();
    nc_dataset *train = quadrant_dataset(1400, 11), *test = quadrant_dataset(200, 12);
    nc_runner_desc d = recipe_job(ann, train, test, 0.5);
    NC_CHECK(d.keep_best_T == 4 && d.eval_T == 4 && d.time_budget == 30.0, "the plan's policies in the job");
    nc_runner *r = nc_test_run_job(&d, "run");
    NC_CHECK(r != NULL, "the job runs");
    if (r) {
        NC_CHECK(nc_runner_row_count(r) == 4 && count_stages(r, NC_RUN_SELECT) == 4 &&
                     count_stages(r, NC_RUN_CALIBRATE_BIAS) == 1 && count_stages(r, NC_RUN_FINETUNE) == 2,
                 "converted, QCFS, bias calibrated, BPTT: each measured and judged");
        int best = nc_runner_best_row(r), first_best = -1;
        double top = -1;
        for (int k = 0; k < 4; k++) {
            double acc = nc_runner_held_out_accuracy(r, k);
            NC_CHECK(acc >= 0 && acc <= 1, "row %d judged (%.3f)", k, acc);
            printf("# %s: held-out %.3f, test %.3f\n", nc_runner_row(r, k)->name, acc, nc_runner_row(r, k)->snn[3]);
            if (acc > top)
                top = acc, first_best = k;
        }
        NC_CHECK(best == first_best, "the best row is the first with the top held-out accuracy (%d, %d)", best,
                 first_best);
        /* the job's net is that row's: judged again here on the held-out
         * images (those after the 256 trained on), it scores the same */
        nc_engine *e = nc_engine_cpu_new();
        nc_error err = {0};
        double again = -1;
        int64_t held = nc_runner_train_options(r)->val_count;
        NC_CHECK(held == 140, "a tenth of the training images held out (%lld)", (long long)held);
        NC_CHECK(nc_engine_load(e, nc_runner_net(r), &err) == NC_OK &&
                     nc_evaluate_snn_range(e, train, 256, held, 4, 100, &again, &err) == NC_OK,
                 "judge: %s", err.message);
        NC_CHECK(again == top, "the job holds the best net (%.4f = %.4f)", again, top);
        nc_engine_free(e);
        for (int i = 0; i < nc_runner_stage_count(r); i++)
            if (nc_runner_stage(r, i)->kind == NC_RUN_FINETUNE)
                NC_CHECK(nc_runner_stage_seconds(r, i) > 0, "stage %d timed", i);
        check_stage_times_and_accuracy(r);
    }
    nc_runner_free(r);
    free_dataset(train);
    free_dataset(test);
    nc_net_free(ann);
}

/* The time plan of each training stage: QCFS reserves the seven measured or
 * judged stages after it (bias calibration among them) and takes a quarter of
 * the rest, BPTT reserves its own measurement and judgement and takes all; a
 * budget too small for the stages after training runs one epoch each and
 * says so. */
static void test_recipe_budget_plans(void)
{
    nc_net *ann = quadrant_ann();
    nc_dataset *train = quadrant_dataset(1400, 11), *test = quadrant_dataset(200, 12);
    for (int tiny = 0; tiny <= 1; tiny++) {
        nc_runner_desc d = recipe_job(ann, train, test, tiny ? 1e-6 : 0.5);
        nc_runner *r = nc_test_run_job(&d, "run");
        NC_CHECK(r != NULL, "the job runs");
        double total = 0;
        for (int i = 0; r && i < nc_runner_stage_count(r); i++) {
            const nc_run_stage *s = nc_runner_stage(r, i);
            const nc_budget_plan *p = nc_runner_budget_plan(r, i);
            total += nc_runner_stage_seconds(r, i);
            NC_CHECK((s->kind == NC_RUN_FINETUNE) == (p != NULL), "stage %d (%s): a plan iff training", i, s->label);
            if (!p)
                continue;
            int qcfs = s->mode == NC_TRAIN_QCFS;
            printf("# %s: %s\n", qcfs ? "QCFS" : "BPTT", p->reason);
            NC_CHECK(p->later == (qcfs ? 7 : 2) && p->reserve > 0 && p->plain_rate > 0,
                     "%d later stages reserved, %.3f s", p->later, p->reserve);
            NC_CHECK(!qcfs || p->observed_rate > 0, "bias calibration's passes priced (probed)");
            nc_train_result res;
            NC_CHECK(nc_runner_train_result(r, s->mode, &res), "stage %d trained", i);
            if (tiny) {
                NC_CHECK(p->over_full && strstr(p->reason, "first epoch only"), "over-full: %s", p->reason);
                NC_CHECK(res.epochs_run == 1, "one epoch only, ran %d", res.epochs_run);
            } else {
                NC_CHECK(!p->over_full && p->share == (qcfs ? 0.25 : 1.0) && p->seconds <= d.time_budget,
                         "a %s share: %.2f s", qcfs ? "quarter" : "whole", p->seconds);
            }
        }
        if (!tiny)
            NC_CHECK(total <= d.time_budget, "the job within its %.0f s: %.2f s", d.time_budget, total);
        nc_runner_free(r);
    }
    free_dataset(train);
    free_dataset(test);
    nc_net_free(ann);
}

int main(void)
{
    NC_RUN(test_rules_shallow_net);
    NC_RUN(test_rules_deep_nets);
    NC_RUN(test_summary);
    NC_RUN(test_recipe_run_keeps_the_best);
    NC_RUN(test_recipe_budget_plans);
    return nc_test_done();
}
