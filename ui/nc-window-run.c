/* nc-window-run.c — running a job from the window: start, live progress in
 * the status bar and the views, cancel, finish (see nc-job.h for the
 * threading). */
#include "nc-window-private.h"

#include <math.h>

/* ---- status bar ----------------------------------------------------------------------- */

static char *format_duration(double seconds)
{
    int s = (int)ceil(seconds);
    return s >= 3600 ? g_strdup_printf("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60)
                     : g_strdup_printf("%d:%02d", s / 60, s % 60);
}

static char *train_text(const NcRunData *d)
{
    const nc_train_progress *p = &d->train;
    const char *stage = p->mode == NC_TRAIN_QCFS ? "QCFS" : "BPTT";
    if (p->epoch < 1)
        return g_strdup_printf("%s fine-tuning: starting (%d epoch%s)…", stage, p->epochs, p->epochs == 1 ? "" : "s");
    g_autofree char *held = p->val_accuracy >= 0 ? g_strdup_printf(" · held-out %.1f%%", 100 * p->val_accuracy)
                                                 : g_strdup("");
    return g_strdup_printf("%s fine-tuning: epoch %d/%d · batch %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT
                           " · loss %.4f · train accuracy %.1f%%%s",
                           stage, p->epoch, p->epochs, p->batch, p->batches, p->loss, 100 * p->train_accuracy, held);
}

static char *stage_text(NcWindow *self, const NcRunData *d)
{
    /* in a run that fine-tunes, which network is simulated */
    const char *which = !self->after_label ? "" : d->finetuned ? " the fine-tuned network" : " the converted network";
    if (strcmp(d->stage, "load") == 0)
        return g_strdup(d->finetuned ? "Preparing the fine-tuned network…" : "Loading the dataset…");
    if (strcmp(d->stage, "converted") == 0)
        return g_strdup_printf("%s; starting the simulation…", d->finetuned ? "Fine-tuned" : "Converted");
    if (strcmp(d->stage, "finetune") == 0 && d->has_train)
        return train_text(d);
    if (strcmp(d->stage, "evaluate") == 0)
        return g_strdup_printf("Measuring the QCFS fine-tuned network: %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT,
                               d->done, d->total);
    if (strcmp(d->stage, "calibrate") == 0)
        /* two passes over the images: maxima, then histograms */
        return g_strdup_printf("Calibrating: %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT " image passes", d->done,
                               d->total);
    if (strcmp(d->stage, "simulate") == 0 && d->has_record && d->samples > 0)
        return g_strdup_printf("Simulating%s: %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT
                               " images · SNN %.1f%% at T = %d · ANN %.1f%%",
                               which, d->done, d->total, 100 * d->accuracy[d->T - 1], d->T,
                               100 * (d->finetuned && d->baseline ? d->baseline->ann_accuracy : d->ann_accuracy));
    if (strcmp(d->stage, "simulate") == 0)
        return g_strdup_printf("Simulating%s: %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT " images", which, d->done,
                               d->total);
    return g_strdup(d->stage);
}

static void update_status(NcWindow *self, const NcRunData *d)
{
    g_autofree char *text = stage_text(self, d);
    gtk_label_set_text(self->status_label, text);
    if (d->total > 0) {
        gtk_progress_bar_set_fraction(self->progress_bar, CLAMP((double)d->done / d->total, 0, 1));
    } else {
        gtk_progress_bar_pulse(self->progress_bar);
    }
    /* ETA of the stage from its rate so far */
    if (d->total > 0 && d->done > 0 && d->stage_elapsed > 1) {
        g_autofree char *eta = format_duration(d->stage_elapsed * (double)(d->total - d->done) / (double)d->done);
        g_autofree char *label = g_strdup_printf("%s left", eta);
        gtk_label_set_text(self->eta_label, label);
    } else {
        gtk_label_set_text(self->eta_label, "");
    }
}

static void set_running_ui(NcWindow *self, gboolean running)
{
    gtk_widget_set_visible(GTK_WIDGET(self->progress_bar), running);
    gtk_widget_set_visible(self->cancel_button, running);
    if (!running)
        gtk_label_set_text(self->eta_label, "");
    gtk_progress_bar_set_fraction(self->progress_bar, 0);
    self->hooks.state_changed(self);
}

/* ---- progress ----------------------------------------------------------------------------- */

static void on_progress(NcJob *job, NcRunData *data, NcWindow *self)
{
    update_status(self, data);
    g_strlcpy(self->run_stage, data->stage, sizeof self->run_stage);
    self->has_train = data->has_train;
    if (data->has_train)
        self->train_progress = data->train;
    /* the converted net's curve is complete once fine-tuning begins; the
     * fine-tuned net's starts with its first batch */
    if (strcmp(data->stage, "finetune") == 0 || strcmp(data->stage, "evaluate") == 0)
        self->curve_ended = TRUE;
    /* the converted net's run, complete (its last batch may have ended after
     * the last live snapshot) */
    if (data->baseline && !self->baseline_shown && !self->after_curve) {
        self->baseline_shown = TRUE;
        nc_window_views_update(self, data->baseline);
    }
    if (data->finetuned && data->has_record && data->samples > 0 && self->after_label && !self->after_curve) {
        nc_accuracy_chart_begin_run(self->accuracy, self->after_label);
        self->after_curve = TRUE;
        self->curve_ended = FALSE;
    }
    nc_model_pane_set_stages(self->model_pane, data->stages, data->n_stages);
    if (data->converted) {
        /* the model list now shows IF neurons with their thresholds */
        nc_model_pane_set_net(self->model_pane, data->converted);
    }
    if (data->teach)
        nc_window_views_set_teach(self, data->teach);
    if (data->has_record && data->samples > 0) {
        self->live_updates++;
        nc_window_views_update(self, data);
    }
}

/* ---- finishing --------------------------------------------------------------------------------- */

/* Which epoch each fine-tuning stage kept (the best on the held-out
 * images), when that is not simply the last one. */
static char *train_note(NcJob *job)
{
    GString *note = g_string_new(NULL);
    for (int k = NC_TRAIN_QCFS; k <= NC_TRAIN_BPTT; k++) {
        nc_train_result r;
        const char *name = k == NC_TRAIN_QCFS ? "QCFS" : "BPTT";
        if (!nc_job_get_train_result(job, (nc_train_mode)k, &r) || r.best_epoch == r.epochs_run)
            continue;
        if (r.best_epoch == 0)
            g_string_append_printf(note, " · %s: no epoch beat the held-out accuracy before it (%.1f%%), the "
                                         "parameters from before were kept", name, 100 * r.val_accuracy_before);
        else
            g_string_append_printf(note, " · %s: kept epoch %d of %d (held-out %.1f%%)", name, r.best_epoch,
                                   r.epochs_run, 100 * r.best_val_accuracy);
    }
    return g_string_free(note, note->len == 0);
}

static void report_finished(NcWindow *self, NcJob *job, const NcRunData *d)
{
    g_autofree char *time = format_duration(nc_job_get_seconds(job));
    g_autofree char *text = NULL;
    const NcRunData *b = d ? d->baseline : NULL;
    g_autofree char *ft = nc_job_settings_describe_finetune(nc_job_get_settings(job));
    if (d && d->samples > 0 && d->finetuned && b && b->samples > 0 && b->T == d->T)
        text = g_strdup_printf("Done in %s: SNN %.1f%% at T = %d after %s (%.1f%% before), %" G_GINT64_FORMAT
                               " images",
                               time, 100 * d->accuracy[d->T - 1], d->T, ft, 100 * b->accuracy[b->T - 1], d->samples);
    else if (d && d->samples > 0)
        text = g_strdup_printf("Done in %s: SNN %.1f%% at T = %d, ANN %.1f%%, %" G_GINT64_FORMAT " images", time,
                               100 * d->accuracy[d->T - 1], d->T, 100 * d->ann_accuracy, d->samples);
    else
        text = g_strdup_printf("Done in %s", time);
    g_autofree char *note = train_note(job);
    if (note) {
        char *longer = g_strconcat(text, note, NULL);
        g_free(text);
        text = longer;
    }
    gtk_label_set_text(self->status_label, text);
    nc_window_toast(self, text);
}

static void report_cancelled(NcWindow *self, const NcRunData *d)
{
    gboolean training = strcmp(self->run_stage, "finetune") == 0 || strcmp(self->run_stage, "evaluate") == 0;
    g_autofree char *text =
        training ? g_strdup("Fine-tuning cancelled (the stage's changes are discarded); the converted network "
                            "and its run are kept")
        : d && d->samples > 0
            ? g_strdup_printf("Cancelled after %" G_GINT64_FORMAT " images; their results are kept", d->samples)
            : g_strdup("Cancelled");
    gtk_label_set_text(self->status_label, text);
    nc_window_toast(self, text);
    if (!self->curve_ended) /* a finished curve (the converted net's) stays as it is */
        nc_accuracy_chart_end_run(self->accuracy, "cancelled");
}

static void report_failed(NcWindow *self, const GError *error)
{
    gtk_label_set_text(self->status_label, "The run failed");
    g_free(self->last_error);
    self->last_error = g_strdup(error->message);
    nc_window_show_error(self, "The Run Failed", error->message);
    nc_accuracy_chart_end_run(self->accuracy, "failed");
}

/* The worker has stopped: the job's record and net are ours to read. */
static void on_job_done(GObject *source, GAsyncResult *result, gpointer user_data)
{
    g_autoptr(NcWindow) self = user_data;
    NcJob *job = NC_JOB(source);
    g_autoptr(GError) error = NULL;
    gboolean ok = nc_job_run_finish(job, result, &error);
    if (job != self->job) /* detached: a new model was opened meanwhile */
        return;
    g_signal_handler_disconnect(job, self->progress_handler);
    self->progress_handler = 0;
    NcRunData *final = nc_job_get_final(job);
    if (final && final->samples > 0)
        nc_window_views_update(self, final);
    if (final)
        nc_model_pane_set_stages(self->model_pane, final->stages, final->n_stages);
    self->outcome = ok ? NC_RUN_FINISHED
                       : g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED) ? NC_RUN_CANCELLED : NC_RUN_FAILED;
    if (ok)
        report_finished(self, job, final);
    else if (self->outcome == NC_RUN_CANCELLED)
        report_cancelled(self, final);
    else
        report_failed(self, error);
    g_clear_pointer(&final, nc_run_data_unref);
    if (nc_job_get_record(job)) /* keep what can be exported */
        g_set_object(&self->last_job, job);
    g_clear_object(&self->job);
    g_clear_object(&self->job_cancellable);
    self->runs_finished++;
    set_running_ui(self, FALSE);
    if (self->close_after_job)
        gtk_window_destroy(GTK_WINDOW(self));
}

