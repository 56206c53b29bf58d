/* nc_calib.h — activation statistics of a network's neuron layers, and the
 * thresholds chosen from them (conversion.md §2.1).  Pure math: no engine.
 *
 * Every NEURON node (relu, clip, qcfs, if) of the net gets an accumulator, per
 * layer and per channel.  Channel = axis 0 of the node's per-sample shape, so
 * a feature map [C, H, W] has C channels and a vector [F] has F (every feature
 * is a channel).  The data come in through nc_calib_add(), which has the
 * observer signature of sim/nc_engine.h, in two passes over the SAME data:
 *
 *   pass 1 (NC_CALIB_PASS_MAX): count, zeros (a ≤ 0), sum and max.
 *   pass 2 (NC_CALIB_PASS_HISTOGRAM): a histogram of the positive activations,
 *     `bins` equal bins over (0, max] of each channel, and a layer histogram
 *     over (0, layer max] (its own bins, filled from the same values).
 *     With w = max / bins, a value a > 0 falls in bin min(bins − 1, ⌊a / w⌋).
 *
 * Memory: bins × (channels + 1) × 8 bytes per neuron layer.
 *
 * Threshold methods (each layer-wise, from the layer histogram, or
 * channel-wise, from each channel's):
 *   max      θ = the largest activation seen (Diehl 2015).
 *   pP       θ = the P-th percentile of the NON-ZERO activations (snn_toolbox
 *            convention; Rueckauer 2017), numpy's linear rule: with the n
 *            positive values sorted, v_k at fractional rank
 *            k = P/100 · (n − 1), interpolated between v_⌊k⌋ and v_⌊k⌋+1.
 *            Each v_i is estimated from the cumulative histogram, placed
 *            inside its bin at (j + ½)/h of the width (j its place among the
 *            bin's h values), so the result is within one bin width of the
 *            exact percentile.
 *   mmse     θ = argmin over θ_i = max·(1 − 0.01 i), i = 0..94, of
 *              E(θ) = Σ_a (q(a) − a)²,
 *              q(a) = clip(⌊a·T/θ + φ⌋, 0, T) · θ / T,
 *            summed over the histogram (bin centres weighted by their counts;
 *            zeros quantise to 0 and add nothing).  T = target time steps
 *            (or QCFS levels L).  φ = 0.5 is the rounding quantiser of an IF
 *            neuron started at v0 = θ/2 (our SNN); φ = 0 is the floor of
 *            Li et al.'s find_threshold_mse (v0 = 0).
 *
 * Degenerate cases: a channel that never activated gets the layer threshold;
 * a layer that never activated gets 1.0 and a warning.
 *
 * Not thread-safe: one engine calls nc_calib_add from one thread at a time. */
#ifndef NC_CALIB_H
#define NC_CALIB_H

#include "nc_net.h"

#define NC_CALIB_DEFAULT_BINS 2048

typedef enum nc_calib_method {
    NC_CALIB_MAX,
    NC_CALIB_P99,
    NC_CALIB_P99_9,  /* the default (snn_toolbox, Rueckauer 2017) */
    NC_CALIB_P99_99,
    NC_CALIB_MMSE,
    NC_CALIB_METHOD_COUNT
} nc_calib_method;

#define NC_CALIB_DEFAULT_METHOD NC_CALIB_P99_9

/* "max", "p99", "p99.9", "p99.99", "mmse". */
const char *nc_calib_method_name(nc_calib_method m);
/* Parses one of the names above (also "99.9", "99.9%", "p99.9%"); 0 ok, -1 bad. */
int nc_calib_method_parse(const char *text, nc_calib_method *out);
/* The percentile of a pP method (99, 99.9, 99.99), 100 for max, 0 for mmse. */
double nc_calib_method_percentile(nc_calib_method m);

typedef enum nc_calib_pass { NC_CALIB_PASS_MAX, NC_CALIB_PASS_HISTOGRAM } nc_calib_pass;

typedef struct nc_calib_stats nc_calib_stats;

/* An accumulator for every neuron node of `net` (its shapes must be
 * inferred).  bins ≤ 0 means NC_CALIB_DEFAULT_BINS.  Fails when the net has no
 * neuron node.  The stats keep node indices and names, not the net. */
nc_status nc_calib_new(const nc_net *net, int bins, nc_calib_stats **out, nc_error *err);
void nc_calib_free(nc_calib_stats *s); /* NULL is a no-op */

/* Starts a pass.  PASS_MAX clears everything; PASS_HISTOGRAM needs a finished
 * max pass, fixes the histogram ranges and clears the histograms. */
nc_status nc_calib_begin_pass(nc_calib_stats *s, nc_calib_pass pass, nc_error *err);
/* The observer (user = the nc_calib_stats): `data` holds rows × per_row
 * values of node `node`; nodes that are not tracked are ignored. */
