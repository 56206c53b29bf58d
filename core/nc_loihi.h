/* nc_loihi.h — a float SNN (IF neurons, as `neurocuda convert` writes them)
 * as the integer network of a Loihi-2-style chip (conversion.md §5), the
 * report of what that costs, hardware checks, and the lava-dl netx export.
 *
 * ---- the integer network --------------------------------------------------
 * A "synaptic layer" is one conv or dense node together with
 *   its source : the population it reads, an IF neuron node or the input,
 *                reached back through pools and flattens ("source path");
 *   its target : the population it drives, an IF neuron node or the output,
 *                reached forward through pools and flattens ("target path").
 * Every IF node is the target of exactly one layer.  Supported between the
 * populations: avgpool (constant divisor), maxpool (PRE_SPIKE: max over
 * running sums; AVG: as avgpool), global avgpool, flatten.  Refused, with the
 * node named: add, concat, affine, scale, recurrent edges, gated max pool,
 * non-IF neurons, branches (a node read by two nodes), two weighted layers
 * with no neuron between.
 *
 * Scaling (per layer; conversion.md §5.3).  Spikes are 1 (binary) and the
 * float spike value θ_src moves into the weights; each layer is normalised to
 * its target's threshold, so that the threshold is exactly 1 in the layer's
 * units and its quantisation error moves into weights and biases:
 *     W̃[o, j] = W[o, j] · θ_src[ch(j)] · fold / θ_tgt[ch(o)]
 *     b̃[o]    = b[o] / θ_tgt[ch(o)]
 * fold = 1/area of every average pool on either path (pools run as integer
 * SUM pools).  The input is not spikes: it arrives as a graded payload
 * round(x · 2^input_frac_bits), θ_src = 1.  The output has no threshold: it
 * gets θ_tgt = theta_out = (its largest possible current per step, all
 * sources spiking) / 16, so that its current never wraps at 24 bits, and its
 * gain is chosen like a threshold's.
 * Gain: with m = max |W̃| and vt = vth_target,
 *     weight_exp = clamp(⌈log2(m·vt/254)⌉, −8, 7)
 *     vth_mant   = min(⌊254 · 2^weight_exp / m⌋, 131071)     (vt ≤ vth < 2·vt)
 * so that the largest weight maps to ±254: the 8-bit range is used.
 *     weight = clamp(2·round(W̃ · vth / 2^weight_exp / 2), −256, 254)   (even:
 *              8 significant bits, Lava's MIXED sign mode, as slayer's
 *              quantize_8bit)
 *     bias   = bias_mant << bias_exp ≈ b̃ · vth · 64, bias_mant 13-bit signed,
 *              bias_exp the smallest of 0..7 that fits the largest bias
 *     threshold (v units) = vth_mant << 6;  v(0) = round(v0_fraction·vth·64)
 * The engine (sim/engine_loihi.c) then runs, per neuron and step,
 *     a_in = acc << (weight_exp − input_shift)   (>> when negative, floor)
 *     u = wrap24(dec(u, du+1) + (a_in << 6));  v = sat24(dec(v, dv) + u + bias)
 * with du = 4095, dv = 0 (an IF neuron).  One value of the layer's units is
 * 1/(vth·64) of the target's threshold, in v units.
 *
 * Errors: a layer whose weights cannot be represented even at the ends of the
 * exponent range (m > 254·2^7: vth would fall below 1; or every weight rounds
 * to 0 at weight_exp −8 and vth 131071), or a non-finite weight, bias or
 * threshold, fails with NC_ERR_UNSUPPORTED naming the node. */
#ifndef NC_LOIHI_H
#define NC_LOIHI_H

#include "nc_net.h"

/* Bit widths (conversion.md §5.1). */
#define NC_LOIHI_W_MIN (-256)
#define NC_LOIHI_W_MAX 254
#define NC_LOIHI_WEXP_MIN (-8)
#define NC_LOIHI_WEXP_MAX 7
#define NC_LOIHI_VTH_MAX 131071 /* 17-bit unsigned mantissa               */
#define NC_LOIHI_VTH_SHIFT 6    /* threshold = vth_mant << 6              */
#define NC_LOIHI_ACT_SHIFT 6    /* u += a_in << 6                          */
#define NC_LOIHI_BIAS_MIN (-4096)
#define NC_LOIHI_BIAS_MAX 4095  /* 13-bit signed mantissa                  */
#define NC_LOIHI_BIAS_EXP_MAX 7 /* 3-bit exponent                          */
#define NC_LOIHI_UV_MAX (1 << 23) /* u wraps, v saturates at 24 bits       */
#define NC_LOIHI_DECAY_UNITY 4096
#define NC_LOIHI_IF_DU 4095     /* IF: the current does not persist        */
#define NC_LOIHI_IF_DV 0        /* IF: no leak                             */
#define NC_LOIHI_DEFAULT_VTH 4096
#define NC_LOIHI_DEFAULT_INPUT_BITS 8

