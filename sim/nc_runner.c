/* nc_runner.c — plans a job's stages and runs them in order (nc_runner.h).
 * The stage kinds are executed by short functions below; the policies are
 * the functions at the top, so that each is written once. */
#include "nc_runner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_engine_registry.h"
#include "nc_evaluate.h"
#include "nc_shard.h"

struct nc_runner {
    nc_runner_desc desc;
    nc_run_stage stages[NC_RUNNER_MAX_STAGES];
    int n_stages;
    int eval_T;
    nc_train_options train;             /* decided once the training split is open */

    nc_engine *engine;                  /* owned unless desc.engine_instance       */
    const nc_dataset *train_set, *test_set; /* the owned ones below, or the caller's */
    nc_dataset *own_train, *own_test;
    const nc_runner_observer *obs;      /* while running: the front end's observer */
    nc_net *net;                        /* the job's net (converted, fine-tuned)   */
    nc_net *calibrated;                 /* a sweep: what each method converts      */
    nc_pipeline_result pipeline;

    int n_rows;
    nc_stage_row rows[NC_RUNNER_MAX_ROWS];
    nc_record *records[NC_RUNNER_MAX_ROWS];
    nc_net *row_nets[NC_RUNNER_MAX_ROWS]; /* a kept row's own clone, or NULL     */
    nc_train_result results[2];
    int trained[2];
    nc_bias_calib_result bias;          /* the calibrate-bias stage's            */
    int bias_done;
    int bias_row;                       /* the row measured after it              */
    double start;                       /* nc_now() when the run began            */
    double stage_seconds[NC_RUNNER_MAX_STAGES];
    nc_budget_plan plans[NC_RUNNER_MAX_STAGES]; /* a training stage's under time_budget */
    int planned[NC_RUNNER_MAX_STAGES];
    double probed_rate;                 /* an observed pass's seconds per image-step (0: not timed) */
    nc_net *best;                       /* keep_best_T: the best net so far       */
    int best_row;
    double best_accuracy;
    double held_out_accuracy[NC_RUNNER_MAX_ROWS];
    int ran;
    int ranks;                          /* devices a measurement and a fine-tuning spread over */
    nc_rank_pool *pool;                 /* ranks > 1: their threads ...           */
    nc_engine *engines[NC_RANKS_MAX];   /* ... and engines ([0] = engine)          */
};

/* ---- policies ------------------------------------------------------------ */

int64_t nc_runner_held_out(int64_t requested, int64_t train_images)
{
    int64_t n = requested < 0 ? NC_RUNNER_DEFAULT_HELD_OUT : requested;
    /* at most a tenth: the rest is what the stage trains on */
    return n < train_images / 10 ? n : train_images / 10;
}

/* A black pixel after the preprocessing (x − mean) / std. */
float nc_runner_crop_fill(const nc_preprocess *pp)
{
    if (!pp || pp->n_std <= 0 || pp->std[0] == 0)
        return 0.0f;
    return (0.0f - (pp->n_mean > 0 ? pp->mean[0] : 0)) / pp->std[0];
}

/* Is there a split to measure on? */
static int has_test_split(const nc_runner_desc *d)
{
    return d->test_data || d->dataset;
}

static int finetunes(const nc_runner_desc *d)
{
    return d->pipeline.finetune_qcfs_epochs > 0 || d->pipeline.finetune_bptt_epochs > 0;
}

static int default_eval_T(const nc_runner_desc *d, int converts)
{
    if (d->eval_T > 0)
        return d->eval_T;
    if (d->keep_records) /* the simulated T: what the front end shows */
        return d->T > 0 ? d->T : 32;
    int changes = finetunes(d) || d->pipeline.calibrate_bias_T > 0;
    return converts && changes ? NC_RUNNER_DEFAULT_FINETUNE_EVAL_T : 0;
}

nc_runner_desc nc_runner_desc_default(void)
{
    nc_runner_desc d = {0};
    d.dataset = "fashion-mnist";
    d.engine = "cpu";
    d.pipeline = nc_pipeline_options_default();
    d.held_out = -1;
    d.seed = 1;
    return d;
}

int nc_runner_is_spiking(const nc_net *net)
{
    for (int i = 0; net && i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        if (n->kind == NC_NODE_NEURON && n->neuron.model != NC_NEURON_RELU && n->neuron.model != NC_NEURON_CLIP &&
            n->neuron.model != NC_NEURON_QCFS)
            return 1;
    }
    return 0;
}

/* ---- the plan ------------------------------------------------------------ */

static nc_run_stage *add(nc_runner *r, nc_run_stage_kind kind, const char *label)
{
    nc_run_stage *s = &r->stages[r->n_stages++];
    *s = (nc_run_stage){.kind = kind, .label = label, .method = -1, .row = -1};
    return s;
}

/* A measurement of the test split (when there is one), then with
 * keep_best_T the held-out judgement of the same net (which may undo it:
 * the row still shows what the stage made). */
static void add_measure(nc_runner *r, int row, int keep, int ann)
{
    if (has_test_split(&r->desc)) {
        nc_run_stage *s = add(r, NC_RUN_MEASURE, keep ? "simulate" : "evaluate");
        s->row = row;
        s->keep = keep;
        s->ann = ann && !r->desc.skip_ann;
        s->qcfs = !r->desc.skip_qcfs;
    }
    if (r->desc.keep_best_T > 0)
        add(r, NC_RUN_SELECT, "select")->row = row;
}

