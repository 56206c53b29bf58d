/* neurocuda.h — libneurocuda, the one public C interface of NeuroCUDA.
 *
 * What the CLI and the workbench do through the pipeline runner, for other
 * programs (the Python package, first): open a model, convert it into a
 * spiking network (calibration, QCFS, IF neurons, optional QCFS and BPTT
 * fine-tuning), simulate and evaluate it on an engine, save and load
 * projects, export NIR and Lava netx.
 *
 * Conventions:
 *   - every type is opaque and made by a _new/_open call, freed by its _free
 *     (NULL is a no-op);
 *   - a fallible call returns a status (NEUROCUDA_OK = 0) and fills the
 *     caller's neurocuda_error (may be NULL) with one line that says what
 *     went wrong, where and what to do;
 *   - the library never prints, never exits, and holds no global state but
 *     the engine table: separate objects may be used from separate threads;
 *   - long calls take a progress callback; a non-zero return cancels the
 *     call at its next batch (NEUROCUDA_ERR_CANCELLED) and nothing is
 *     written.
 *
 * Link with `pkg-config --libs neurocuda`.  The soname changes when this
 * interface changes incompatibly. */
#ifndef NEUROCUDA_H
#define NEUROCUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NEUROCUDA_API_VERSION 1

/* ---- status and errors ------------------------------------------------- */

typedef enum neurocuda_status {
    NEUROCUDA_OK = 0,
    NEUROCUDA_ERR_IO,          /* a file could not be opened, read or written   */
    NEUROCUDA_ERR_FORMAT,      /* a file is damaged or not what it claims       */
    NEUROCUDA_ERR_UNSUPPORTED, /* valid input this library cannot handle        */
    NEUROCUDA_ERR_SHAPE,       /* shapes that do not fit together               */
    NEUROCUDA_ERR_MEMORY,      /* out of memory, or over the memory budget      */
    NEUROCUDA_ERR_ARGUMENT,    /* a bad parameter, option or data batch          */
    NEUROCUDA_ERR_CANCELLED,   /* the progress callback asked to stop           */
    NEUROCUDA_ERR_DEVICE,      /* the GPU or another engine failed or is absent */
    NEUROCUDA_ERR_INTERNAL     /* a bug                                         */
} neurocuda_status;

#define NEUROCUDA_MESSAGE_MAX 1024

typedef struct neurocuda_error {
    int status;                            /* a neurocuda_status */
    char message[NEUROCUDA_MESSAGE_MAX];
} neurocuda_error;

/* "0.1.0" */
const char *neurocuda_version(void);
/* "io", "format", "unsupported", ... ("unknown" outside the enum) */
const char *neurocuda_status_name(int status);

/* ---- progress ---------------------------------------------------------- */

typedef struct neurocuda_progress {
    const char *stage;   /* "load", "calibrate", "evaluate", "simulate", "train", ... */
    int64_t done, total; /* units (images, batches) done and in all; total 0: unknown  */
    double value;        /* the stage's number: accuracy so far, or the training loss */
    int epoch, epochs;   /* fine-tuning only (else 0)                                  */
} neurocuda_progress;

/* Returns 0 to go on, non-zero to cancel. */
typedef int (*neurocuda_progress_fn)(void *user, const neurocuda_progress *progress);

/* ---- options ------------------------------------------------------------ */

/* Settings of a job as KEY = VALUE text, with the names and defaults of the
 * `neurocuda convert` / `run` flags, so that one job described either way
 * gives the same result:
 *   data SPEC            the dataset when no data object is given (default
 *                        fashion-mnist); mean, std (one value or one per
 *                        channel), scale, limit (test images)
 *   engine NAME          cpu (default) | gpu | loihi; engine-opt K=V (repeatable)
 *   threads N            CPU threads (0: all)
 *   threshold M          max | p99 | p99.9 (default) | p99.99 | mmse
 *   per-channel 0|1, L N, T N (mmse's target), maxpool avg|pre-spike|gated,
 *   calib-images N, v0 F, reset subtract|zero, fire ge|gt
 *   finetune-qcfs N, finetune-bptt N, train-T N, lr X, optimizer adam|sgd,
 *   surrogate S, train-threshold 0|1, batch N (training batch), val-images N,
 *   train-images N, augment 0|1, distill A[,TAU] (weight and temperature of
 *   distillation from the source ANN), calibrate-bias T, bias-images N
 *   target-T N           convert: the low-latency recipe for N steps (it decides
 *                        the conversion and fine-tuning settings; docs/FINETUNING.md);
 *                        time-budget MINUTES its budget
 *   eval-T N             measure the SNN after every step up to N
 *   sim-T N              steps of a simulation that keeps its record
 *   encoding direct|poisson, seed N
 *   output PATH          convert: also write the project file there */
