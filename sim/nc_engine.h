/* nc_engine.h — the engine interface, in the manner of ggml's backends.
 *
 * An engine runs a loaded network on a batch, in one of three modes:
 *   NC_MODE_ANN  : neurons act as their ANN function (relu/clip; qcfs and if
 *                  neurons act as ReLU) — the original network;
 *   NC_MODE_QCFS : qcfs and if neurons act as λ·clip(floor(x·L/λ+φ)/L, 0, 1);
 *   NC_MODE_SNN  : if neurons integrate and fire over T steps; the output is
 *                  the output node's value at every step, [T, N, classes].
 * Engines: "cpu" (sim/engine_cpu.c, the reference), "gpu" (gpu/, CUDA),
 * "loihi" (fixed point).  One conformance test runs every engine against cpu.
 *
 * Observers let pipeline steps (calibration, records) see every node's output
 * without the engine knowing what they do: the engine calls observe() after
 * computing a node, with rows = N (ANN/QCFS) or T·N (SNN, time-major [T, N, …]).
 * In SNN mode, a NEURON node's observed output is the spike value (θ where a
 * spike fired, 0 elsewhere) and observe_input() sees its input current. */
#ifndef NC_ENGINE_H
#define NC_ENGINE_H

#include "../core/nc_net.h"

typedef enum nc_mode { NC_MODE_ANN, NC_MODE_QCFS, NC_MODE_SNN } nc_mode;
typedef enum nc_encoding { NC_ENCODING_DIRECT, NC_ENCODING_POISSON } nc_encoding;

enum nc_engine_caps {
    NC_CAP_SNN = 1 << 0,         /* can run NC_MODE_SNN                       */
    NC_CAP_TRAINING = 1 << 1,    /* implements backward                       */
    NC_CAP_FIXED_POINT = 1 << 2, /* integer arithmetic (results differ)       */
    NC_CAP_DEVICE_MEMORY = 1 << 3,
    NC_CAP_STEP_SUMS = 1 << 4    /* calls an observer's observe_sums          */
};

typedef struct nc_observer {
    /* Called after node `node` is computed: `data` holds rows × per_row
     * floats (per_row = elements of one sample).  May be NULL. */
    void (*observe)(void *user, int node, const float *data, int64_t rows, int64_t per_row);
    /* SNN mode only: the input current of a NEURON node, same layout. */
    void (*observe_input)(void *user, int node, const float *data, int64_t rows, int64_t per_row);
    void *user;
    /* Optional, SNN mode, engines with NC_CAP_STEP_SUMS only (others never
     * call it): each NEURON node of model IF shown once as sums over the T
     * steps for the N samples — spikes[s·per_row + i] = the steps where
     * value i of sample s was ≠ 0, inputs = Σ_t input current added in step
     * order in float — and then observe / observe_input see every step of
     * only the first step_samples samples (rows = steps · step_samples;
     * not called when 0).  A recording whose rasters and traces keep a few
     * samples thus copies T times less off the device (nc_record.h). */
    void (*observe_sums)(void *user, int node, const float *spikes, const float *inputs, int64_t n,
                         int64_t per_row);
    int64_t step_samples;
} nc_observer;

typedef struct nc_run_options {
    nc_mode mode;
    int T;                    /* SNN steps (≥ 1); ignored otherwise           */
    nc_encoding encoding;     /* SNN input encoding                          */
    uint64_t seed;            /* Poisson encoding                            */
    const nc_observer *observer; /* may be NULL                              */
    nc_progress_fn progress;  /* may be NULL; called every few steps         */
    void *progress_user;
} nc_run_options;

typedef struct nc_engine nc_engine;

typedef struct nc_engine_ops {
    const char *name;
    unsigned caps;
    /* 1 if the engine can run node `node` of `net`; else 0 and a reason. */
    int (*supports)(nc_engine *e, const nc_net *net, int node, char *why, size_t why_size);
    /* Prepares `net` (not copied: it must outlive the engine's use of it). */
    nc_status (*load)(nc_engine *e, const nc_net *net, nc_error *err);
    /* input [N, shape of the input node]; out is allocated by the engine:
     * [N, F] in ANN/QCFS mode, [T, N, F] in SNN mode (F = output numel).
     * In SNN mode the input may also be a sequence [T, N, shape]: step t
     * reads slice t, with no encoding (the cpu engine accepts it).
     * Progress (stage "simulate") counts nodes, done = nodes computed of
     * total = nodes; a net with recurrent edges runs step by step, and then
     * counts steps (total = T) and observers are called after the last step. */
    nc_status (*forward)(nc_engine *e, const nc_tensor *input, const nc_run_options *opts,
                         nc_tensor **out, nc_error *err);
    void (*destroy)(nc_engine *e);
} nc_engine_ops;

struct nc_engine {
    const nc_engine_ops *ops;
    const nc_net *net;  /* set by load */
    int threads;        /* CPU threads to use; 0 = all cores */
    void *impl;         /* engine-private state */
};

/* Creates an engine by name ("cpu", "gpu", "loihi"); fails with a message
 * when it is not compiled in or unavailable (e.g. no GPU). */
nc_status nc_engine_new(const char *name, nc_engine **out, nc_error *err);
void nc_engine_free(nc_engine *e); /* NULL is a no-op */

/* Checks every node with supports(); on the first node it cannot run, fails
 * with a message naming the node, the engine and the reason. */
nc_status nc_engine_check(nc_engine *e, const nc_net *net, nc_error *err);
/* For engines, the checks every forward pass makes, with messages that start
 * "<engine> engine: ": the run options (a known mode; in SNN mode T >= 1 and a
 * known encoding), and the input against the net's input node — a batch
 * [N, shape], or with snn also a sequence [T, N, shape] (*seq = 1). */
nc_status nc_engine_check_options(const char *engine, const nc_run_options *o, nc_error *err);
nc_status nc_engine_check_input(const char *engine, const nc_net *net, const nc_tensor *input, int snn, int T,
                                int *seq, nc_error *err);
/* For engines loading a conv or pool node n that reads node in and whose
 * window gives oh × ow: NULL when n's stored output shape is the computed one
 * and a conv's weight and bias fit its input and groups, else what does not
 * fit (for the engine's load message). */
const char *nc_engine_window_misfit(const nc_node *n, const nc_node *in, int oh, int ow);
/* A pass's output value as an engine holds it: f values per sample, N
 * samples, T steps one after another in SNN mode (snn); a constant value (the
 * same at every step) holds one step. */
typedef struct nc_output_value {
    const char *engine;
    int snn, T, constant;
    int64_t N, f;
} nc_output_value;
/* Copies the first n floats of an engine's output value into dst. */
typedef nc_status (*nc_output_copy_fn)(void *user, float *dst, int64_t n);
/* The output tensor of a pass, [T, N, F] in SNN mode else [N, F], filled
 * through copy (a constant value's one step repeated at every step). Fails
 * with a message naming the engine when out of memory, or with copy's status;
 * *out is set only on success. */
nc_status nc_engine_make_output(const nc_output_value *v, nc_output_copy_fn copy, void *user, nc_tensor **out,
                                nc_error *err);
nc_status nc_engine_load(nc_engine *e, const nc_net *net, nc_error *err);
nc_status nc_engine_forward(nc_engine *e, const nc_tensor *input, const nc_run_options *opts,
                            nc_tensor **out, nc_error *err);

/* The CPU engine (also usable directly). */
nc_engine *nc_engine_cpu_new(void);

/* Names of the engines compiled into this build, NULL-terminated. */
const char *const *nc_engine_names(void);

#endif
