/* nc_api_job.c — the jobs of libneurocuda (neurocuda.h): conversion and
 * evaluation, each one run of the pipeline runner (sim/nc_runner.h), and
 * the results they hand back. */
#include "nc_api_private.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- progress: the runner's reports in the public form ---- */

typedef struct job_progress {
    neurocuda_progress_fn fn;
    void *user;
} job_progress;

static int on_progress(void *user, const nc_progress *p)
{
    job_progress *j = user;
    neurocuda_progress q = {.stage = p->stage, .done = p->done, .total = p->total, .value = p->value};
    return j->fn ? j->fn(j->user, &q) : 0;
}

static int on_train_progress(void *user, const nc_train_progress *p)
{
    job_progress *j = user;
    neurocuda_progress q = {.stage = "train", .done = p->batch, .total = p->batches, .value = p->loss,
                            .epoch = p->epoch, .epochs = p->epochs};
    return j->fn ? j->fn(j->user, &q) : 0;
}

/* ---- results ---- */

static nc_status copy_rows(neurocuda_results *res, const nc_runner *r, nc_error *err)
{
    res->n_rows = nc_runner_row_count(r);
    for (int k = 0; k < res->n_rows; k++) {
        const nc_stage_row *row = nc_runner_row(r, k);
        res->rows[k] = *row;
        res->rows[k].snn = NULL;
        if (row->T > 0) {
            res->rows[k].snn = malloc((size_t)row->T * sizeof(double));
            if (!res->rows[k].snn)
                return nc_fail(err, NC_ERR_MEMORY, "out of memory for the results");
            memcpy(res->rows[k].snn, row->snn, (size_t)row->T * sizeof(double));
        }
    }
    return NC_OK;
}

/* The layers of a kept record (the last row's). */
static nc_status copy_layers(neurocuda_results *res, const nc_record *rec, nc_error *err)
{
    if (!rec)
        return NC_OK;
    int n = nc_record_layer_count(rec);
    res->layers = calloc((size_t)n + 1, sizeof *res->layers);
    if (!res->layers)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for the layer statistics");
    for (int i = 0; i < n; i++) {
        nc_layer_stats s;
        nc_record_layer_stats(rec, i, &s);
        neurocuda_layer *l = &res->layers[i];
        snprintf(l->name, sizeof l->name, "%s", s.name ? s.name : "");
        l->neurons = s.neurons;
        l->firing_rate = s.firing_rate;
        l->spikes = (double)s.spikes;
        l->sops = s.sops;
        l->calib_error = s.has_ann ? s.total.rel_l2 : NAN;
    }
    res->n_layers = n;
    return NC_OK;
}

static nc_status make_results(const nc_runner *r, neurocuda_results **out, nc_error *err)
{
    neurocuda_results *res = calloc(1, sizeof *res);
    if (!res)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for the results");
    nc_status st = copy_rows(res, r, err);
    if (st == NC_OK && res->n_rows > 0)
        st = copy_layers(res, nc_runner_record(r, res->n_rows - 1), err);
    if (st != NC_OK) {
        neurocuda_results_free(res);
        return st;
    }
    *out = res;
    return NC_OK;
}

void neurocuda_results_free(neurocuda_results *r)
{
    if (!r)
        return;
    for (int k = 0; k < r->n_rows; k++)
        free(r->rows[k].snn);
    free(r->layers);
    free(r);
}

static const nc_stage_row *row_at(const neurocuda_results *r, int row)
{
    return r && row >= 0 && row < r->n_rows ? &r->rows[row] : NULL;
}

