/* nc_net.h — the network IR: a DAG of nodes in topological order.
 *
 * ANN and SNN are the same IR: converting a network changes its neuron nodes
 * (relu → qcfs/if) and nothing else.  Every node produces one output whose
 * shape is stored WITHOUT the batch axis: [C, H, W] for feature maps, [F] for
 * vectors.  Node i only reads nodes with smaller indices.
 *
 * Weight layouts:
 *   conv2d : weight [Cout, Cin/groups, KH, KW], bias [Cout] or NULL
 *   dense  : weight [Fout, Fin],                bias [Fout] or NULL
 *   affine : weight [C] (scale), bias [C] (shift), per channel (axis 0); used
 *            for a BatchNormalization that had nothing to fold into.
 */
#ifndef NC_NET_H
#define NC_NET_H

#include "nc_tensor.h"

typedef enum nc_node_kind {
    NC_NODE_INPUT,
    NC_NODE_CONV2D,
    NC_NODE_DENSE,
    NC_NODE_AVGPOOL,
    NC_NODE_MAXPOOL,
    NC_NODE_GLOBAL_AVGPOOL,
    NC_NODE_FLATTEN,
    NC_NODE_ADD,
    NC_NODE_CONCAT,
    NC_NODE_AFFINE,
    NC_NODE_NEURON,
    NC_NODE_OUTPUT,
    /* Added for NIR imports (core/nc_nir.h): */
    NC_NODE_SCALE,     /* y = weight ⊙ x: weight has the input's numel, or 1 value */
    NC_NODE_RECURRENT, /* the output of node recur_source (a LATER node) one step
                        * earlier, zeros at step 0: a recurrent edge of a cycle.
                        * No inputs; its shape is set when built and must equal
                        * the source's.  A net with one needs step-by-step
                        * simulation (sim/nc_neuron_models.h). */
    NC_NODE_KIND_COUNT
} nc_node_kind;

typedef enum nc_neuron_model {
    NC_NEURON_RELU,  /* max(0, x)                                            */
    NC_NEURON_CLIP,  /* min(max(x, clip_min), clip_max)  (ReLU6 and friends) */
    NC_NEURON_QCFS,  /* λ·clip(floor(x·L/λ + φ)/L, 0, 1), λ = threshold      */
    NC_NEURON_IF,    /* integrate-and-fire, θ = threshold (see nc_if_*)      */
    /* Added for NIR imports: stateful models with per-value parameters in the
     * node's `weight` (see nc_neuron_param below), simulated with forward
     * Euler at neuron.dt; the update of each is in sim/nc_neuron_models.h.
     * Spiking models output 1 for a spike (not θ). */
    NC_NEURON_LIF,        /* NIR LIF: τ, r, v_leak, v_threshold, v_reset      */
    NC_NEURON_CUBA_LIF,   /* NIR CubaLIF: + τ_syn, w_in (current synapse)     */
    NC_NEURON_LI,         /* NIR LI: leaky integrator, outputs v (no spikes)  */
    NC_NEURON_CUBA_LI,    /* NIR CubaLI: outputs v                            */
    NC_NEURON_INTEGRATOR, /* NIR I: v += r·x, outputs v                       */
    NC_NEURON_NIR_IF,     /* NIR IF with per-value r, v_threshold, v_reset and
                           * unit spikes (an IF that NC_NEURON_IF cannot say)  */
    NC_NEURON_THRESHOLD,  /* NIR Threshold: 1 where x > v_threshold, else 0   */
    NC_NEURON_DELAY       /* NIR Delay: y(t) = x(t − round(delay/dt)), 0 before */
} nc_neuron_model;

/* Rows of the [NC_NPARAM_COUNT, numel] `weight` tensor of a neuron node whose
 * model is one of the NIR models above: one value per element of the node,
 * in the file's units (time constants and delays in seconds).  Rows a model
 * does not use are 0. */
typedef enum nc_neuron_param {
    NC_NPARAM_TAU,         /* τ (LIF, LI) or τ_mem (CubaLIF, CubaLI)     */
    NC_NPARAM_TAU_SYN,     /* τ_syn (CubaLIF, CubaLI)                    */
    NC_NPARAM_R,           /* r                                          */
    NC_NPARAM_V_LEAK,      /* v_leak                                     */
    NC_NPARAM_V_THRESHOLD, /* v_threshold (and Threshold's threshold)    */
    NC_NPARAM_V_RESET,     /* v_reset                                    */
    NC_NPARAM_W_IN,        /* w_in (CubaLIF, CubaLI)                     */
    NC_NPARAM_DELAY,       /* Delay's delay                              */
    NC_NPARAM_COUNT
} nc_neuron_param;