typedef struct nc_loihi_quant_options {
    int vth_target;      /* 1 … 131071 (default 4096): the threshold mantissa
                          * aimed at; higher = finer biases and v(0), less
                          * headroom before v saturates (2^23 / (vth·64)
                          * thresholds)                                       */
    int input_frac_bits; /* 0 … 16 (default 8): fractional bits of the input
                          * payload round(x·2^bits)                           */
} nc_loihi_quant_options;

nc_loihi_quant_options nc_loihi_quant_options_default(void);

/* The quantisation error of one kind of value of a layer, in units of the
 * target's threshold (the normalised values W̃, b̃ above). */
typedef struct nc_loihi_error {
    int64_t count;        /* values                                         */
    double max_ref;       /* largest |value| before quantisation            */
    double rms_rel;       /* ‖q − x‖₂ / ‖x‖₂ (0 when x = 0)                 */
    double max_abs;       /* max |q − x|                                    */
    int64_t clipped;      /* values outside the integer range, clipped      */
    int64_t zeroed;       /* non-zero values that became 0                  */
    int64_t worst_index;  /* the clipped value with the largest error, −1   */
    double worst_value, worst_clipped_to; /* that value, before and after    */
} nc_loihi_error;

typedef enum nc_loihi_role {
    NC_LOIHI_ROLE_INPUT,    /* the input population (graded payloads)    */
    NC_LOIHI_ROLE_SOURCE,   /* pool/flatten between a population and W   */
    NC_LOIHI_ROLE_WEIGHTED, /* conv or dense: a layer's synapses         */
    NC_LOIHI_ROLE_TARGET,   /* pool/flatten between W and its target     */
    NC_LOIHI_ROLE_NEURON,   /* an IF population                          */
    NC_LOIHI_ROLE_OUTPUT    /* the output (reads the last layer's current) */
} nc_loihi_role;

typedef struct nc_loihi_layer {
    int node;             /* the conv or dense node                           */
    int source, target;   /* population nodes (input / IF; IF / output)       */
    int depth;            /* synaptic delays before this layer's output:
                           * 0 when the source is the input, else 1 + the
                           * depth of the layer feeding the source            */
    int weight_exp;       /* [−8, 7]                                          */
    int vth_mant;         /* [1, 131071]: threshold (or output gain) mantissa */
    int input_shift;      /* fractional bits of the source payload            */
    int bias_exp;         /* [0, 7]                                           */
    int64_t n_weight;
    int16_t *weight;      /* node->weight's layout, even, [−256, 254]          */
    int n_bias;           /* = out channels of the node (0: no bias)          */
    int16_t *bias_mant;   /* [n_bias], [−4096, 4095]                          */
    int32_t v0;           /* initial membrane, v units                        */
    double fold;          /* product of 1/area of the folded average pools     */
    double theta_out;     /* the output's stand-in threshold (1 for IF targets) */
    int64_t source_area;  /* product of the source path's sum-pool areas      */
    int64_t target_area;  /* product of the target path's sum-pool areas      */
    double w_abs_row_max; /* max over outputs of Σ|weight| (accumulator bound) */
    int vth_capped;       /* vth_mant hit 131071 (weights then use < 254)     */
    nc_loihi_error weights, thresholds, biases;
    double v0_error;      /* |v(0) − v0_fraction·θ| in thresholds             */
} nc_loihi_layer;

typedef struct nc_loihi_net {
    const nc_net *net;       /* not owned: must outlive this                 */
    nc_loihi_quant_options opts;
    int n_layers;
    nc_loihi_layer *layers;  /* in network order                             */
    nc_loihi_role *role;     /* per node                                     */
    int *layer_of;           /* per node: the layer it belongs to (weighted,
                              * target path, target IF/output), or −1        */
    int *population;         /* per node: for input/source-path/IF nodes the
                              * population whose payloads it holds, else −1  */
    int max_depth;           /* D: synaptic delays on the way to the output  */
} nc_loihi_net;

/* Quantises `net` (shapes inferred, IF neurons).  opts may be NULL
 * (defaults).  *out is a new net to free with nc_loihi_net_free. */
nc_status nc_loihi_quantise(const nc_net *net, const nc_loihi_quant_options *opts, nc_loihi_net **out,
                            nc_error *err);
void nc_loihi_net_free(nc_loihi_net *q); /* NULL is a no-op */

/* 1 if node `node` can be part of an integer network (the structural rules
 * above; `why` says why not), checked on the node alone and its neighbours. */
int nc_loihi_node_supported(const nc_net *net, int node, char *why, size_t why_size);

