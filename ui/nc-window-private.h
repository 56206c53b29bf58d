/* nc-window-private.h — the window's state, shared by nc-window*.c:
 *   nc-window.c          type, template, model loading, drag and drop
 *   nc-window-run.c      running a job: progress, status bar, cancel
 *   nc-window-views.c    the view pages and their updates
 *   nc-window-actions.c  actions, file choosers, exports
 *   nc-window-notify.c   error dialogs and toasts
 * nc-window.c uses the others; they use only nc-window-views.c and
 * nc-window-notify.c, and reach the window back through NcWindowHooks. */
#pragma once

#include "nc-accuracy-chart.h"
#include "nc-job.h"
#include "nc-layer-chart.h"
#include "nc-model-file.h"
#include "nc-model-pane.h"
#include "nc-quant-chart.h"
#include "nc-raster-chart.h"
#include "nc-sample-list.h"
#include "nc-settings-pane.h"
#include "nc-teach-view.h"
#include "nc-trace-chart.h"
#include "nc-window.h"

G_BEGIN_DECLS

/* How the parts below nc-window.c talk back to it: the window owns
 * nc-window-actions.c and nc-window-run.c and sets these at init, so that
 * neither calls the window or the other (the dependencies point one way). */
typedef struct NcWindowHooks {
    void (*open)(NcWindow *self, GFile *file);   /* actions: open a model           */
    void (*run_start)(NcWindow *self);           /* actions: Convert & Run          */
    void (*run_cancel)(NcWindow *self);          /* actions: Cancel                 */
    void (*state_changed)(NcWindow *self);       /* run: a job started or ended     */
} NcWindowHooks;

struct _NcWindow {
    AdwApplicationWindow parent_instance;
    NcWindowHooks hooks;

    /* template children */
    AdwToastOverlay *toast_overlay;
    AdwSplitButton *open_button;
    AdwWindowTitle *window_title;
    GtkWidget *run_button, *export_button;
    GtkStack *main_stack;
    GtkPaned *paned;
    AdwStatusPage *loading_page;
    GtkSpinner *loading_spinner;
    AdwViewStack *side_stack, *views;
    NcModelPane *model_pane;
    NcSettingsPane *settings_pane;
    GtkLabel *status_label, *eta_label;
    AdwToast *toast;             /* the newest toast while shown (weak)       */
    GtkProgressBar *progress_bar;
    GtkWidget *cancel_button;

    /* views (nc-window-views.c) */
    NcAccuracyChart *accuracy;
    NcLayerChart *rates, *error, *sops;
    NcQuantChart *quant;         /* under the error chart, loihi runs only    */
    NcRasterChart *raster;
    NcTraceChart *trace;
    GtkStringList *layer_names;
    GtkDropDown *raster_layer, *trace_layer, *raster_sample;
    GtkSpinButton *trace_neuron;
    GtkLabel *raster_info, *trace_info, *rates_hint, *sops_info, *accuracy_info;
    GtkWidget *rates_back;
    NcSampleList *sample_list;   /* the raster_sample dropdown's entries       */
    int n_raster_samples;
    NcTeachView *teach;
    GtkDropDown *teach_layer, *teach_speed;
    GtkToggleButton *teach_play;
    GtkScale *teach_scale;

    /* state */
    GSettings *settings;
    GMenu *recent_menu;
    NcModelFile *model;          /* the open model, or NULL                   */
    GCancellable *load_cancellable;
    NcJob *job;                  /* the running job, or NULL                   */
    GCancellable *job_cancellable;
    gulong progress_handler;
    NcJob *last_job;             /* the last finished job (exports)            */
    NcRunData *last_data;        /* newest snapshot shown                      */
    gboolean close_after_job;
    gboolean trace_chosen;       /* the user picked a neuron to trace          */
    NcRunOutcome outcome;
    guint runs_finished, live_updates;
    char *last_error;
    /* the running job's fine-tuning (nc-window-run.c) */
    char *before_label;          /* legend of the converted net's curve      */
    char *after_label;           /* of the fine-tuned net's, NULL without    */
    gboolean after_curve;        /* the fine-tuned curve was started          */
    gboolean baseline_shown;     /* the converted net's complete run was shown */
    gboolean curve_ended;        /* the newest curve's simulation has ended   */
    char run_stage[32];          /* the newest snapshot's stage               */
    gboolean has_train;          /* it was a fine-tuning one: its progress    */
    nc_train_progress train_progress;
};

/* nc-window-views.c */
void nc_window_views_init(NcWindow *self);
void nc_window_views_clear(NcWindow *self);
void nc_window_views_update(NcWindow *self, NcRunData *data);
void nc_window_views_select_node(NcWindow *self, int node);
void nc_window_views_set_teach(NcWindow *self, NcTeachData *teach);
NcChart *nc_window_views_current_chart(NcWindow *self);

/* nc-window-run.c */
void nc_window_run_start(NcWindow *self);
void nc_window_run_cancel(NcWindow *self);
/* Stops listening to the running job and cancels it (a new model opens). */
void nc_window_run_detach(NcWindow *self);

/* nc-window-actions.c */
void nc_window_actions_init(NcWindow *self);
void nc_window_actions_update(NcWindow *self);
void nc_window_recent_add(NcWindow *self, const char *path);
void nc_window_recent_rebuild(NcWindow *self);

/* nc-window-notify.c */
void nc_window_show_error(NcWindow *self, const char *heading, const char *body);
void nc_window_toast(NcWindow *self, const char *text);

G_END_DECLS
