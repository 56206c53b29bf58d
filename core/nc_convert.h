/* nc_convert.h — ANN → QCFS → SNN transforms of the IR (conversion.md §1–2).
 *
 * Pure IR rewrites: no engine, no data.  Every change adds an entry to
 * net->report saying what became of which node and why.  The pipeline is
 *
 *   nc_convert_prepare(net, maxpool strategy)     before calibration
 *   (calibrate: sim/nc_calibrate.h → nc_thresholds)
 *   nc_convert_to_qcfs(net, thresholds, L)        ReLU → QCFS(λ = θ, L, φ = ½)
 *   nc_convert_to_snn(net, options)               QCFS → IF(θ = λ, v0 = ½θ)
 *
 * A net imported with QCFS neurons already (nc_convert_has_qcfs) skips the
 * first two steps.  The formulas of the neurons are in nc_net.h:
 *   QCFS  h(z) = λ · clip(⌊z·L/λ + φ⌋ / L, 0, 1)
 *   IF    v(0) = v0_fraction·θ; each step v += z; fire when v ≥ θ (or > θ);
 *         a spike carries θ and v −= θ (or v = 0).
 * With T = L, θ = λ and v0 = φθ the IF's average output over T steps equals
 * h(z) for a constant input z. */
#ifndef NC_CONVERT_H
#define NC_CONVERT_H

#include "nc_calib.h"
#include "nc_net.h"

/* MaxPool handling, run before calibration (the neuron a pool swaps with is
 * then calibrated where it will sit in the SNN).  For every MaxPool node:
 *   NC_MAXPOOL_AVG: it becomes an AvgPool of the same window, padding not
 *     counted (report APPROXIMATED: the ANN's function changes).
 *   NC_MAXPOOL_PRE_SPIKE: a MaxPool fed by a ReLU/Clip/QCFS neuron that feeds
 *     nothing else swaps places with it (Relu→MaxPool becomes MaxPool→Relu,
 *     exact in the ANN because max and a non-decreasing function commute),
 *     so the SNN takes the max over input currents.  (Over time that max is
 *     exact for the rates only if the engine pools the running sums of the
 *     currents, out(t) = max_i S_i(t) − max_i S_i(t−1); a max of each step's
 *     currents overestimates when the currents vary from step to step.)  A MaxPool on currents (no neuron
 *     before it) is exact as it is.  A MaxPool on spikes that cannot be
 *     swapped (its neuron feeds other nodes too) falls back to GATED.
 *   NC_MAXPOOL_GATED: kept after its neuron; in SNN mode the engine passes the
 *     spikes of the input with the highest running rate (report APPROXIMATED).
 * Every remaining maxpool node's maxpool_strategy is set to what it got.
 * Shapes are re-inferred at the end. */
nc_status nc_convert_prepare(nc_net *net, nc_maxpool_strategy strategy, nc_error *err);

/* 1 if any neuron of the net is QCFS (an imported QCFS chain: no calibration
 * needed), else 0. */
int nc_convert_has_qcfs(const nc_net *net);
/* Number of ReLU neurons and Clip(0, c) neurons: those calibration is for. */
int nc_convert_count_relu(const nc_net *net);

/* Every ReLU neuron becomes QCFS(λ = θ of `thresholds` for that node, L,
 * φ = 0.5).  A Clip(0, c) (ReLU6) is a ReLU with λ = min(θ, c) (reported); a
 * Clip with a lower bound other than 0 is NC_ERR_UNSUPPORTED.  QCFS and IF
 * neurons are left as they are.  A net with no ReLU (and no QCFS) fails with
 * NC_ERR_UNSUPPORTED.  Nothing changes on failure. */
nc_status nc_convert_to_qcfs(nc_net *net, const nc_thresholds *thresholds, int levels, nc_error *err);

typedef struct nc_snn_options {
    float v0_fraction;  /* v(0) = v0_fraction·θ, in [0, 1]; default 0.5 */
    nc_reset reset;     /* default NC_RESET_SUBTRACT                     */
    nc_compare compare; /* default NC_FIRE_GE                            */
} nc_snn_options;

nc_snn_options nc_snn_options_default(void);

/* Every QCFS neuron becomes IF with θ = λ (per layer or channel, as λ was)
 * and the options; L stays in neuron.levels so that QCFS mode still
 * evaluates the QCFS-ANN.  A ReLU or Clip still present is an error (convert
 * to QCFS first).  Nothing changes on failure. */
nc_status nc_convert_to_snn(nc_net *net, const nc_snn_options *opts, nc_error *err);

/* ---- summary ------------------------------------------------------------ */

/* One row per neuron layer. */
typedef struct nc_convert_layer {
    int node;
    const char *name;        /* points into the net                  */
    nc_neuron_model model;
    int n_threshold;         /* 1 = layer-wise, C = channel-wise     */
    float theta_min, theta_mean, theta_max; /* 0 for relu/clip       */
    int levels;              /* L (qcfs, if)                         */
} nc_convert_layer;

/* Fills up to `max` rows; returns the number of neuron layers. */
int nc_convert_summary(const nc_net *net, nc_convert_layer *rows, int max);
/* A text table for the CLI (one line per neuron layer, header first):
 *   layer  model  thresholds  th_min  th_mean  th_max  L   (θ over channels)
 * preceded by "method: <method>" when method is not NULL.  Returns buf. */
const char *nc_convert_summary_text(const nc_net *net, const char *method, char *buf, size_t size);

#endif