/* Values one output of node `node` sums: kh·kw for an average pool (and a
 * MaxPool run as one), H·W for a global average pool, else 1. */
int64_t nc_loihi_pool_area(const nc_net *net, int node);

/* The layer whose target is node `node`, or −1. */
int nc_loihi_layer_of_target(const nc_loihi_net *q, int node);
/* Channel (per-channel threshold index) of flat value j of a node of
 * `numel` values and `channels` channels: j / (numel / channels). */
static inline int nc_loihi_channel(int64_t j, int64_t numel, int channels)
{
    return channels > 1 ? (int)(j / (numel / channels)) : 0;
}

/* A text table, one line per layer: gain, exponents, errors, clipped values
 * (and the worst clipped value of each layer).  Returns buf. */
const char *nc_loihi_report_text(const nc_loihi_net *q, char *buf, size_t size);

/* ---- hardware checks ---------------------------------------------------------
 * Defaults from Intel's public Loihi 2 figures (128 neuro cores, up to 1 M
 * neurons and 120 M synapses per chip): 8192 neurons and 937 500 synapses per
 * core.  A neuron's input synapses must sit in its own core, so the fan-in
 * limit is the per-core synapse budget; fan-out is reported, not limited. */
typedef struct nc_loihi_hw_options {
    int cores_per_chip;         /* 128                                      */
    int64_t neurons_per_core;   /* 8192                                     */
    int64_t synapses_per_core;  /* 937 500                                  */
    int64_t max_fan_in;         /* = synapses_per_core                      */
    nc_reset reset;             /* the engine's reset: subtract needs microcode */
    int graded;                 /* graded spikes                            */
} nc_loihi_hw_options;

nc_loihi_hw_options nc_loihi_hw_options_default(void);

typedef struct nc_loihi_hw_layer {
    int layer;                  /* index in q->layers                          */
    int64_t neurons;            /* target neurons (0 for the output)           */
    int64_t synapses;           /* distinct (source neuron, target) pairs with
                                 * the pools expanded                           */
    int64_t weight_bytes;       /* 8-bit weights as stored: a conv's shared
                                 * kernel, a dense matrix                       */
    int64_t fan_in_max;         /* synapses into one target neuron             */
    double fan_in_mean;
    int64_t fan_out_max;        /* synapses out of one source neuron           */
    double fan_out_mean;
    int cores;                  /* neurons and synapses split over cores       */
} nc_loihi_hw_layer;

typedef struct nc_loihi_hw_report {
    int n_layers;
    nc_loihi_hw_layer *layers;
    int64_t neurons, synapses, weight_bytes;
    int cores, chips;
    int n_warnings, cap_warnings;
    char **warnings;            /* one line each, with the numbers             */
} nc_loihi_hw_report;

/* Fills out (clear it with nc_loihi_hw_report_clear). */
nc_status nc_loihi_hw_check(const nc_loihi_net *q, const nc_loihi_hw_options *opts, nc_loihi_hw_report *out,
                            nc_error *err);
void nc_loihi_hw_report_clear(nc_loihi_hw_report *r);
/* Table + warnings as text.  Returns buf. */
const char *nc_loihi_hw_text(const nc_loihi_net *q, const nc_loihi_hw_report *r, char *buf, size_t size);

/* ---- lava-dl netx export (conversion.md §5.4) --------------------------------
 * Writes /layer/0 (input), one group per synaptic layer (conv or dense; an
 * average pool before it folded into its weights), a flatten before a dense
 * that reads a feature map, and /simulation (Ts = 1, tSample = T).  Neurons
 * are CUBA with iDecay 4096 and vDecay 0 (an IF), vThMant, refDelay 1; the
 * weights are the engine's integers with weight_exp re-expressed as 0 (netx
 * stores no exponent: vThMant and the bias scale by 2^−weight_exp instead);
 * biases are in netx's units (bias_exp 6: the engine's bias >> 6).  What netx
 * cannot say (reset by subtraction, v(0), the input encoding, max pooling) is
 * listed in notes; the reset and v(0) are also kept as attributes of each
 * neuron group (nc_reset, nc_v0), which netx ignores.  Written to a temporary
 * file and renamed. */
typedef struct nc_loihi_notes {
    int count, capacity;
    char **lines;
} nc_loihi_notes;

void nc_loihi_notes_add(nc_loihi_notes *notes, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nc_loihi_notes_clear(nc_loihi_notes *notes);

typedef struct nc_loihi_netx_options {
    nc_reset reset;  /* the reset the network was run with (written as an attribute) */
    int T;           /* steps per sample, for /simulation/tSample (default 32)       */
} nc_loihi_netx_options;

nc_status nc_loihi_export_netx(const nc_loihi_net *q, const char *path, const nc_loihi_netx_options *opts,
                               nc_loihi_notes *notes, nc_error *err);

#endif