typedef enum nc_reset { NC_RESET_SUBTRACT, NC_RESET_ZERO } nc_reset;
typedef enum nc_compare { NC_FIRE_GE, NC_FIRE_GT } nc_compare;

/* How a MaxPool is run in an SNN (see DESIGN.md and conversion.md §2.1). */
typedef enum nc_maxpool_strategy {
    NC_MAXPOOL_AVG,       /* replaced by AvgPool: changes the function       */
    NC_MAXPOOL_PRE_SPIKE, /* max over input currents before the IF: exact    */
    NC_MAXPOOL_GATED      /* pass spikes of the highest running-rate neuron  */
} nc_maxpool_strategy;

typedef struct nc_neuron {
    nc_neuron_model model;
    float clip_min, clip_max;  /* CLIP only                                      */
    /* Threshold λ (QCFS) or θ (IF): n_threshold values, 1 (layer-wise) or C
     * (channel-wise, axis 0 of the node's shape).  Owned by the node. */
    int n_threshold;
    float *threshold;
    int levels;                /* L of QCFS (quantisation steps), default 8       */
    float shift;               /* φ of QCFS, default 0.5                          */
    float v0_fraction;         /* IF: v(0) = v0_fraction·θ, default 0.5           */
    nc_reset reset;            /* IF: reset by subtraction (default) or to zero  */
    nc_compare compare;        /* IF: fire when v ≥ θ (default) or v > θ          */
    /* NIR models only (see nc_neuron_param); reset also applies to them:
     * ZERO = v ← v_reset (NIR's rule), SUBTRACT = v ← v − v_threshold. */
    float dt;                  /* seconds per simulation step (forward Euler)     */
    int integrate_dt;          /* NIR_IF, INTEGRATOR: 1: v += dt·r·x; 0: v += r·x */
} nc_neuron;

#define NC_NAME_MAX 256

typedef struct nc_node {
    char name[NC_NAME_MAX];     /* from the source file, unique in the net       */
    nc_node_kind kind;
    int n_inputs;
    int *inputs;                /* indices of earlier nodes                       */
    int ndim;                   /* output shape, no batch axis                    */
    int64_t shape[4];

    /* conv2d and pools */
    int kernel[2];              /* KH, KW                                         */
    int stride[2];
    int pad[4];                 /* top, left, bottom, right                       */
    int dilation[2];
    int groups;                 /* conv2d                                         */
    int count_include_pad;      /* avgpool                                        */
    int ceil_mode;              /* avg/max pool                                   */
    nc_maxpool_strategy maxpool_strategy; /* maxpool, used in SNN mode          */

    nc_tensor *weight;          /* see layouts above; owned                       */
    nc_tensor *bias;            /* owned, may be NULL                             */

    nc_neuron neuron;           /* NEURON only                                    */
    int recur_source;           /* RECURRENT only: index of the node it delays    */
} nc_node;

/* What happened to each node of the source file during import/conversion. */
typedef enum nc_support {
    NC_SUPPORT_CONVERTED,   /* became node `target`                               */
    NC_SUPPORT_FOLDED,      /* folded into node `target` (BN, bias Add, constants) */
    NC_SUPPORT_REMOVED,     /* no effect at inference (Dropout, Identity, Softmax) */
    NC_SUPPORT_APPROXIMATED,/* runs, but changes the function (MaxPool→AvgPool)    */
    NC_SUPPORT_UNSUPPORTED  /* cannot be run: import fails                        */
} nc_support;

typedef struct nc_report_entry {
    char source_name[NC_NAME_MAX]; /* node name in the source file              */
    char op_type[64];              /* e.g. "Conv", "BatchNormalization"          */
    int opset;
    nc_support support;
    char target[NC_NAME_MAX];      /* IR node it became or was folded into       */
    char reason[512];              /* why (always set for non-converted)         */
} nc_report_entry;

typedef struct nc_report {
    int count, capacity;
    nc_report_entry *entries;
} nc_report;

typedef struct nc_net {
    int n_nodes, capacity;
    nc_node *nodes;
    int input;       /* index of the INPUT node  */
    int output;      /* index of the OUTPUT node */
    nc_report report;
    char source_path[1024];
    char source_format[32]; /* "onnx", "nir", "ncsnn" */
} nc_net;