/* convert → measure → [QCFS → measure] → [calibrate-bias → measure] →
 * [BPTT → measure]; with records, the first and the last measurement keep
 * theirs (the before and after of the workbench's comparison).  Bias
 * calibration follows the QCFS stage: that stage retrains the biases for the
 * QCFS-ANN, and the correction is for the SNN the net has become. */
static void plan_conversion(nc_runner *r)
{
    const nc_pipeline_options *p = &r->desc.pipeline;
    int keep = r->desc.keep_records, qcfs = p->finetune_qcfs_epochs > 0, bptt = p->finetune_bptt_epochs > 0;
    int bias = p->calibrate_bias_T > 0;
    add(r, NC_RUN_CONVERT, "convert");
    add_measure(r, 0, keep, 1);
    int row = 1;
    if (qcfs) {
        add(r, NC_RUN_FINETUNE, "finetune")->mode = NC_TRAIN_QCFS;
        add_measure(r, row++, keep && !bias && !bptt, 1);
    }
    if (bias) {
        add(r, NC_RUN_CALIBRATE_BIAS, "calibrate-bias");
        r->bias_row = row;
        /* no ANN row: the ANN reading of corrected biases is not the source ANN */
        add_measure(r, row++, keep && !bptt, 0);
    }
    if (bptt) {
        add(r, NC_RUN_FINETUNE, "finetune")->mode = NC_TRAIN_BPTT;
        add_measure(r, row++, keep, 0); /* no ANN row after BPTT */
    }
}

static void plan(nc_runner *r, int converts)
{
    add(r, NC_RUN_OPEN, "load");
    if (!converts)
        add_measure(r, 0, r->desc.keep_records, 1);
    else if (r->desc.n_methods > 0) {
        add(r, NC_RUN_CALIBRATE, "calibrate");
        for (int k = 0; k < r->desc.n_methods; k++) {
            add(r, NC_RUN_CONVERT, "convert")->method = k;
            add_measure(r, k, 0, 1);
        }
    } else {
        add(r, NC_RUN_CALIBRATE, "calibrate");
        plan_conversion(r);
    }
    if (r->desc.output)
        add(r, NC_RUN_SAVE, "save");
}

nc_status nc_runner_new(const nc_runner_desc *desc, nc_runner **out, nc_error *err)
{
    *out = NULL;
    if (!desc || !desc->source)
        return nc_fail(err, NC_ERR_ARGUMENT, "nc_runner_new: no description or no network to run");
    if (desc->n_methods < 0 || desc->n_methods > NC_RUNNER_MAX_ROWS)
        return nc_fail(err, NC_ERR_ARGUMENT, "a sweep compares 1 to %d threshold methods, not %d",
                       NC_RUNNER_MAX_ROWS, desc->n_methods);
    int spiking = nc_runner_is_spiking(desc->source), converts = !spiking && !desc->measure_only;
    if (!converts && (finetunes(desc) || desc->n_methods > 0))
        return nc_fail(err, NC_ERR_ARGUMENT, spiking ? "the network is already spiking: it cannot be calibrated, "
                                                       "swept or fine-tuned; simulate it as it is"
                                                     : "a measure-only job converts nothing: it cannot be swept "
                                                       "or fine-tuned");
    if ((desc->pipeline.calibrate_bias_T > 0 || desc->keep_best_T > 0) && (!converts || desc->n_methods > 0))
        return nc_fail(err, NC_ERR_ARGUMENT, "bias calibration and keeping the best stage work on one conversion: "
                                             "not a spiking network as it is, and not a sweep of threshold methods");
    int ranks = 1;
    nc_status st = nc_ranks_for(desc->engine, desc->engine_settings, desc->ranks, &ranks, err);
    if (st != NC_OK)
        return st;
    nc_runner *r = calloc(1, sizeof *r);
    if (!r)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for the pipeline runner");
    r->desc = *desc;
    r->ranks = ranks;
    if (!r->desc.engine)
        r->desc.engine = "cpu";
    if (r->desc.batch_size <= 0)
        r->desc.batch_size = r->desc.pipeline.batch_size;
    r->eval_T = default_eval_T(&r->desc, converts);
    for (int k = 0; k < NC_RUNNER_MAX_ROWS; k++)
        r->held_out_accuracy[k] = -1;
    r->train = r->desc.pipeline.train;
    plan(r, converts);
    *out = r;
    return NC_OK;
}

void nc_runner_free(nc_runner *r)
{
    if (!r)
        return;
    for (int i = 0; i < NC_RUNNER_MAX_ROWS; i++) {
        nc_record_free(r->records[i]); /* a record points into its net: first */
        nc_net_free(r->row_nets[i]);
        free(r->rows[i].snn);
    }
    if (r->pool)
        nc_shard_engines_free(r->pool, r->engines);
    nc_rank_pool_free(r->pool);
    if (r->engine != r->desc.engine_instance)
        nc_engine_free(r->engine);
    nc_dataset_free(r->own_train);
    nc_dataset_free(r->own_test);
    nc_net_free(r->net);
    nc_net_free(r->calibrated);
    nc_pipeline_result_clear(&r->pipeline);
    nc_bias_calib_result_clear(&r->bias);
    nc_net_free(r->best);
    free(r);
}

/* ---- the stages ------------------------------------------------------------ */

