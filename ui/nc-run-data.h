/* nc-run-data.h — an immutable snapshot of a run, handed from the worker
 * thread to the main loop.
 *
 * The worker copies what the views need out of the nc_record (totals of the
 * finished batches, the raster and traces) into a new NcRunData and never
 * touches it again; the main thread only reads it.  Snapshots are reference
 * counted (atomic), so a chart can keep the one it drew while the next one is
 * being made.  The raster and traces stop changing once their samples are
 * recorded, so consecutive snapshots share one NcRunViews. */
#pragma once

#include <glib-object.h>

#include "../core/nc_net.h"
#include "../core/nc_record.h"
#include "../sim/nc_train.h"
#include "nc-raster-spill.h"

G_BEGIN_DECLS

/* The raster and membrane traces of one layer (copies; see nc_record.h). */
typedef struct {
    int raster_samples, raster_neurons, T;
    int64_t *raster_index;   /* [raster_neurons] flat index within a sample   */
    uint8_t *raster_bits;    /* bit ((s·neurons + j)·T + t), LSB first        */
    int trace_samples, trace_neurons;
    int64_t *trace_index;    /* [trace_neurons]                               */
    float *trace_current;    /* [samples, neurons, T]                         */
    uint8_t *trace_spike;    /* [samples, neurons, T]                         */
    float *trace_v;          /* [samples, neurons, T + 1]                     */
    float *trace_theta;      /* [neurons]                                     */
} NcLayerViews;

typedef struct {
    int n_layers;
    int64_t samples;         /* record samples when copied                     */
    gboolean complete;       /* every raster/trace sample was recorded         */
    NcLayerViews *layers;
} NcRunViews;

/* One image simulated with every spike kept, for the teaching view: the
 * input, each neuron layer's spikes at every step, and the output's running
 * evidence per class. */
typedef struct {
    char *name;
    int node, ndim;
    int64_t shape[4];
    int64_t neurons;
    uint8_t *spikes;         /* [T][neurons], 0 or 1                          */
} NcTeachLayer;

typedef struct {
    int T, classes, label;   /* label: the image's class                      */
    int channels, height, width;
    float *image;            /* [C, H, W] as the network sees it               */
    double *evidence;        /* [T][classes]: Σ_{s≤t} output_s                 */
    const char *const *class_names; /* static, or NULL                        */
    int n_layers;
    NcTeachLayer *layers;
} NcTeachData;

NcTeachData *nc_teach_data_new(void);
NcTeachData *nc_teach_data_ref(NcTeachData *teach);
void nc_teach_data_unref(NcTeachData *teach);

typedef struct {
    char *name;
    int node, ndim, channels;
    int64_t shape[4];
    nc_layer_stats stats;    /* stats.name points to `name`                    */
    double *channel_rate;    /* [channels]                                     */
    float theta_min, theta_max;
} NcRunLayer;

/* One stage of a conversion measured on the test images: the converted
 * network, then the network after each fine-tuning stage (the rows of
 * `neurocuda convert`'s table).  NAN = not measured. */
typedef struct {
    char name[32];           /* "converted", "QCFS fine-tuned", "BPTT fine-tuned", "simulated" */
    double ann, qcfs;        /* ANN and QCFS-ANN accuracy                      */
    double snn;              /* SNN accuracy after T steps                     */
    int T;
    int64_t images;          /* test images measured so far                    */
} NcStageAccuracy;

#define NC_MAX_STAGES 3

typedef struct NcRunData {
    /* progress */
    char stage[32];          /* "load", "calibrate", "simulate", "finetune",
                                "evaluate", "converted", "done"               */
    int64_t done, total;
    double stage_elapsed;    /* seconds since the stage began                  */
    /* the record (valid when has_record) */
    gboolean has_record;
    int T;
    int64_t samples;
    double *accuracy;        /* [T], accuracy after steps 1..T                 */
    double ann_accuracy, qcfs_accuracy; /* NAN when unknown                    */
    nc_record_totals totals;
    int n_layers;
    NcRunLayer *layers;
    NcRunViews *views;       /* shared, may be NULL                            */
    /* the raster of the samples past views' raster_samples (the memory
     * budget), in a file; NULL when every kept sample is in memory */
    NcRasterSpill *spill;
    /* the converted network (a clone owned by the snapshot), set once, in the
     * first snapshot after conversion; NULL otherwise */
    nc_net *converted;
    NcTeachData *teach;      /* set with `converted`, NULL otherwise           */
    /* fine-tuning (stage "finetune"): the trainer's newest progress */
    gboolean has_train;
    nc_train_progress train;
    /* in a run that fine-tunes: FALSE while the converted network is
     * simulated, TRUE once the fine-tuned one is */
    gboolean finetuned;
    /* the accuracy of each stage so far (the newest row grows with the run) */
    int n_stages;
    NcStageAccuracy stages[NC_MAX_STAGES];
    /* in a run that fine-tunes, once the converted network's simulation
     * ended: its complete run (a record snapshot, shared), to compare before
     * and after; NULL otherwise */
    struct NcRunData *baseline;
} NcRunData;

#define NC_TYPE_RUN_DATA (nc_run_data_get_type())
GType nc_run_data_get_type(void);

/* A progress-only snapshot (no record yet). */
NcRunData *nc_run_data_new(const char *stage, int64_t done, int64_t total, double stage_elapsed);
/* A snapshot of a record's finished batches; `views` is reused when it is
 * complete, else a new copy is made.  Call on the thread feeding the record. */
NcRunData *nc_run_data_new_from_record(const char *stage, int64_t done, int64_t total, double stage_elapsed,
                                       const nc_record *rec, NcRunViews *previous_views);
NcRunData *nc_run_data_ref(NcRunData *data);
void nc_run_data_unref(NcRunData *data);

NcRunViews *nc_run_views_ref(NcRunViews *views);
void nc_run_views_unref(NcRunViews *views);

/* The layer whose node is `node`, or −1. */
int nc_run_data_find_node(const NcRunData *data, int node);
/* Raster samples viewable: those in memory, then those in the spill file. */
int64_t nc_run_data_raster_samples(const NcRunData *data);

/* 1 if sample s, neuron j of layer `layer`'s raster spiked at step t. */
int nc_layer_views_spike(const NcLayerViews *v, int s, int j, int t);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(NcRunData, nc_run_data_unref)

G_END_DECLS
