/* nc_record.h — what an SNN run produced, accumulated batch by batch.
 *
 * A record is fed by engine observers (the nc_observer callbacks of
 * sim/nc_engine.h, re-declared here as plain function pointers so that core/
 * does not depend on sim/) and by a few driver calls, per batch:
 *
 *   nc_record_begin_batch(rec, n)
 *   engine forward, NC_MODE_ANN,  observer nc_record_observe_ann   → a
 *   nc_record_add_reference(rec, NC_RECORD_REF_ANN, ann_out, labels)
 *   engine forward, NC_MODE_QCFS                                   (optional)
 *   nc_record_add_reference(rec, NC_RECORD_REF_QCFS, qcfs_out, labels)
 *   engine forward, NC_MODE_SNN,  observers nc_record_observe_snn(_input)
 *   nc_record_end_batch(rec, labels, snn_out [T, N, F])
 *
 * Nothing enters the totals before nc_record_end_batch, so a batch that was
 * cancelled half-way leaves the record as it was after the last full batch.
 * Memory is bounded by the batch: per layer a few [N, neurons] buffers, never
 * [T, N, ...].  Observers must be called from one thread at a time (the
 * engine calls them from the thread that called forward).
 *
 * Layers: every NEURON node of model IF is one recorded layer, in network
 * order.  For a layer: θ_c = threshold[c] when n_threshold = C, else
 * threshold[0]; the channel of a value is axis 0 of the node's shape.
 *
 * ---- metrics (each defined once, here) ---------------------------------
 * Notation per (neuron i, sample n) of a layer, T steps:
 *   N     = spikes of the neuron over the T steps (an observed value ≠ 0)
 *   φ     = θ·N/T, the mean over steps of the spike output values
 *           (a spike carries the value θ)
 *   a     = the ANN activation of the same node on the same input
 *   z     = (1/T)·Σ_t x_t, the mean input current the SNN itself fed the
 *           neuron (bias included)
 *   q_T(z)= θ·clip(floor(z·T/θ + v0_fraction)/T, 0, 1)   (v0_fraction = ½ by
 *           default, giving conversion.md §3.4's q_T)
 *
 * accuracy(t)         = fraction of samples whose argmax over classes of
 *                       Σ_{s=1..t} out_s equals the label, t = 1..T (the
 *                       output node accumulates, it does not spike; ties go
 *                       to the first class, NaN never wins)
 * ann/qcfs accuracy   = argmax of the ANN / QCFS-ANN output equals the label
 * firing_rate         = spikes / (neurons × samples × steps)
 * rate_by_channel[c]  = spikes in channel c / (neurons_c × samples × steps)
 * dead_fraction       = fraction of (neuron, sample) pairs with N = 0
 * saturated_fraction  = fraction of (neuron, sample) pairs with N = T
 * total error         e = φ − a        mean e, MSE = mean e², rel_l2 = ‖φ−a‖/‖a‖
 * local error         e = φ − ReLU(z)  mean, MSE, rel_l2 = ‖e‖/‖ReLU(z)‖
 * clip_err            = clip(z, 0, θ) − ReLU(z)     ( = −(z−θ)₊ )
 * quant_err           = q_T(z) − clip(z, 0, θ)
 * uneven_err          = φ − q_T(z)
 *                       clip_err + quant_err + uneven_err = φ − ReLU(z);
 *                       each has mean, MSE and mean |e|
 * clipped_fraction    = fraction of pairs with z > θ
 * (all means are over the (neuron, sample) pairs of the layer)
 * fanout              = nc_node_fanout(net, node): synapses one output
 *                       value drives in the next weighted layers
 * sops                = spikes × fanout                (synaptic operations)
 * ann_macs            = fanout × neurons × samples: the MACs the ANN's
 *                       consumer layers spend on this layer's outputs
 * net sops_per_mac    = Σ sops / (nc_net_macs(net) × samples)
 *
 * ---- raster and traces ------------------------------------------------
 * Raster: spikes of the first raster_samples samples of the run and of
 * k = min(raster_neurons, neurons) neurons per layer, neuron j being the
 * flat index ⌊j·neurons/k⌋ of a sample; all T steps, bit-packed.
 * Traces: for the first trace_samples samples and k = min(trace_neurons,
 * neurons) neurons chosen the same way: the input current x_t, the spike
 * s_t and the membrane.  The engine only shows inputs and spikes, so the
 * membrane is RECONSTRUCTED exactly by the IF rule of the node:
 *     v_0 = v0_fraction·θ;   m_t = v_{t−1} + x_t;
 *     v_t = m_t − s_t·θ  (reset by subtraction)   or  (1 − s_t)·m_t  (to zero)
 * using the observed s_t (not a re-computed threshold test), so a trace
 * agrees with the spikes even where the engine's rounding decided a tie. */