/* A split: the caller's dataset for it, else opened from desc.dataset. */
static nc_status open_split(nc_runner *r, nc_split split, int64_t limit, nc_error *err)
{
    const nc_dataset *given = split == NC_SPLIT_TRAIN ? r->desc.train_data : r->desc.test_data;
    const nc_dataset **set = split == NC_SPLIT_TRAIN ? &r->train_set : &r->test_set;
    nc_dataset **own = split == NC_SPLIT_TRAIN ? &r->own_train : &r->own_test;
    if (given) {
        *set = given;
        return NC_OK;
    }
    if (!r->desc.dataset)
        return nc_fail(err, NC_ERR_ARGUMENT, "no %s data: give a dataset", split == NC_SPLIT_TRAIN ? "training" : "test");
    nc_status st = nc_dataset_open(r->desc.dataset, split, &r->desc.pp, limit, own, err);
    if (st != NC_OK)
        nc_error_prefix(err, "dataset '%s'", r->desc.dataset);
    *set = *own;
    return st;
}

/* The trainer's options, once the training split's size is known. */
static void decide_training(nc_runner *r)
{
    nc_train_options *t = &r->train;
    if (!t->engine) /* the trainer follows the engine unless told */
        t->engine = strcmp(r->desc.engine, "gpu") == 0 ? "gpu" : "cpu";
    t->crop_fill = nc_runner_crop_fill(&r->desc.pp);
    if (t->distill_alpha > 0 && !t->teacher) /* the teacher is the ANN the job converts */
        t->teacher = r->desc.source;
    if (r->train_set && finetunes(&r->desc))
        t->val_count = nc_runner_held_out(r->desc.held_out, r->train_set->count);
    t->ranks = r->ranks;
}

/* The engine, and with several ranks one more per rank on its own device
 * (sim/nc_shard.h); rank 0's is the job's engine. */
static nc_status make_engine(nc_runner *r, nc_error *err)
{
    nc_status st = NC_OK;
    if (r->desc.engine_instance)
        r->engine = r->desc.engine_instance;
    else if ((st = nc_engine_new_with(r->desc.engine, r->desc.engine_settings, &r->engine, err)) == NC_OK &&
             r->desc.threads > 0) /* else the engine's own setting (--engine-opt threads=N) holds */
        r->engine->threads = r->desc.threads;
    if (st == NC_OK && r->ranks > 1)
        st = nc_rank_pool_new(r->desc.engine, r->ranks, &r->pool, err);
    if (st == NC_OK && r->pool)
        st = nc_shard_engines_new(r->pool, r->desc.engine, r->desc.engine_settings, r->desc.threads, r->engine,
                                  r->engines, err);
    return st;
}

/* Training images the job reads: all when fine-tuning, else those that
 * calibration and bias calibration (with its check) read. */
static int64_t train_images_needed(const nc_runner_desc *d)
{
    if (finetunes(d))
        return 0;
    const nc_pipeline_options *p = &d->pipeline;
    int64_t n = p->calib_images;
    if (p->calibrate_bias_T > 0) {
        int64_t bias = (p->bias_calib_images > 0 ? p->bias_calib_images : NC_BIAS_CALIB_DEFAULT_IMAGES) +
                       NC_RUNNER_BIAS_CHECK_IMAGES;
        n = bias > n ? bias : n;
    }
    return n;
}

/* Calibration reads the first calib_images training images; fine-tuning
 * reads them all. */
static nc_status run_open(nc_runner *r, nc_error *err)
{
    r->net = nc_net_clone(r->desc.source);
    if (!r->net)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for a copy of the network");
    nc_status st = NC_OK;
    if (r->stages[1].kind == NC_RUN_CALIBRATE)
        st = open_split(r, NC_SPLIT_TRAIN, train_images_needed(&r->desc), err);
    if (st == NC_OK && r->train_set)
        st = nc_check_dataset_fits(r->net, r->train_set, err);
    if (st == NC_OK && has_test_split(&r->desc))
        st = open_split(r, NC_SPLIT_TEST, r->desc.test_images, err);
    if (st == NC_OK && r->test_set)
        st = nc_check_dataset_fits(r->net, r->test_set, err);
    if (st == NC_OK)
        st = make_engine(r, err);
    if (st == NC_OK)
        st = nc_engine_load(r->engine, r->net, err);
    decide_training(r);
    return st;
}

static nc_status run_calibrate(nc_runner *r, const nc_runner_observer *obs, nc_error *err)
{
    nc_status st = nc_pipeline_calibrate(r->engine, r->net, r->train_set, &r->desc.pipeline, obs->progress, obs->user,
                                         &r->pipeline, err);
    if (st == NC_OK && r->desc.n_methods > 0) { /* each method converts a clone of this */
        r->calibrated = r->net;
        r->net = NULL;
    }
    return st;
}

static nc_status run_convert(nc_runner *r, const nc_run_stage *s, nc_error *err)
{
    nc_pipeline_options o = r->desc.pipeline;
    if (s->method >= 0) {
        nc_net_free(r->net);
        r->net = nc_net_clone(r->calibrated);
        if (!r->net)
            return nc_fail(err, NC_ERR_MEMORY, "out of memory for a copy of the network");
        o.method = r->desc.methods[s->method];
    }
    nc_status st = nc_pipeline_finish(r->net, &o, &r->pipeline, err);
    /* loaded explicitly: a new clone may reuse a freed clone's address */
    return st == NC_OK ? nc_engine_load(r->engine, r->net, err) : st;
}

/* keep_best_T: judges the net on the held-out images; the best so far is
 * kept (a clone), a worse net is replaced by it. */
