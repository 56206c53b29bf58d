/* nc_neuron_models.h — per-step updates of the neuron models that NIR
 * imports bring (core/nc_net.h: NC_NEURON_LIF … NC_NEURON_DELAY), and a
 * plain step-by-step reference simulator for nets that have them or that
 * have recurrent edges (NC_NODE_RECURRENT).
 *
 * Layout: time-major, as everywhere in the engines.  One call runs T steps
 * for n samples of `numel` values each; step t of the input starts at
 * in + t·in_step (in_step = 0 repeats one input at every step: a constant
 * direct-encoded current), step t of the output at out + t·out_step.  Within
 * a step the n·numel values are [n, numel] row-major.
 *
 * State: every model keeps its state in a caller-owned array of
 * nc_nm_state_floats(p, n) floats, set up by nc_nm_state_init() before the
 * first step and carried from call to call.  Running T steps in one call or
 * one step in each of T calls gives the same numbers bit for bit, so a
 * step-by-step engine loop (needed for recurrent graphs) and a layer-at-once
 * loop (T steps of one layer, then the next layer) agree.  For LIF, CubaLIF,
 * LI, CubaLI, I and NIR-IF the first n·numel floats of the state are the
 * membrane potential v (for traces); CubaLIF/CubaLI keep the synaptic
 * current I in the next n·numel floats.
 *
 * Discretisation: forward Euler at dt = neuron.dt seconds, the scheme of the
 * NIR paper's reference simulators (snnTorch, Norse, Spyx).  With
 * a = dt/τ, b = dt/τ_syn, per step and per value (x = this step's input):
 *   LIF       v ← v + a·(v_leak − v + r·x)
 *   CubaLIF   I ← I + b·(w_in·x − I);  v ← v + a·(v_leak − v + r·I)   (the new I)
 *   LI        as LIF, no threshold;  CubaLI as CubaLIF, no threshold
 *   I, NIR-IF v ← v + r·x   (or v + dt·r·x when neuron.integrate_dt)
 * then, for the spiking ones (LIF, CubaLIF, NIR-IF):
 *   s = v > v_threshold;  out = s (1 or 0);
 *   on a spike v ← v_reset (reset ZERO, NIR's rule) or v ← v − v_threshold
 *   (reset SUBTRACT, an import option: NIR cannot say which one a file meant).
 * LI, CubaLI and I output v.  Threshold outputs (x > v_threshold).  Delay
 * outputs x(t − d) with d = lrint(delay/dt) steps per value, 0 for t < d.
 * Every state starts at 0 (v = 0, I = 0, the delay line empty).
 *
 * The step loop for recurrent nets (what sim/engine_cpu.c must do for a net
 * with an NC_NODE_RECURRENT node; nc_nm_reference_run below does exactly
 * this, slowly): keep every node's output for all T steps ([T, N, numel]);
 *   for t in 0..T−1:
 *     for each node i in topological order:
 *       compute step t of node i from step t of its inputs, where a
 *       RECURRENT node's step t is step t−1 of node recur_source (0 at t = 0)
 *       and a stateful neuron calls its model with T = 1 and its own state.
 * Nodes before the first RECURRENT node and after the last node of any
 * cycle can still run layer-at-once; only the span between a RECURRENT node
 * and its source must go step by step. */
#ifndef NC_NEURON_MODELS_H
#define NC_NEURON_MODELS_H

#include <stdint.h>

#include "../core/nc_net.h"
#include "nc_engine.h"

typedef struct nc_nm_params {
    nc_neuron_model model; /* one of NC_NEURON_LIF … NC_NEURON_DELAY     */
    int64_t numel;         /* values per sample                           */
    const float *p;        /* [NC_NPARAM_COUNT, numel]: node->weight->data */
    float dt;              /* seconds per step                            */
    nc_reset reset;        /* ZERO: v ← v_reset; SUBTRACT: v ← v − v_th    */
    int integrate_dt;      /* I, NIR-IF: v += dt·r·x instead of r·x         */
} nc_nm_params;

/* The parameters of a neuron node whose model is a NIR model (its weight
 * must be [NC_NPARAM_COUNT, numel], as nc_net_infer_shapes checks). */
nc_nm_params nc_nm_params_of(const nc_node *node);

/* 1 for the NIR models handled here (NC_NEURON_LIF … NC_NEURON_DELAY). */
int nc_nm_is_nir_model(nc_neuron_model m);
/* 1 for models whose output is a spike (0 or 1): LIF, CubaLIF, NIR-IF,
 * Threshold. */
int nc_nm_is_spiking(nc_neuron_model m);
/* Largest delay in steps of a Delay node (lrint(delay/dt), at least 0). */
int64_t nc_nm_delay_steps(const nc_nm_params *p);

/* Floats of state for n samples (0 for Threshold); −1 on overflow. */
int64_t nc_nm_state_floats(const nc_nm_params *p, int64_t n);
/* Sets the state of n samples to the start (all zeros). */
void nc_nm_state_init(const nc_nm_params *p, int64_t n, float *state);

/* Runs T steps of model p->model (the formulas above); out may equal in
 * (same step) for every model. */
void nc_nm_run(const nc_nm_params *p, int T, int64_t n, const float *in, int64_t in_step, float *out,
               int64_t out_step, float *state);

/* ---- reference step-by-step simulator ----------------------------------- */

/* Called after node `node` computed step t: out holds n·per_row floats (that
 * step's output of the n samples); v is the membrane of a stateful neuron
 * node (n·per_row floats: NC_NEURON_IF and the NIR models except Threshold
 * and Delay), else NULL. */
typedef void (*nc_nm_step_fn)(void *user, int node, int t, const float *out, const float *v, int64_t n,
                              int64_t per_row);

typedef struct nc_nm_run_options {
    int T;                  /* steps, ≥ 1                                        */
    nc_encoding encoding;   /* for an [N, …] input: DIRECT (the same current at
                             * every step) or POISSON (nc_poisson_encode, the
                             * engine's stream for a seed)                      */
    uint64_t seed;
    nc_nm_step_fn step;     /* may be NULL                                      */
    void *user;
} nc_nm_run_options;

/* Runs `net` (shapes inferred) in SNN mode over T steps, one step of every
 * node at a time: the reference for recurrent nets and the NIR neuron models.
 * input is [N, input shape] (encoded by opts->encoding) or [T, N, input shape]
 * (a sequence: step t reads slice t, no encoding).  *out is a new [T, N, F]
 * tensor holding the output node's value at every step.  IF neurons act as
 * in the CPU engine (v(0) = v0_fraction·θ, spike value θ, nc_if_run's
 * arithmetic); ReLU, Clip and QCFS neurons act as ReLU/Clip (as the engine in
 * SNN mode); MaxPool as in the engine for the PRE_SPIKE and AVG strategies
 * (GATED is refused).  Slow and simple: every node keeps all T steps. */
nc_status nc_nm_reference_run(const nc_net *net, const nc_tensor *input, const nc_nm_run_options *opts,
                              nc_tensor **out, nc_error *err);

#endif