typedef struct neurocuda_options neurocuda_options;

neurocuda_options *neurocuda_options_new(void); /* NULL: out of memory */
void neurocuda_options_free(neurocuda_options *o);
/* NEUROCUDA_ERR_ARGUMENT for an unknown key or a bad value (the message
 * names both and what is allowed). */
int neurocuda_options_set(neurocuda_options *o, const char *key, const char *value, neurocuda_error *err);

/* ---- data ---------------------------------------------------------------- */

/* Labelled images that the library pulls batch by batch (a stream): nothing
 * is written to disk, and the library holds only the batches in use.
 *
 * next: gives the next batch of the current pass: *images points to n × C ×
 *   H × W float32 values (preprocessed as the model expects, C order), and
 *   *labels to n int32 labels, both valid until the next call.  Returns 1
 *   for a batch, 0 at the end of the pass, -1 on failure (message in err).
 * rewind: starts a new pass from the first image (0, or -1 with a message).
 *
 * Every batch is checked: NaN or infinity, a label outside [0, classes), or
 * a pass shorter than `count` fail the job with a message naming the batch
 * and the image. */
typedef int (*neurocuda_next_fn)(void *user, const float **images, const int32_t **labels, int64_t *n,
                                 neurocuda_error *err);
typedef int (*neurocuda_rewind_fn)(void *user, neurocuda_error *err);

typedef struct neurocuda_data neurocuda_data;

/* A stream of `count` images of channels × height × width, labels in
 * [0, classes); `name` (may be NULL) appears in messages; user must outlive
 * the data object. */
int neurocuda_data_stream(int64_t count, int channels, int height, int width, int classes, const char *name,
                          neurocuda_next_fn next, neurocuda_rewind_fn rewind, void *user, neurocuda_data **out,
                          neurocuda_error *err);
void neurocuda_data_free(neurocuda_data *d);

/* ---- models ---------------------------------------------------------------- */

/* A network: an ANN from ONNX, or a spiking network from a project file
 * (.ncsnn), a NIR graph or a conversion. */
typedef struct neurocuda_model neurocuda_model;

/* Opens .onnx, .ncsnn or .nir (chosen by the extension and the contents). */
int neurocuda_model_open(const char *path, neurocuda_model **out, neurocuda_error *err);
void neurocuda_model_free(neurocuda_model *m);

/* 1 when it holds spiking neurons (converted, or from NIR). */
int neurocuda_model_is_spiking(const neurocuda_model *m);
/* The input of one sample: writes up to 4 dims (C, H, W) and returns how
 * many; the number of classes (output values per sample). */
int neurocuda_model_input_shape(const neurocuda_model *m, int64_t dims[4]);
int64_t neurocuda_model_classes(const neurocuda_model *m);
/* A text report: every node (converted / folded / approximated /
 * unsupported, and why), the thresholds of a converted net, and the stored
 * accuracies of a project.  Returns the length it wanted (as snprintf). */
size_t neurocuda_model_report(const neurocuda_model *m, char *buf, size_t size);

/* Saves a spiking network as a project file (.ncsnn; what `neurocuda
 * convert -o` writes for the same job, byte for byte). */
int neurocuda_model_save(const neurocuda_model *m, const char *path, neurocuda_error *err);
/* NIR (HDF5) of a spiking network; approx = 1 writes a MaxPool as an
 * average pool (listed as a difference). */
int neurocuda_model_export_nir(const neurocuda_model *m, const char *path, int approx, neurocuda_error *err);
/* Lava-dl netx (HDF5) of the Loihi quantisation of a spiking network. */
int neurocuda_model_export_lava(const neurocuda_model *m, const char *path, neurocuda_error *err);