static nc_status run_select(nc_runner *r, const nc_run_stage *s, nc_error *err)
{
    int64_t held = r->train.val_count;
    if (held <= 0 || !r->train_set) /* nothing held out: every stage is kept */
        return NC_OK;
    /* the images the trainer holds out: after those it trains on (nc_train) */
    int64_t first = r->train_set->count - held;
    if (r->train.train_count > 0 && r->train.train_count < first)
        first = r->train.train_count;
    double acc = -1;
    nc_status st = nc_evaluate_snn_range(r->engine, r->train_set, first, held, r->desc.keep_best_T,
                                         r->desc.batch_size, &acc, err);
    if (st != NC_OK)
        return st;
    r->held_out_accuracy[s->row] = acc;
    if (!r->best || acc > r->best_accuracy) {
        nc_net_free(r->best);
        r->best = nc_net_clone(r->net);
        r->best_row = s->row;
        r->best_accuracy = acc;
        return r->best ? NC_OK : nc_fail(err, NC_ERR_MEMORY, "out of memory for a copy of the best network");
    }
    nc_net *back = nc_net_clone(r->best);
    if (!back)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for a copy of the best network");
    nc_net_free(r->net);
    r->net = back;
    return nc_engine_load(r->engine, r->net, err);
}

/* The options of the calibrate-bias stage: its images, and the check on
 * the next images (at least half of the split is left for it). */
static nc_bias_calib_options bias_options(const nc_runner *r, const nc_runner_observer *obs)
{
    const nc_pipeline_options *p = &r->desc.pipeline;
    nc_bias_calib_options o = {.T = p->calibrate_bias_T, .images = p->bias_calib_images,
                               .batch_size = r->desc.batch_size, .progress = obs ? obs->progress : NULL,
                               .progress_user = obs ? obs->user : NULL};
    int64_t count = r->train_set->count, images = o.images > 0 ? o.images : NC_BIAS_CALIB_DEFAULT_IMAGES;
    if (images > count / 2)
        images = o.images = count / 2;
    o.check_first = images;
    o.check_count = count - images < NC_RUNNER_BIAS_CHECK_IMAGES ? count - images : NC_RUNNER_BIAS_CHECK_IMAGES;
    return o;
}

/* Stage i as the time plan sees it (sim/nc_budget.h): its weight in the
 * training share, the image-steps it does, its seconds once it ran.  A QCFS
 * epoch is one pass forward and back, a BPTT epoch T of them, and the QCFS
 * stage recovers most of what it can in a few epochs: weights 1 and 3 give it
 * a quarter when BPTT follows. */
static nc_budget_stage budget_stage(const nc_runner *r, int i, int ran)
{
    const nc_run_stage *s = &r->stages[i];
    nc_budget_stage b = {.label = s->label, .seconds = ran ? r->stage_seconds[i] : -1};
    int64_t held = r->train.val_count, tests = r->test_set ? r->test_set->count : 0;
    switch (s->kind) {
    case NC_RUN_FINETUNE: b.train_weight = s->mode == NC_TRAIN_QCFS ? 1 : 3; break;
    case NC_RUN_MEASURE:
        b.plain_steps = (double)tests * (r->eval_T + s->ann + s->qcfs); /* an ANN or QCFS pass: one step */
        break;
    case NC_RUN_SELECT:
        b.plain_steps = held > 0 && r->train_set ? (double)held * r->desc.keep_best_T : 0;
        break;
    case NC_RUN_CALIBRATE_BIAS: {
        nc_bias_calib_options o = bias_options(r, NULL);
        nc_bias_calib_work(r->net, &o, r->train_set->count, &b.observed_steps, &b.plain_steps);
        b.plain_like = "select"; /* its check is a held-out judgement (nc_evaluate_snn_range) */
        break;
    }
    default: break; /* before any training (load, calibrate, convert), or a file written (save) */
    }
    return b;
}

/* With desc.time_budget: training stage `stage`'s plan (r->plans).  A
 * bias calibration still to come and none measured yet: its kind of pass is
 * timed on one batch first. */
static nc_status plan_budget(nc_runner *r, int stage, nc_error *err)
{
    nc_budget_stage stages[NC_RUNNER_MAX_STAGES];
    int observed_later = 0;
    for (int i = 0; i < r->n_stages; i++) {
        stages[i] = budget_stage(r, i, i < stage);
        observed_later |= i > stage && stages[i].observed_steps > 0;
    }
    if (observed_later && r->probed_rate <= 0) {
        nc_bias_calib_options o = bias_options(r, NULL);
        nc_status st = nc_bias_calib_pass_rate(r->engine, r->net, r->train_set, &o, &r->probed_rate, err);
        if (st != NC_OK) {
            nc_error_prefix(err, "timing a pass of bias calibration for the time budget");
            return st;
        }
    }
    nc_budget_plan_training(stages, r->n_stages, stage, r->desc.time_budget, nc_now() - r->start, r->probed_rate,
                            &r->plans[stage]);
    r->planned[stage] = 1;
    return NC_OK;
}