#ifndef NC_RECORD_H
#define NC_RECORD_H

#include "nc_net.h"

/* Record spec: 0 means "the default", NC_RECORD_NONE means "none". */
#define NC_RECORD_NONE (-1)
#define NC_RECORD_DEFAULT_RASTER_SAMPLES 4
#define NC_RECORD_DEFAULT_RASTER_NEURONS 1024
#define NC_RECORD_DEFAULT_TRACE_SAMPLES 1
#define NC_RECORD_DEFAULT_TRACE_NEURONS 4

typedef struct nc_record nc_record;

/* Optional: the raster of EVERY sample, handed over batch by batch, for a
 * caller that keeps more samples than the record holds (e.g. in a file).
 * Called by nc_record_end_batch for each layer with the batch's n samples
 * (run indices first … first + n − 1) of the layer's chosen neurons: bit
 * (s·neurons + j)·T + t of `bits`, LSB first, s counted from `first`.  The
 * bits are valid only during the call.  Not called for a failed batch. */
typedef void (*nc_raster_sink)(void *user, const nc_record *rec, int layer, int64_t first, int64_t n, int neurons,
                               int T, const uint8_t *bits);

typedef struct nc_record_spec {
    int layers;          /* NC_RECORD_NONE: no layer is recorded — the
                          * accuracies only, and observers need not be
                          * called (an evaluation nobody inspects); else
                          * every IF node                                  */
    int raster_samples;  /* first samples of the run in the raster        */
    int raster_neurons;  /* neurons per layer in the raster               */
    int trace_samples;   /* first samples of the run with membrane traces */
    int trace_neurons;   /* neurons per layer with membrane traces        */
    nc_raster_sink raster_sink; /* NULL: none                             */
    void *raster_sink_user;
} nc_record_spec;

/* A record for `net` (which must outlive it) simulated for T steps.
 * spec may be NULL (defaults). */
nc_status nc_record_new(const nc_net *net, int T, const nc_record_spec *spec, nc_record **out, nc_error *err);
void nc_record_free(nc_record *rec); /* NULL is a no-op */

/* ---- feeding a record ------------------------------------------------- */

/* Starts a batch of n samples: clears the per-batch buffers. */
nc_status nc_record_begin_batch(nc_record *rec, int64_t n, nc_error *err);

/* Observer hooks (same signatures as nc_observer in sim/nc_engine.h; `user`
 * is the record).  Rows: n in ANN mode; T·n, time-major, in SNN mode (an
 * engine may also deliver the steps of a node in several calls, in order).
 *   observe_ann       : stores a for each IF node (ANN mode output)
 *   observe_snn       : the spike values of each IF node
 *   observe_snn_input : the input current of each IF node
 * Other nodes are ignored.  A bad call (wrong row count, unknown batch)
 * sets a sticky error that nc_record_end_batch returns. */
void nc_record_observe_ann(void *user, int node, const float *data, int64_t rows, int64_t per_row);
void nc_record_observe_snn(void *user, int node, const float *data, int64_t rows, int64_t per_row);
void nc_record_observe_snn_input(void *user, int node, const float *data, int64_t rows, int64_t per_row);

/* ---- sums over the steps ----------------------------------------------
 * Most metrics need only each neuron's spike count and input sum over the
 * T steps; the raster and traces need every step of the run's first few
 * samples.  An engine that sums on its side (a GPU: T times less to copy
 * and to add up on the host) can feed a batch that way:
 *   nc_record_begin_batch(rec, n)
 *   nc_record_expect_sums(rec)
 *   observe_snn(_input) with rows = steps · nc_record_step_samples(rec) —
 *       every step of only the batch's first step_samples samples (none
 *       when 0);
 *   nc_record_observe_sums once per IF node: spikes[s·per_row + i] = the
 *       steps where value i of sample s was ≠ 0, inputs = Σ_t x_t summed in
 *       step order in float (NULL: no input currents, as without
 *       observe_snn_input), for all n samples;
 *   nc_record_end_batch(rec, …)
 * The record then holds what the per-step feeding gives, bit for bit. */