nc_net *nc_net_new(void);
void nc_net_free(nc_net *net); /* NULL is a no-op */
nc_net *nc_net_clone(const nc_net *net); /* deep copy, NULL on out of memory */

/* Appends a node (inputs copied) and returns its index, or -1 on out of memory.
 * The new node has stride/dilation/groups 1, v0_fraction 0.5, shift 0.5,
 * levels 8 and no weights; the caller fills the rest. */
int nc_net_add_node(nc_net *net, nc_node_kind kind, const char *name, int n_inputs, const int *inputs);
int nc_net_find(const nc_net *net, const char *name); /* index or -1 */

/* Sets a neuron's threshold array (copied); n is 1 or the channel count. */
nc_status nc_neuron_set_threshold(nc_neuron *neuron, int n, const float *values, nc_error *err);

/* Recomputes every node's output shape from the input shape, checking that
 * kernels, weights and inputs fit.  Errors name the node.  Every dimension
 * of every node must be 1..NC_MAX_DIM and a node at most NC_MAX_NODE_NUMEL
 * values per sample, so that no size computed from a shape can overflow. */
#define NC_MAX_DIM ((int64_t)1 << 30)
#define NC_MAX_NODE_NUMEL ((int64_t)1 << 31)
nc_status nc_net_infer_shapes(nc_net *net, nc_error *err);

/* Multiply-accumulates per sample of one node (0 for nodes with no MACs),
 * and the parameter count (weights + biases + thresholds); they saturate at
 * INT64_MAX instead of overflowing. */
int64_t nc_node_macs(const nc_net *net, int node);
int64_t nc_node_params(const nc_net *net, int node);
int64_t nc_net_macs(const nc_net *net);
int64_t nc_net_params(const nc_net *net);
/* Number of nodes that read node `node` (its fan-out in the graph). */
int nc_net_consumers(const nc_net *net, int node);
/* Fan-out of node `node`: the synapses one of its output values drives in the
 * next weighted layers, averaged over its values (conv/dense: MACs per input
 * value; pools, flatten, add, concat pass it on).  Synaptic operations of a
 * spiking layer = spikes × fan-out. */
double nc_node_fanout(const nc_net *net, int node);

int64_t nc_node_numel(const nc_node *node); /* elements per sample */
/* Copies the window of a conv or pool (kernel, stride, pad, dilation,
 * ceil_mode, count_include_pad) from src to dst. */
void nc_node_copy_window(nc_node *dst, const nc_node *src);

/* The structural checks every engine makes before it runs node i: a shape,
 * inputs that come before it, and weights, thresholds and parameters of the
 * sizes its kind needs (windows of conv and pools are checked by the engines,
 * which compute them).  Returns NULL when the node is sound, else what is
 * wrong, as a phrase ("reads a node that does not come before it"). */
const char *nc_node_check(const nc_net *net, int i);
/* 1 for the NIR neuron models (LIF, CubaLIF, LI, ..., Delay). */
int nc_neuron_model_is_nir(nc_neuron_model m);
int nc_node_channels(const nc_node *node);  /* shape[0] for 3-d shapes, else shape[0] as well */

const char *nc_node_kind_name(nc_node_kind kind);     /* "conv2d", ...       */
/* nc_fail with "<where>, node '<name>' (<kind>): <message>" (no "<where>, "
 * when where is NULL): the one form of an error about a node. */
nc_status nc_node_fail(nc_error *err, nc_status code, const char *where, const nc_node *node, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
const char *nc_neuron_model_name(nc_neuron_model m);  /* "relu", "if", ...   */
const char *nc_support_name(nc_support s);            /* "converted", ...    */
const char *nc_maxpool_strategy_name(nc_maxpool_strategy s); /* "avg", "pre-spike", "gated" */
int nc_maxpool_strategy_parse(const char *text, nc_maxpool_strategy *out); /* 0 ok, -1 bad */

/* Appends an entry to the conversion report; returns it (NULL on OOM). */
nc_report_entry *nc_report_add(nc_report *report, const char *source_name, const char *op_type,
                               int opset, nc_support support, const char *target,
                               const char *reason_fmt, ...) __attribute__((format(printf, 7, 8)));
int nc_report_count(const nc_report *report, nc_support support);
void nc_report_clear(nc_report *report); /* frees the entries; NULL is a no-op */

#endif