static nc_status run_finetune(nc_runner *r, const nc_run_stage *s, const nc_runner_observer *obs, nc_error *err)
{
    nc_pipeline_options o = r->desc.pipeline;
    o.train = r->train;
    o.train.progress = obs->train_progress;
    o.train.progress_user = obs->user;
    int stage = (int)(s - r->stages);
    o.train.time_budget = r->planned[stage] ? r->plans[stage].seconds : 0;
    nc_train_result res;
    nc_status st = nc_pipeline_finetune(r->net, s->mode, r->train_set, &o, &res, err);
    if (st == NC_OK) {
        r->results[s->mode] = res;
        r->trained[s->mode] = 1;
        st = nc_engine_load(r->engine, r->net, err); /* the new weights */
    }
    return st;
}

static nc_status run_calibrate_bias(nc_runner *r, const nc_runner_observer *obs, nc_error *err)
{
    nc_bias_calib_options o = bias_options(r, obs);
    nc_bias_calib_result_clear(&r->bias);
    nc_status st = nc_bias_calibrate(r->engine, r->net, r->train_set, &o, &r->bias, err);
    r->bias_done = st == NC_OK;
    return st;
}


static nc_status notify(nc_runner *r, const nc_runner_observer *obs, int i, nc_runner_event ev, nc_error *err)
{
    return obs->event ? obs->event(obs->user, r, &r->stages[i], ev, err) : NC_OK;
}

/* Does a later stage change the net in place (fine-tuning, bias calibration)? */
static int changed_later(const nc_runner *r, int stage)
{
    for (int i = stage + 1; i < r->n_stages; i++)
        if (r->stages[i].kind == NC_RUN_FINETUNE || r->stages[i].kind == NC_RUN_CALIBRATE_BIAS)
            return 1;
    return 0;
}

static const char *row_name(const nc_runner *r, const nc_run_stage *s, char *buf, size_t size)
{
    if (s->row > 0 && r->desc.n_methods == 0) { /* after a fine-tuning or bias calibration stage */
        const nc_run_stage *ft = s - 1;
        if (ft->kind == NC_RUN_CALIBRATE_BIAS)
            return "bias calibrated";
        return ft->mode == NC_TRAIN_QCFS ? "QCFS fine-tuned" : "BPTT fine-tuned";
    }
    if (r->desc.n_methods > 0) {
        snprintf(buf, size, "%s%s", nc_calib_method_name(r->desc.methods[s->row]),
                 r->desc.pipeline.per_channel ? " (channel)" : "");
        return buf;
    }
    if (r->stages[1].kind == NC_RUN_CALIBRATE)
        return "converted";
    return r->desc.measure_only && !nc_runner_is_spiking(r->desc.source) ? "evaluated" : "simulated";
}

static void begin_row(nc_runner *r, const nc_run_stage *s)
{
    char buf[32];
    nc_stage_row *row = &r->rows[s->row];
    free(row->snn);
    *row = (nc_stage_row){.ann = NAN, .qcfs = NAN};
    snprintf(row->name, sizeof row->name, "%s", row_name(r, s, buf, sizeof buf));
    if (r->n_rows <= s->row)
        r->n_rows = s->row + 1;
}

/* The row from the record's finished batches. */
static nc_status fill_row(nc_stage_row *row, const nc_record *rec, const nc_run_stage *s, nc_error *err)
{
    int64_t n = nc_record_samples(rec);
    if (n == 0)
        return NC_OK;
    row->images = n;
    row->ann = s->ann ? nc_record_ann_accuracy(rec) : NAN;
    row->qcfs = s->qcfs ? nc_record_qcfs_accuracy(rec) : NAN;
    int T = nc_record_T(rec);
    row->snn = malloc((size_t)T * sizeof *row->snn);
    if (!row->snn)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for the accuracy by step");
    row->T = T;
    for (int t = 1; t <= T; t++)
        row->snn[t - 1] = nc_record_accuracy(rec, t);
    return NC_OK;
}

/* The test split in one mode, over the ranks when there are several. */
static nc_status evaluate(nc_runner *r, nc_mode mode, const nc_runner_observer *obs, nc_eval_result *res,
                          nc_error *err)
{
    if (r->pool)
        return nc_evaluate_sharded(r->pool, r->engines, r->test_set, r->desc.batch_size, mode, obs->progress,
                                   obs->user, res, err);
    return nc_evaluate(r->engine, r->test_set, r->desc.batch_size, mode, obs->progress, obs->user, res, err);
}

/* No SNN steps asked for: the ANN and QCFS-ANN accuracy only. */
static nc_status evaluate_row(nc_runner *r, const nc_run_stage *s, const nc_runner_observer *obs, nc_error *err)
{
    nc_stage_row *row = &r->rows[s->row];
    nc_eval_result res = {0};
    nc_status st = r->pool ? nc_shard_engines_load(r->pool, r->engines, r->engine->net, err) : NC_OK;
    if (st == NC_OK && s->ann && (st = evaluate(r, NC_MODE_ANN, obs, &res, err)) == NC_OK) {
        row->ann = res.accuracy;
        row->ann_correct = res.correct;
        row->ann_images_per_second = res.images_per_second;
    }
    if (st == NC_OK && s->qcfs && (st = evaluate(r, NC_MODE_QCFS, obs, &res, err)) == NC_OK)
        row->qcfs = res.accuracy;
    row->images = r->test_set->count;
    return st;
}

/* One row: the net simulated on the test split over eval_T steps into a
 * record (the ANN and QCFS-ANN passes with it). */