/* The leading samples of the open batch whose every step the record needs:
 * those among the run's first raster and trace samples; every sample with a
 * raster sink (then sums bring nothing). */
int64_t nc_record_step_samples(const nc_record *rec);
/* This batch's IF nodes come as sums (call after nc_record_begin_batch). */
void nc_record_expect_sums(nc_record *rec);
void nc_record_observe_sums(void *user, int node, const float *spikes, const float *inputs, int64_t n,
                            int64_t per_row);

typedef enum nc_record_ref { NC_RECORD_REF_ANN, NC_RECORD_REF_QCFS } nc_record_ref;

/* Counts the correct answers of a reference forward (out [n, F]) in the
 * current batch; they enter the totals with the batch. */
nc_status nc_record_add_reference(nc_record *rec, nc_record_ref which, const float *out, int64_t n,
                                  int64_t classes, const int32_t *labels, nc_error *err);

/* Ends the batch: the SNN output out [T, n, classes] gives accuracy(t), the
 * observed spikes, currents and activations give every layer metric.
 * Fails (and adds nothing) when an observer call was bad or a layer did not
 * see all T steps. */
nc_status nc_record_end_batch(nc_record *rec, const int32_t *labels, const float *out, int64_t classes,
                              nc_error *err);

/* ---- a run split over ranks (sim/nc_shard.h) ----------------------------
 * Each rank feeds a record of its own (made with the same net, T and spec)
 * whose totals stay empty: it opens each batch at the batch's first sample
 * of the whole run, its observers fill the batch, and the batch then joins
 * the run's record `total` with nc_record_end_batch_into — in run order
 * (total's next sample must be the batch's first; NC_ERR_ARGUMENT
 * otherwise).  The totals are then added up exactly as one record fed every
 * batch in that order adds them, bit for bit; raster and traces of the first
 * samples land where one record puts them, and total's raster sink gets
 * each batch.  nc_record_end_batch(rec) is nc_record_end_batch_into(rec, rec). */
nc_status nc_record_begin_batch_at(nc_record *rec, int64_t first, int64_t n, nc_error *err);
nc_status nc_record_end_batch_into(nc_record *rec, nc_record *total, const int32_t *labels, const float *out,
                                   int64_t classes, nc_error *err);

/* ---- reading a record -------------------------------------------------- */

int nc_record_T(const nc_record *rec);
int64_t nc_record_samples(const nc_record *rec);      /* in finished batches */
const nc_net *nc_record_net(const nc_record *rec);
const nc_record_spec *nc_record_get_spec(const nc_record *rec); /* defaults resolved */

/* accuracy(t) for t = 1..T; NAN before the first batch. */
double nc_record_accuracy(const nc_record *rec, int t);
/* NAN when no reference of that kind was added. */
double nc_record_ann_accuracy(const nc_record *rec);
double nc_record_qcfs_accuracy(const nc_record *rec);

typedef struct nc_error_stats {
    double mean, mse, mean_abs, rel_l2; /* rel_l2 only for total and local */
} nc_error_stats;

typedef struct nc_layer_stats {
    int node;                  /* index in the net                         */
    const char *name;          /* the node's name                          */
    int64_t neurons;           /* values per sample                        */
    int channels;
    int64_t spikes;
    double firing_rate, dead_fraction, saturated_fraction;
    double fanout, sops, ann_macs;
    int has_ann;               /* total error known (ANN activations seen) */
    nc_error_stats total, local, clip, quant, uneven;
    double clipped_fraction;
} nc_layer_stats;

typedef struct nc_record_totals {
    int64_t spikes;
    double sops;               /* Σ over layers                              */
    double ann_macs;           /* nc_net_macs(net) × samples                 */
    double sops_per_mac;       /* sops / ann_macs (NAN when no MACs)         */
} nc_record_totals;

int nc_record_layer_count(const nc_record *rec);
/* Index of the layer recording node `node`, or -1. */
int nc_record_layer_of_node(const nc_record *rec, int node);
void nc_record_layer_stats(const nc_record *rec, int layer, nc_layer_stats *out);
void nc_record_get_totals(const nc_record *rec, nc_record_totals *out);
/* Per channel: spike counts (channels values) and rate_by_channel. */
const int64_t *nc_record_channel_spikes(const nc_record *rec, int layer);
double nc_record_channel_rate(const nc_record *rec, int layer, int channel);