void nc_calib_add(void *user, int node, const float *data, int64_t rows, int64_t per_row);
/* Ends a pass; fails if nc_calib_add saw data whose size does not fit a node. */
nc_status nc_calib_end_pass(nc_calib_stats *s, nc_error *err);

/* ---- what was collected ------------------------------------------------- */

int nc_calib_layer_count(const nc_calib_stats *s);           /* neuron layers */
int nc_calib_layer_node(const nc_calib_stats *s, int layer); /* its node index */
const char *nc_calib_layer_name(const nc_calib_stats *s, int layer);
int nc_calib_find_node(const nc_calib_stats *s, int node);   /* layer or -1 */
int nc_calib_channels(const nc_calib_stats *s, int layer);
int nc_calib_bins(const nc_calib_stats *s);
int nc_calib_has_histogram(const nc_calib_stats *s); /* 1 after pass 2 */

/* Statistics of one layer (channel = −1) or one channel. */
typedef struct nc_act_stats {
    int64_t count;        /* activations seen                                 */
    double zero_fraction; /* share of activations ≤ 0                         */
    double mean;          /* mean over all activations, zeros included        */
    float max;            /* largest activation (0 if it never activated)     */
    float p99, p99_9, p99_99; /* percentiles of the non-zero activations; 0
                             before the histogram pass or for a dead channel */
} nc_act_stats;

nc_status nc_calib_get_stats(const nc_calib_stats *s, int layer, int channel, nc_act_stats *out,
                             nc_error *err);
/* The histogram of a layer (channel = −1) or channel: `bins` counts over
 * (0, *hi]; NULL before pass 2 or for bad indices. */
const uint64_t *nc_calib_histogram(const nc_calib_stats *s, int layer, int channel, float *hi);

/* Raw per-channel accumulators, for saving and restoring stats (project
 * files).  hist has `bins` entries over (0, max], or is NULL before pass 2. */
typedef struct nc_calib_channel {
    int64_t count, zeros;
    double sum;
    float max;
    const uint64_t *hist;
} nc_calib_channel;
nc_status nc_calib_get_channel(const nc_calib_stats *s, int layer, int channel, nc_calib_channel *out,
                               nc_error *err);
/* Restores one channel (hist may be NULL).  Once every channel of every layer
 * with a histogram is set, call nc_calib_rebuild_layers(). */
nc_status nc_calib_set_channel(nc_calib_stats *s, int layer, int channel, const nc_calib_channel *in,
                               nc_error *err);
/* Recomputes the layer maxima and layer histograms from the channels (the
 * layer histogram is rebuilt from channel bin centres, so it is approximate). */
void nc_calib_rebuild_layers(nc_calib_stats *s);

/* ---- thresholds --------------------------------------------------------- */

/* The P-th percentile (0 < P ≤ 100) of the non-zero activations of a layer
 * (channel −1) or channel; 0 when it never activated or before pass 2. */
float nc_calib_percentile(const nc_calib_stats *s, int layer, int channel, double p);
/* E(θ) of the mmse method above for a layer or channel (T ≥ 1, 0 ≤ φ < 1). */
double nc_calib_mmse_error(const nc_calib_stats *s, int layer, int channel, float theta, int T, float phi);
/* The threshold of one layer or channel by `method`; 0 when it never
 * activated (the caller applies the fallbacks; nc_calib_thresholds does). */
float nc_calib_select(const nc_calib_stats *s, int layer, int channel, nc_calib_method method, int T,
                      float phi);

/* Thresholds for the neuron nodes of a net: entry i belongs to node i. */
typedef struct nc_thresholds {
    int n_nodes;
    int *count;         /* per node: 0 (none), 1 (layer-wise) or C (channel-wise) */
    float **values;     /* per node: count values, owned                           */
    char warnings[2048];/* newline-separated notices (dead layers and channels)    */
} nc_thresholds;

nc_thresholds *nc_thresholds_new(int n_nodes); /* NULL on out of memory */
void nc_thresholds_free(nc_thresholds *t);     /* NULL is a no-op */
/* Sets node `node`'s thresholds (copied). */
nc_status nc_thresholds_set(nc_thresholds *t, int node, int n, const float *values, nc_error *err);

typedef struct nc_calib_choice {
    nc_calib_method method;
    int per_channel;    /* 0 = one θ per layer, 1 = one per channel          */
    int T;              /* mmse: target steps (QCFS L); ignored otherwise     */
    float phi;          /* mmse: quantiser shift φ (0.5 with v0 = θ/2)        */
} nc_calib_choice;

/* {p99.9, layer-wise, T 8, φ 0.5}. */
nc_calib_choice nc_calib_choice_default(void);

/* Thresholds for every tracked layer (n_nodes = the net's node count), with
 * the dead-channel and dead-layer fallbacks applied and noted in warnings. */
nc_status nc_calib_thresholds(const nc_calib_stats *s, int n_nodes, const nc_calib_choice *choice,
                              nc_thresholds **out, nc_error *err);

#endif