static nc_status run_measure(nc_runner *r, int stage, const nc_runner_observer *obs, nc_error *err)
{
    const nc_run_stage *s = &r->stages[stage];
    begin_row(r, s);
    const nc_net *net = r->net;
    if (s->keep && changed_later(r, stage)) { /* the record must keep the net it read */
        net = r->row_nets[s->row] = nc_net_clone(r->net);
        if (!net)
            return nc_fail(err, NC_ERR_MEMORY, "out of memory for a copy of the network");
    }
    nc_status st = nc_engine_load(r->engine, net, err);
    if (st != NC_OK || r->eval_T == 0)
        return st == NC_OK ? evaluate_row(r, s, obs, err) : st;
    nc_simulate_options so = {.T = r->eval_T, .encoding = r->desc.encoding, .seed = r->desc.seed,
                              .limit = r->test_set->count, .batch_size = r->desc.batch_size,
                              .skip_ann = !s->ann, .skip_qcfs = !s->qcfs};
    if (s->keep)
        so.record = r->desc.record;
    else /* nobody reads its layers: the accuracies alone, with no observer (the engine's fastest path) */
        so.record.layers = NC_RECORD_NONE;
    st = nc_record_new(net, so.T, &so.record, &r->records[s->row], err);
    if (st == NC_OK)
        st = notify(r, obs, stage, NC_RUNNER_RECORD_READY, err);
    if (st == NC_OK)
        st = r->pool ? nc_simulate_sharded(r->pool, r->engines, r->test_set, &so, obs->progress, obs->user,
                                           r->records[s->row], err)
                     : nc_simulate_into(r->engine, r->test_set, &so, obs->progress, obs->user, r->records[s->row], err);
    nc_status filled = r->records[s->row] ? fill_row(&r->rows[s->row], r->records[s->row], s, err) : NC_OK;
    if (!s->keep) {
        nc_record_free(r->records[s->row]);
        r->records[s->row] = NULL;
    }
    return st != NC_OK ? st : filled;
}

/* ---- saving ----------------------------------------------------------------------- */

static void store_metric(nc_project *p, const char *prefix, const char *name, double value)
{
    char key[96];
    nc_error ignored = {0};
    snprintf(key, sizeof key, "%s%s", prefix, name);
    if (!isnan(value))
        nc_project_set_metric(p, key, value, &ignored);
}

static void store_row(nc_project *p, const char *prefix, const nc_stage_row *row)
{
    store_metric(p, prefix, "ann_accuracy", row->ann);
    store_metric(p, prefix, "qcfs_accuracy", row->qcfs);
    for (int t = 1; t <= row->T; t++) {
        char name[48];
        snprintf(name, sizeof name, "snn_accuracy_t%d", t);
        store_metric(p, prefix, name, row->snn[t - 1]);
    }
}

/* The metric prefix of a row ("" for the converted or simulated net). */
static const char *row_prefix(const char *name)
{
    return strcmp(name, "QCFS fine-tuned") == 0   ? "qcfs_finetuned_"
           : strcmp(name, "BPTT fine-tuned") == 0 ? "bptt_finetuned_"
           : strcmp(name, "bias calibrated") == 0 ? "bias_calibrated_"
                                                  : "";
}

void nc_runner_store_rows(nc_project *p, const nc_stage_row *rows, int n)
{
    for (int k = 0; k < n; k++)
        store_row(p, row_prefix(rows[k].name), &rows[k]);
    if (n > 1) /* the final network's accuracies under plain names too, for readers */
        store_row(p, "final_", &rows[n - 1]);
}

/* The bias corrections as per-layer statistics "bias_correction" (only
 * when the saved net holds them), the layer errors before and after as
 * "bias_error" [before, after], and the settings and check as metrics. */
static nc_status store_bias(nc_project *p, const nc_runner *r, nc_error *err)
{
    const nc_bias_calib_result *b = &r->bias;
    const nc_net *net = r->net;
    /* a later select may have gone back to the net from before the corrections */
    int holds = b->kept && !(r->best && r->best_row < r->bias_row);
    nc_status st = NC_OK;
    for (int l = 0; l < b->n_layers && st == NC_OK; l++) {
        const nc_bias_layer *bl = &b->layers[l];
        const char *name = net->nodes[bl->node].name;
        int64_t shape[1] = {bl->channels}, two[1] = {2};
        float errors[2] = {(float)bl->error_before, (float)bl->error_after};
        if (holds && bl->carrier >= 0)
            st = nc_project_add_stat(p, name, "bias_correction", 1, shape, bl->delta, err);
        if (st == NC_OK)
            st = nc_project_add_stat(p, name, "bias_error", 1, two, errors, err);
    }
    store_metric(p, "", "bias_calibration_T", b->T);
    store_metric(p, "", "bias_calibration_images", (double)b->images);
    store_metric(p, "", "bias_calibration_kept", holds);
    if (b->check_before >= 0) {
        store_metric(p, "", "bias_calibration_check_before", b->check_before);
        store_metric(p, "", "bias_calibration_check_after", b->check_after);
    }
    return st;
}

/* "seconds_<label>": the time of each kind of stage, summed; and the
 * whole job's. */
static void store_stage_times(const nc_runner *r, nc_project *p)
{
    double total = 0;
    for (int i = 0; i < r->n_stages; i++) {
        double sum = 0;
        int first = 1;
        for (int k = 0; k < r->n_stages; k++) {
            if (strcmp(r->stages[k].label, r->stages[i].label) == 0) {
                first &= k >= i;
                sum += r->stage_seconds[k];
            }
        }
        if (first && sum > 0) {
            char name[64];
            snprintf(name, sizeof name, "seconds_%s", r->stages[i].label);
            store_metric(p, "", name, sum);
        }
        total += r->stage_seconds[i];
    }
    if (total > 0)
        store_metric(p, "", "seconds_total", total);
}