int neurocuda_results_rows(const neurocuda_results *r) { return r ? r->n_rows : 0; }
const char *neurocuda_results_row_name(const neurocuda_results *r, int row)
{
    return row_at(r, row) ? row_at(r, row)->name : NULL;
}
double neurocuda_results_ann(const neurocuda_results *r, int row) { return row_at(r, row) ? row_at(r, row)->ann : NAN; }
double neurocuda_results_qcfs(const neurocuda_results *r, int row)
{
    return row_at(r, row) ? row_at(r, row)->qcfs : NAN;
}
int64_t neurocuda_results_images(const neurocuda_results *r, int row)
{
    return row_at(r, row) ? row_at(r, row)->images : 0;
}
int neurocuda_results_T(const neurocuda_results *r, int row) { return row_at(r, row) ? row_at(r, row)->T : 0; }
double neurocuda_results_snn(const neurocuda_results *r, int row, int t)
{
    const nc_stage_row *s = row_at(r, row);
    return s && t >= 1 && t <= s->T ? s->snn[t - 1] : NAN;
}
int neurocuda_results_layers(const neurocuda_results *r) { return r ? r->n_layers : 0; }
int neurocuda_results_layer(const neurocuda_results *r, int layer, neurocuda_layer *out)
{
    if (!r || layer < 0 || layer >= r->n_layers)
        return -1;
    *out = r->layers[layer];
    return 0;
}