typedef struct nc_raster {
    int samples;               /* samples recorded so far (≤ the spec)      */
    int neurons;               /* chosen neurons                            */
    int T;
    const int64_t *neuron_index; /* flat index within a sample, [neurons]   */
    const uint8_t *bits;       /* bit b = (s·neurons + j)·T + t, LSB first  */
} nc_raster;

/* The raster of a layer (pointers stay valid until the next batch). */
void nc_record_raster(const nc_record *rec, int layer, nc_raster *out);
/* 1 if sample s, chosen neuron j spiked at step t (0-based), else 0. */
int nc_raster_spike(const nc_raster *r, int s, int j, int t);

typedef struct nc_trace {
    int samples, neurons, T;
    const int64_t *neuron_index; /* [neurons]                                 */
    const float *current;      /* x_t:  [samples, neurons, T]                */
    const uint8_t *spike;      /* s_t:  [samples, neurons, T], 0 or 1        */
    const float *v;            /* v_t:  [samples, neurons, T + 1], v_0 first */
    const float *threshold;    /* θ of each chosen neuron, [neurons]         */
} nc_trace;

void nc_record_trace(const nc_record *rec, int layer, nc_trace *out);

/* ---- saving ------------------------------------------------------------- */

/* Writes the record as HDF5 (readable with h5py), temp file then rename:
 *   /  attrs format = "neurocuda-recording", version = 1, T, samples
 *   /accuracy_by_step  f64 [T]      /ann_accuracy, /qcfs_accuracy  f64 scalars
 *   /layer_names       strings, network order
 *   /totals            attrs spikes, sops, ann_macs, sops_per_mac
 *   /definitions       attrs <metric> = formula, "<metric>.units" = units
 *   /layers/<escaped node name>   attrs node_name, node_index, shape, neurons,
 *        channels, threshold, spikes, firing_rate, dead_fraction, ...,
 *        total_mean/_mse/_rel_l2, local_*, clip_*, quant_*, uneven_*
 *     neuron, step, sample  i32 [E]: spike events of the raster (neuron =
 *        flat index in a sample, step 0-based, sample = index in the run)
 *     raster_neurons i64 [k]
 *     rate_by_channel f64 [C], spike_count_by_channel i64 [C]
 *     traces/ neuron i64 [k], current f32 [S,k,T], spike u8 [S,k,T],
 *             v f32 [S,k,T+1]
 * The node name is escaped with nc_h5_escape_name ('/' → %2F).  Strings are
 * fixed-length UTF-8 (see nc_h5util.h), so h5py returns bytes: .decode(). */
nc_status nc_record_save(const nc_record *rec, const char *path, nc_error *err);

/* ---- reading a saved recording -------------------------------------------- */

/* What nc_recording_load reads back from a file nc_record_save wrote: the
 * summary, and per layer its totals and raster events (traces are left in
 * the file). */
typedef struct nc_recording_layer {
    char name[NC_NAME_MAX];    /* the node's name (attribute node_name)     */
    int64_t node_index, neurons, channels, spikes, raster_samples;
    double firing_rate, sops;
    int64_t n_events;          /* raster spike events                       */
    int32_t *neuron, *step, *sample; /* [n_events] each, owned             */
    double *rate_by_channel;   /* [channels], owned                         */
} nc_recording_layer;

typedef struct nc_recording {
    int T;
    int64_t samples;
    double *accuracy_by_step;  /* [T], owned; index t−1                     */
    double ann_accuracy, qcfs_accuracy; /* NAN when not measured           */
    int64_t total_spikes;
    double total_sops;
    int n_layers;
    nc_recording_layer *layers; /* owned                                    */
} nc_recording;

/* Reads and validates a recording: format and version, T (1..1e6), every
 * array's size (against the file and the memory budget), layer groups that
 * match layer_names, events inside [0, neurons) × [0, T) × [0,
 * raster_samples).  Errors: NC_ERR_IO (cannot open), NC_ERR_FORMAT (not a
 * recording, damaged), NC_ERR_MEMORY (over the budget); the message names
 * the file and the object at fault. */
nc_status nc_recording_load(const char *path, nc_recording **out, nc_error *err);
void nc_recording_free(nc_recording *r); /* NULL is a no-op */
/* 1 if `path` is an HDF5 file whose root attribute format is
 * "neurocuda-recording", else 0.  Never fails. */
int nc_recording_probe(const char *path);

#endif