/* Each row's own time ("seconds_converted", "seconds_bptt_finetuned", …) and,
 * when the rows were judged, its held-out accuracy. */
static void store_row_times(const nc_runner *r, nc_project *p)
{
    for (int k = 0; k < r->n_rows; k++) {
        const char *prefix = row_prefix(r->rows[k].name);
        char name[64];
        if (prefix[0]) /* the prefix without its final '_' */
            snprintf(name, sizeof name, "seconds_%.*s", (int)strlen(prefix) - 1, prefix);
        else
            snprintf(name, sizeof name, "seconds_converted");
        if (nc_runner_row_seconds(r, k) > 0)
            store_metric(p, "", name, nc_runner_row_seconds(r, k));
        if (r->held_out_accuracy[k] >= 0)
            store_metric(p, prefix, "held_out_accuracy", r->held_out_accuracy[k]);
    }
}

nc_status nc_runner_make_project(const nc_runner *r, nc_project **out, nc_error *err)
{
    *out = NULL;
    const nc_pipeline_options *o = &r->desc.pipeline;
    if (!r->net)
        return nc_fail(err, NC_ERR_ARGUMENT, "the job has no network yet");
    nc_net *net = nc_net_clone(r->net);
    if (!net)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for a copy of the network");
    nc_project *p = NULL; /* takes the net, also when it fails */
    nc_status st = nc_pipeline_make_project(net, r->desc.source_path, &r->desc.pp, o, &r->pipeline, &p, err);
    if (st != NC_OK)
        return st;
    nc_runner_store_rows(p, r->rows, r->n_rows);
    if (r->best && r->best_row >= 0 && r->best_row < r->n_rows - 1) /* an undone last stage: final_ is the kept one */
        store_row(p, "final_", &r->rows[r->best_row]);
    if (finetunes(&r->desc) || o->calibrate_bias_T > 0) /* a plain conversion's file stays as it was */
        store_stage_times(r, p);
    if ((finetunes(&r->desc) || o->calibrate_bias_T > 0) && r->desc.n_methods == 0) /* one row per stage */
        store_row_times(r, p);
    if (r->test_set)
        store_metric(p, "", "test_images", (double)r->test_set->count);
    store_metric(p, "", "finetune_qcfs_epochs", o->finetune_qcfs_epochs);
    store_metric(p, "", "finetune_bptt_epochs", o->finetune_bptt_epochs);
    if (o->finetune_qcfs_epochs > 0)
        store_metric(p, "", "finetune_qcfs_seconds", r->results[NC_TRAIN_QCFS].seconds);
    if (o->finetune_bptt_epochs > 0) {
        store_metric(p, "", "finetune_bptt_seconds", r->results[NC_TRAIN_BPTT].seconds);
        store_metric(p, "", "finetune_train_T", o->train.T);
    }
    if (finetunes(&r->desc) && r->train.distill_alpha > 0) {
        store_metric(p, "", "finetune_distill_alpha", r->train.distill_alpha);
        store_metric(p, "", "finetune_distill_tau",
                     r->train.distill_tau > 0 ? r->train.distill_tau : NC_TRAIN_DEFAULT_TAU);
    }
    if (st == NC_OK && r->bias_done)
        st = store_bias(p, r, err);
    if (st != NC_OK) {
        nc_project_free(p);
        return st;
    }
    *out = p;
    return NC_OK;
}

static nc_status run_save(nc_runner *r, nc_error *err)
{
    nc_project *p = NULL;
    nc_status st = nc_runner_make_project(r, &p, err);
    if (st == NC_OK)
        st = nc_project_save(p, r->desc.output, err);
    nc_project_free(p); /* frees the net too */
    return st;
}

static nc_status run_stage(nc_runner *r, int i, const nc_runner_observer *obs, nc_error *err)
{
    const nc_run_stage *s = &r->stages[i];
    switch (s->kind) {
    case NC_RUN_OPEN: return run_open(r, err);
    case NC_RUN_CALIBRATE: return run_calibrate(r, obs, err);
    case NC_RUN_CONVERT: return run_convert(r, s, err);
    case NC_RUN_MEASURE: return run_measure(r, i, obs, err);
    case NC_RUN_FINETUNE: return run_finetune(r, s, obs, err);
    case NC_RUN_CALIBRATE_BIAS: return run_calibrate_bias(r, obs, err);
    case NC_RUN_SELECT: return run_select(r, s, err);
    case NC_RUN_SAVE: return run_save(r, err);
    }
    return nc_fail(err, NC_ERR_ARGUMENT, "unknown stage kind %d", (int)s->kind);
}

/* A failed stream (nc_dataset.h) stops the job: its message wins over the
 * cancel that the progress hooks below turned it into. */
static nc_status stream_failure(const nc_runner *r, nc_error *err)
{
    nc_status st = nc_dataset_stream_status(r->train_set, err);
    return st != NC_OK ? st : nc_dataset_stream_status(r->test_set, err);
}

static int on_progress(void *user, const nc_progress *p)
{
    nc_runner *r = user;
    if (stream_failure(r, NULL) != NC_OK)
        return 1;
    return r->obs->progress ? r->obs->progress(r->obs->user, p) : 0;
}