/* The table `neurocuda convert` prints (app/nc_cmd_convert.c). */
size_t neurocuda_results_table(const neurocuda_results *r, char *buf, size_t size)
{
    static const int steps[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    size_t used = 0, n_steps = sizeof steps / sizeof steps[0];
    if (buf && size)
        buf[0] = 0;
    int T = 0;
    for (int k = 0; k < r->n_rows; k++)
        T = r->rows[k].T > T ? r->rows[k].T : T;
    nc_api_append(buf, size, &used, "Test accuracy (%lld images)\n%-18s %8s %9s",
           (long long)(r->n_rows ? r->rows[0].images : 0), "stage", "ANN", "QCFS-ANN");
    for (size_t j = 0; j < n_steps && steps[j] <= T; j++)
        nc_api_append(buf, size, &used, "  SNN T=%-3d", steps[j]);
    nc_api_append(buf, size, &used, "\n");
    for (int k = 0; k < r->n_rows; k++) {
        const nc_stage_row *s = &r->rows[k];
        nc_api_append(buf, size, &used, "%-18s ", s->name);
        if (isnan(s->ann))
            nc_api_append(buf, size, &used, "%8s ", "-");
        else
            nc_api_append(buf, size, &used, "%8.4f ", s->ann);
        if (isnan(s->qcfs))
            nc_api_append(buf, size, &used, "%9s", "-");
        else
            nc_api_append(buf, size, &used, "%9.4f", s->qcfs);
        for (size_t j = 0; j < n_steps && steps[j] <= T; j++)
            if (steps[j] <= s->T)
                nc_api_append(buf, size, &used, "  %9.4f", s->snn[steps[j] - 1]);
            else
                nc_api_append(buf, size, &used, "  %9s", "-");
        nc_api_append(buf, size, &used, "\n");
    }
    return used;
}

/* ---- jobs ---- */

/* Runs one description; on success *results (when asked) and, for a
 * conversion, *snn. */
static nc_status run_job(nc_runner_desc *d, neurocuda_progress_fn progress, void *user, neurocuda_model **snn,
                         neurocuda_results **results, nc_error *err)
{
    job_progress jp = {progress, user};
    nc_runner_observer obs = {.user = &jp, .progress = on_progress, .train_progress = on_train_progress};
    nc_runner *r = NULL;
    nc_project *project = NULL;
    nc_status st = nc_runner_new(d, &r, err);
    if (st == NC_OK)
        st = nc_runner_run(r, &obs, err);
    if (st == NC_OK && results)
        st = make_results(r, results, err);
    if (st == NC_OK && snn)
        st = nc_runner_make_project(r, &project, err);
    if (st == NC_OK && snn) {
        *snn = calloc(1, sizeof **snn);
        if (!*snn)
            st = nc_fail(err, NC_ERR_MEMORY, "out of memory for the converted model");
    }
    if (st == NC_OK && snn) {
        (*snn)->project = project;
        (*snn)->net = project->net;
        project = NULL;
    }
    if (st != NC_OK && results) {
        neurocuda_results_free(*results);
        *results = NULL;
    }
    nc_project_free(project);
    nc_runner_free(r);
    return st;
}

/* The job of model m with options o (the defaults, made in *defaults for
 * the caller to free, when o is NULL) on the caller's data; the options in
 * use, or NULL when the defaults cannot be made. */
static const neurocuda_options *describe_job(const neurocuda_options *o, const neurocuda_model *m,
                                             neurocuda_data *train, neurocuda_data *test, nc_runner_desc *d,
                                             neurocuda_options **defaults)
{
    *defaults = o ? NULL : neurocuda_options_new();
    const neurocuda_options *opts = o ? o : *defaults;
    if (!opts)
        return NULL;
    *d = nc_api_describe(opts, m);
    d->train_data = train ? train->ds : NULL;
    d->test_data = test ? test->ds : NULL;
    return opts;
}

int neurocuda_convert(const neurocuda_model *ann, const neurocuda_options *o, neurocuda_data *train,
                      neurocuda_data *test, neurocuda_progress_fn progress, void *user, neurocuda_model **snn,
                      neurocuda_results **results, neurocuda_error *err)
{
    *snn = NULL;
    if (results)
        *results = NULL;
    nc_error e = {0};
    if (!ann)
        return nc_api_fail(err, NC_ERR_ARGUMENT, "neurocuda_convert: no model");
    if (nc_runner_is_spiking(ann->net))
        return nc_api_fail(err, NC_ERR_ARGUMENT, "%s is already a spiking network; evaluate it instead",
                           ann->path[0] ? ann->path : "the model");
    neurocuda_options *defaults;
    nc_runner_desc d;
    const neurocuda_options *opts = describe_job(o, ann, train, test, &d, &defaults);
    if (!opts)
        return nc_api_fail(err, NC_ERR_MEMORY, "out of memory for the options");
    nc_recipe plan; /* target-T: the recipe decides, as `neurocuda convert --target-T` */
    nc_status st = opts->target_T > 0 ? nc_recipe_describe(ann->net, opts->target_T, opts->time_budget, &d, &plan, &e)
                                      : NC_OK;
    if (st == NC_OK)
        st = run_job(&d, progress, user, snn, results, &e);
    neurocuda_options_free(defaults);
    return nc_api_error(err, &e, st);
}

static int has_nir_models(const nc_net *net)
{
    for (int i = 0; i < net->n_nodes; i++)
        if (net->nodes[i].kind == NC_NODE_NEURON && nc_neuron_model_is_nir(net->nodes[i].neuron.model))
            return 1;
    return 0;
}

int neurocuda_evaluate(neurocuda_model *m, const neurocuda_options *o, neurocuda_data *test,
                       neurocuda_progress_fn progress, void *user, neurocuda_results **results, neurocuda_error *err)
{
    *results = NULL;
    nc_error e = {0};
    if (!m)
        return nc_api_fail(err, NC_ERR_ARGUMENT, "neurocuda_evaluate: no model");
    neurocuda_options *defaults;
    nc_runner_desc d;
    const neurocuda_options *opts = describe_job(o, m, NULL, test, &d, &defaults);
    if (!opts)
        return nc_api_fail(err, NC_ERR_MEMORY, "out of memory for the options");
    d.output = NULL;
    int spiking = nc_runner_is_spiking(m->net);
    if (spiking) { /* simulated with its record: the layers' numbers */
        d.keep_records = 1;
        d.T = d.eval_T = opts->eval_T > 0 ? opts->eval_T : opts->sim_T > 0 ? opts->sim_T : 32;
    } else {
        d.eval_T = 0;
        d.skip_qcfs = 1;
    }
    d.skip_ann = d.skip_qcfs = has_nir_models(m->net) ? 1 : d.skip_qcfs;
    nc_status st = NC_OK;
    if (m->engine) /* bound by compile: run there */
        d.engine_instance = m->engine;
    if (!d.test_data && !d.dataset)
        st = nc_fail(&e, NC_ERR_ARGUMENT, "no test data: give a data stream or a dataset");
    if (st == NC_OK)
        st = run_job(&d, progress, user, NULL, results, &e);
    neurocuda_options_free(defaults);
    return nc_api_error(err, &e, st);
}