/* Binds the model to an engine ("cpu", "gpu", "loihi"; options: engine-opt
 * and threads of `o`, may be NULL): the engine must be available here and
 * run every node, else NEUROCUDA_ERR_DEVICE / _UNSUPPORTED saying why.
 * Later forward passes and evaluations run there.  A model starts bound to
 * nothing: the cpu engine is made on first use. */
int neurocuda_model_compile(neurocuda_model *m, const char *engine, const neurocuda_options *o,
                            neurocuda_error *err);
/* The bound engine's name ("cpu" when none is bound yet). */
const char *neurocuda_model_engine(const neurocuda_model *m);

/* One forward pass of n samples (input: n × C × H × W float32, direct
 * encoding).  A spiking network runs T steps and writes out[T][n][classes],
 * the output node's value after every step (its argmax is the prediction
 * at that step, as the accuracy by step counts it); an ANN writes
 * out[n][classes] (T ignored). */
int neurocuda_model_forward(neurocuda_model *m, const float *input, int64_t n, int T, float *out,
                            neurocuda_error *err);

/* ---- jobs --------------------------------------------------------------------- */

/* What a job measured: rows of the stage table (as `neurocuda convert`
 * prints), and per-layer statistics of the last row when it kept a record. */
typedef struct neurocuda_results neurocuda_results;

void neurocuda_results_free(neurocuda_results *r);
int neurocuda_results_rows(const neurocuda_results *r);
const char *neurocuda_results_row_name(const neurocuda_results *r, int row); /* "converted", ... */
/* ANN and QCFS-ANN accuracy (NAN when not measured), images measured. */
double neurocuda_results_ann(const neurocuda_results *r, int row);
double neurocuda_results_qcfs(const neurocuda_results *r, int row);
int64_t neurocuda_results_images(const neurocuda_results *r, int row);
/* SNN steps measured, and the accuracy after step t (1 ≤ t ≤ T). */
int neurocuda_results_T(const neurocuda_results *r, int row);
double neurocuda_results_snn(const neurocuda_results *r, int row, int t);
/* The stage table as text (the lines `neurocuda convert` prints). */
size_t neurocuda_results_table(const neurocuda_results *r, char *buf, size_t size);

typedef struct neurocuda_layer {
    char name[128];          /* the node's name                                     */
    int64_t neurons;         /* per sample                                          */
    double firing_rate;      /* spikes / (neurons × samples × steps)                */
    double spikes;
    double sops;             /* synaptic operations: spikes × fan-out               */
    double calib_error;      /* relative L2 error of the rate against the ANN (NAN: unknown) */
} neurocuda_layer;

/* Layers of the last row's record (0 when the job kept none). */
int neurocuda_results_layers(const neurocuda_results *r);
int neurocuda_results_layer(const neurocuda_results *r, int layer, neurocuda_layer *out);

/* Converts the ANN `ann` (not changed) into *snn, calibrating on `train`
 * (the first calib-images images; the whole pass per fine-tuning epoch) and
 * measuring every stage on `test`.  Either data may be NULL: the options'
 * dataset split is opened instead — or, for test, nothing is measured when
 * the options name no dataset ("data" set to "").  *results (may be NULL)
 * receives the stage table.  With "output" the project file is written too. */
int neurocuda_convert(const neurocuda_model *ann, const neurocuda_options *o, neurocuda_data *train,
                      neurocuda_data *test, neurocuda_progress_fn progress, void *user, neurocuda_model **snn,
                      neurocuda_results **results, neurocuda_error *err);

/* Measures a model on `test` (NULL: the options' dataset test split) on its
 * bound engine: a spiking network over eval-T steps (default 32), keeping
 * the record of its layers; an ANN's accuracy. */
int neurocuda_evaluate(neurocuda_model *m, const neurocuda_options *o, neurocuda_data *test,
                       neurocuda_progress_fn progress, void *user, neurocuda_results **results, neurocuda_error *err);

/* ---- engines ------------------------------------------------------------------- */

/* The engines of this build, in the table's order. */
int neurocuda_engine_count(void);
const char *neurocuda_engine_name(int i);
const char *neurocuda_engine_description(int i);
/* 1 when it can run here; else 0 and the reason in why. */
int neurocuda_engine_available(const char *name, char *why, size_t size);

#ifdef __cplusplus
}
#endif

#endif
