/* nc_engine_loihi.h — the "loihi" engine: the converted SNN run as the
 * integer IF neurons of a Loihi-2-style chip would run it, bit-accurate to
 * conversion.md §5.2 (Lava's PyLifModelBitAcc / PyDenseModelBitAcc with
 * du = 4095, dv = 0).  The quantisation is core/nc_loihi.h's.
 *
 * Modes.  SNN mode runs integers.  ANN and QCFS mode run the float network
 * on an internal cpu engine (they are the references the integer network is
 * compared with, and calibration runs in ANN mode).
 *
 * Per synaptic layer, per neuron and step (SNN mode):
 *   acc   = Σ_j weight[i, j] · payload_j      (exact integers: int32 sums,
 *           checked against Σ|weight|·max payload < 2^31 before each layer;
 *           average pools are integer sum pools, folded into the weights)
 *   a_in  = acc << (weight_exp − input_shift)   (>> when negative: floor)
 *   u     = wrap24(dec(u, du + 1) + (a_in << 6))     wrap into (−2^23, 2^23]
 *   v     = sat24(dec(v, dv) + u + (bias_mant << bias_exp))   ±(2^23 − 1)
 *   fire  : v > vth << 6 (GT, the chip) or v ≥ vth << 6 (GE)
 *   reset : v −= vth << 6 (SUBTRACT, default: our QCFS neurons) or v = 0 (ZERO,
 *           Lava's stock LIF)
 *   dec(x, d) = sign(x)·((|x|·(4096 − d)) >> 12);  v(0) = round(v0_fraction·vth·64)
 * Binary spikes carry payload 1; graded spikes carry k = the number of
 * thresholds v holds (⌊v / vth·64⌋ for GE, ⌊(v − 1) / vth·64⌋ for GT), at
 * most 2^message_bits − 1, and reset subtracts k thresholds.  The input
 * arrives as graded payloads round(x·2^input_frac_bits), clipped to 24 bits.
 * A pre-spike MaxPool (not a chip operation) pools the running sums of the
 * integer currents exactly like the cpu engine pools float ones.  The output
 * node reads the last layer's current each step (u + bias, no neuron).
 *
 * Synaptic delay.  On the chip a synapse delivers at step t what its source
 * spiked at t − 1, so a layer at depth d (d delayed synapses before it) first
 * hears the input at step d and the output at D = max depth.
 *   NC_LOIHI_DELAY_OFF          : no delay; the output is read over steps 0…T−1.
 *   NC_LOIHI_DELAY_COMPENSATED  : (default) the delay is there, and each layer
 *       starts (v = v(0), bias on) at its step d, as a per-layer reset offset
 *       (Lava's LIFReset offset) would make it, so it sees exactly the inputs
 *       it would see without delay; the output is read over steps D…D+T−1:
 *       effective latency T + D = T + L − 1 (L = synaptic layers on the way).
 *       The spikes are those of DELAY_OFF, shifted by d; the engine computes
 *       each layer over its own window of T steps.
 *   NC_LOIHI_DELAY_RAW          : the delay with every layer starting at step 0
 *       and the output read over steps 0…T−1 (what a chip run of T steps with
 *       no offsets gives: the last layers hear the input late).
 * Observers (nc_engine.h) see T·N rows per node: every layer's own window, in
 * float units — spikes as k·θ (θ the node's float threshold), the input
 * current of an IF node as (u + bias)/(vth·64)·θ, other nodes dequantised.
 *
 * Options reach the engine through nc_engine_loihi_set_options; the engine
 * table (nc_engine_registry.c) registers each field as an option of the
 * "loihi" entry, so `--engine-opt KEY=VALUE` (and the CLI's --loihi-*
 * switches, app/nc_cli_loihi.c) set them when the engine is created. */
#ifndef NC_ENGINE_LOIHI_H
#define NC_ENGINE_LOIHI_H

#include "../core/nc_loihi.h"
#include "nc_engine.h"

typedef enum nc_loihi_delay {
    NC_LOIHI_DELAY_COMPENSATED,
    NC_LOIHI_DELAY_OFF,
    NC_LOIHI_DELAY_RAW
} nc_loihi_delay;

typedef struct nc_loihi_options {
    nc_loihi_quant_options quant;
    nc_reset reset;       /* default NC_RESET_SUBTRACT                        */
    nc_compare compare;   /* default NC_FIRE_GT (the chip)                    */
    nc_loihi_delay delay; /* default NC_LOIHI_DELAY_COMPENSATED               */
    int graded;           /* 0: binary spikes (default); 1: graded            */
    int message_bits;     /* graded payload bits, 1 … 24 (default 8)          */
} nc_loihi_options;

nc_loihi_options nc_loihi_options_default(void);

/* Spike and overflow counts of one synaptic layer, summed over the SNN
 * forwards since the network was loaded (or the last reset). */
typedef struct nc_loihi_layer_stats {
    int64_t spikes;         /* spike messages (graded: messages, not payload) */
    int64_t payload;        /* Σ payloads                                     */
    int64_t u_wraps;        /* neuron-steps whose current wrapped at 24 bits  */
    int64_t v_saturations;  /* neuron-steps whose membrane saturated          */
    int64_t neuron_steps;
    int64_t payload_clipped; /* input payloads clipped to 24 bits (layers reading the input) */
} nc_loihi_layer_stats;

nc_engine *nc_engine_loihi_new(void);
/* 1 if e is a loihi engine. */
int nc_engine_is_loihi(const nc_engine *e);
/* Sets the options; with a network loaded it is quantised again (and a
 * failure leaves the engine with no SNN until options that work are set).
 * NC_ERR_ARGUMENT for a bad value or an engine that is not loihi. */
nc_status nc_engine_loihi_set_options(nc_engine *e, const nc_loihi_options *o, nc_error *err);
nc_loihi_options nc_engine_loihi_get_options(const nc_engine *e);
/* The quantised network of the loaded net, or NULL (not loaded, or an ANN). */
const nc_loihi_net *nc_engine_loihi_quantised(const nc_engine *e);
/* D, the synaptic delays to the output (0 when none is loaded). */
int nc_engine_loihi_delay_steps(const nc_engine *e);
/* The chip steps one sample takes for T steps of output: T + D with the
 * compensated delay, else T. */
int64_t nc_engine_loihi_latency(const nc_engine *e, int T);
/* Stats of layer `layer` (of nc_engine_loihi_quantised's layers). */
nc_loihi_layer_stats nc_engine_loihi_layer_stats(const nc_engine *e, int layer);
void nc_engine_loihi_reset_stats(nc_engine *e);

#endif