/* ---- starting and stopping ---------------------------------------------------------------------- */

static char *run_label(NcWindow *self, const NcJobSettings *s)
{
    g_autofree char *what = nc_job_settings_describe(s, !nc_net_is_snn(self->model->net));
    return g_strdup_printf("%s · T %d", what, s->T);
}

void nc_window_run_start(NcWindow *self)
{
    if (self->job || !self->model)
        return;
    NcJobSettings s;
    g_autoptr(GError) error = NULL;
    if (!nc_settings_pane_read(self->settings_pane, &s, &error)) {
        nc_window_show_error(self, "Check the Settings", error->message);
        return;
    }
    if (!nc_settings_pane_engine_available(self->settings_pane, s.engine)) {
        g_autofree char *body = g_strdup_printf("The %s engine cannot run this network; choose another one in "
                                                "Settings → Engine (the reason is shown there).", s.engine);
        nc_window_show_error(self, "Engine Not Available", body);
        nc_job_settings_clear(&s);
        return;
    }
    g_autofree char *label = run_label(self, &s);
    /* a run that fine-tunes draws two curves: the converted net's, then the
     * fine-tuned net's */
    g_autofree char *ft = nc_job_settings_describe_finetune(&s);
    g_free(self->before_label);
    g_free(self->after_label);
    self->before_label = g_strdup(label);
    self->after_label = NULL;
    if (ft && !nc_net_is_snn(self->model->net)) {
        g_autofree char *what = nc_job_settings_describe(&s, TRUE);
        self->after_label = g_strdup_printf("%s + %s · T %d", what, ft, s.T);
    }
    self->after_curve = self->curve_ended = self->baseline_shown = FALSE;
    self->run_stage[0] = '\0';
    self->has_train = FALSE;
    self->job = nc_job_new(self->model->net, self->model->path, &s);
    nc_job_settings_clear(&s);
    self->job_cancellable = g_cancellable_new();
    self->progress_handler = g_signal_connect(self->job, "progress", G_CALLBACK(on_progress), self);
    self->live_updates = 0;
    self->outcome = NC_RUN_NONE;
    self->trace_chosen = FALSE;
    nc_accuracy_chart_begin_run(self->accuracy, label);
    gtk_label_set_text(self->status_label, "Starting…");
    set_running_ui(self, TRUE);
    nc_job_run_async(self->job, self->job_cancellable, on_job_done, g_object_ref(self));
}

void nc_window_run_cancel(NcWindow *self)
{
    if (!self->job)
        return;
    gtk_label_set_text(self->status_label, "Cancelling…");
    g_cancellable_cancel(self->job_cancellable);
}

void nc_window_run_detach(NcWindow *self)
{
    if (!self->job)
        return;
    g_cancellable_cancel(self->job_cancellable);
    g_signal_handler_disconnect(self->job, self->progress_handler);
    self->progress_handler = 0;
    g_clear_object(&self->job);
    g_clear_object(&self->job_cancellable);
    set_running_ui(self, FALSE);
}