static int on_train_progress(void *user, const nc_train_progress *p)
{
    nc_runner *r = user;
    if (stream_failure(r, NULL) != NC_OK)
        return 1;
    return r->obs->train_progress ? r->obs->train_progress(r->obs->user, p) : 0;
}

static nc_status on_event(void *user, nc_runner *r, const nc_run_stage *stage, nc_runner_event ev, nc_error *err)
{
    (void)user;
    return r->obs->event ? r->obs->event(r->obs->user, r, stage, ev, err) : NC_OK;
}

nc_status nc_runner_run(nc_runner *r, const nc_runner_observer *obs, nc_error *err)
{
    if (!r || r->ran)
        return nc_fail(err, NC_ERR_ARGUMENT, "nc_runner_run: no runner, or it ran already");
    r->ran = 1;
    nc_runner_observer none = {0};
    r->obs = obs ? obs : &none;
    r->start = nc_now();
    /* the stages see the runner's hooks, which check the streams first */
    nc_runner_observer hooks = {.user = r, .progress = on_progress, .train_progress = on_train_progress,
                                .event = on_event};
    nc_status st = NC_OK;
    for (int i = 0; i < r->n_stages && st == NC_OK; i++) {
        double began = nc_now();
        /* a training stage's time plan is made before its begin event, which may show it */
        if (r->stages[i].kind == NC_RUN_FINETUNE && r->desc.time_budget > 0)
            st = plan_budget(r, i, err);
        if (st == NC_OK)
            st = notify(r, &hooks, i, NC_RUNNER_STAGE_BEGIN, err);
        if (st == NC_OK)
            st = run_stage(r, i, &hooks, err);
        r->stage_seconds[i] = nc_now() - began;
        if (st == NC_OK || st == NC_ERR_CANCELLED) {
            nc_status failed = stream_failure(r, err);
            st = failed != NC_OK ? failed : st;
        }
        if (st == NC_OK)
            st = notify(r, &hooks, i, NC_RUNNER_STAGE_END, err);
    }
    r->obs = NULL;
    return st;
}

/* ---- results ------------------------------------------------------------------ */

int nc_runner_stage_count(const nc_runner *r) { return r->n_stages; }
const nc_run_stage *nc_runner_stage(const nc_runner *r, int i)
{
    return i >= 0 && i < r->n_stages ? &r->stages[i] : NULL;
}
const nc_runner_desc *nc_runner_get_desc(const nc_runner *r) { return &r->desc; }
int nc_runner_row_count(const nc_runner *r) { return r->n_rows; }
const nc_stage_row *nc_runner_row(const nc_runner *r, int row)
{
    return row >= 0 && row < r->n_rows ? &r->rows[row] : NULL;
}
const nc_record *nc_runner_record(const nc_runner *r, int row)
{
    return row >= 0 && row < r->n_rows ? r->records[row] : NULL;
}
const nc_net *nc_runner_row_net(const nc_runner *r, int row)
{
    if (row < 0 || row >= r->n_rows)
        return NULL;
    return r->row_nets[row] ? r->row_nets[row] : r->net;
}
const nc_net *nc_runner_net(const nc_runner *r) { return r->net; }
const nc_pipeline_result *nc_runner_pipeline_result(const nc_runner *r) { return &r->pipeline; }
int nc_runner_train_result(const nc_runner *r, nc_train_mode mode, nc_train_result *out)
{
    if ((int)mode < 0 || (int)mode > 1 || !r->trained[mode])
        return 0;
    *out = r->results[mode];
    return 1;
}
const nc_train_options *nc_runner_train_options(const nc_runner *r) { return &r->train; }
const nc_bias_calib_result *nc_runner_bias_result(const nc_runner *r) { return r->bias_done ? &r->bias : NULL; }
double nc_runner_stage_seconds(const nc_runner *r, int i)
{
    return i >= 0 && i < r->n_stages ? r->stage_seconds[i] : 0;
}
const nc_budget_plan *nc_runner_budget_plan(const nc_runner *r, int i)
{
    return i >= 0 && i < r->n_stages && r->planned[i] ? &r->plans[i] : NULL;
}
double nc_runner_row_seconds(const nc_runner *r, int row)
{
    double sum = 0;
    for (int i = 0; i < r->n_stages; i++) {
        nc_run_stage_kind kind = r->stages[i].kind;
        if (kind != NC_RUN_CALIBRATE && kind != NC_RUN_CONVERT && kind != NC_RUN_FINETUNE &&
            kind != NC_RUN_CALIBRATE_BIAS)
            continue;
        int j = i + 1; /* the row it made is the one measured (or judged) next */
        while (j < r->n_stages && r->stages[j].kind != NC_RUN_MEASURE && r->stages[j].kind != NC_RUN_SELECT)
            j++;
        if (j < r->n_stages && r->stages[j].row == row)
            sum += r->stage_seconds[i];
    }
    return sum;
}
int nc_runner_best_row(const nc_runner *r) { return r->best ? r->best_row : -1; }
double nc_runner_held_out_accuracy(const nc_runner *r, int row)
{
    return row >= 0 && row < NC_RUNNER_MAX_ROWS ? r->held_out_accuracy[row] : -1;
}
int nc_runner_eval_T(const nc_runner *r) { return r->eval_T; }
nc_engine *nc_runner_engine(nc_runner *r) { return r->engine; }
const nc_dataset *nc_runner_train_set(const nc_runner *r) { return r->train_set; }
const nc_dataset *nc_runner_test_set(const nc_runner *r) { return r->test_set; }
