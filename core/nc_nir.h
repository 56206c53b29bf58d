/* nc_nir.h — NIR (Neuromorphic Intermediate Representation) files: export
 * of a converted SNN, import of any valid NIR graph.  File layout and node
 * semantics: specs/nir.md; our choices and what they lose: docs/NIR.md.
 *
 * Export (nc_nir_export) writes exactly the layout the official `nir`
 * reader (v1.0.6 and later, type checks on) accepts: a root `version`
 * ("1.0.7"), a root group `node` holding a NIRGraph whose `nodes/` are one
 * group per node (a scalar UTF-8 `type` dataset and one dataset per field,
 * nothing else but an optional `metadata/` group) and whose `edges` is an
 * (N, 2) variable-length UTF-8 dataset.  Explicit Input ("input") and Output
 * ("output") nodes; shapes without the batch axis.
 *
 *   our node            NIR
 *   input               Input(shape)
 *   conv2d              Conv2d(weight, bias (zeros if none), input_shape,
 *                       stride, padding, dilation, groups)
 *   dense               Affine(weight, bias (zeros if none)); a Flatten is
 *                       put in front when its input is not 1-d
 *   neuron IF           IF(r = 1, v_threshold = θ broadcast to the full
 *                       shape, float32; v_reset left out: it is 0)
 *   avgpool, global     SumPool2d when every path out of it ends in a conv
 *   avgpool, maxpool    or dense (the 1/k² goes into their weights: the form
 *   with strategy avg   most tools read), else AvgPool2d
 *   flatten             Flatten(start_dim 0, end_dim −1, input_type)
 *   add                 no node: its inputs' edges all go to its consumers
 *                       (NIR sums the edges that meet at a node)
 *   affine (per         Conv2d 1×1 with a diagonal weight (Affine with a
 *   channel)            diagonal weight on 1-d values)
 *   output              Output(shape)
 *   scale, recurrent,   Scale, an edge back to the source, LIF, CubaLIF, LI,
 *   NIR neuron models   CubaLI, I, IF, Threshold, Delay (a NIR import exported
 *                       again)
 * Our IF spikes carry θ; NIR spikes are 1.  The export multiplies θ into the
 * weights that read the spikes (through pools and flattens), so that the
 * file computes the same function with unit spikes, the way sinabs writes
 * its converted nets; where no weight can take it (an IF feeding the
 * output), a Scale node is inserted.
 *
 * What NIR cannot say goes into `metadata` groups, which NIR readers keep
 * but never interpret: per IF node reset_mode ("subtract" | "zero"),
 * v0_fraction (v(0) = v0_fraction·θ), fire_when ("v >= v_threshold" |
 * "v > v_threshold"), threshold (θ per layer or channel), qcfs_levels (L),
 * qcfs_shift; per pool count_include_pad, ceil_mode, maxpool_strategy; on the
 * graph the source, the input encoding, the output accumulator and the
 * tables from which nc_nir_load rebuilds this exact net (our node names,
 * kinds and inputs, and the unscaled weights wherever θ was folded in),
 * guarded by a fingerprint of the NIR content, so that a file another tool
 * has edited is read by NIR's rules alone.  The root group carries the HDF5
 * attributes `writer` and `format` ("neurocuda-nir 1").
 *
 * Refused, with a message naming the node: ReLU/Clip/QCFS neurons (convert
 * first), concat, a MaxPool whose strategy is not "avg" (workaround:
 * convert with `--maxpool avg`, or allow_approx to write it as an average
 * pool), windows NIR cannot express (asymmetric padding, ceil_mode that
 * changes the size, average pools that do not count the padding).
 *
 * Import (nc_nir_load) reads any valid NIR graph — and the tolerable
 * deviations real files have — into the IR: node by node
 *   Input → input, Output → output, Affine/Linear → dense, Scale → scale
 *   (affine when the scale is per channel), Conv1d → conv2d over [C, 1, N],
 *   Conv2d → conv2d (padding int, pair, "same" or "valid"), AvgPool2d →
 *   avgpool (padding counted), SumPool2d → avgpool + affine(k²), Flatten →
 *   flatten, IF → IF (θ = v_threshold, v(0) = 0, reset to 0, fire when v > θ)
 *   when r = 1, v_reset = 0 and θ = 1 (unit spikes), else nir-if; LIF, CubaLIF,
 *   LI, CubaLI, I/Integrator, Threshold, Delay → the neuron models of the
 *   same name (sim/nc_neuron_models.h), discretised with forward Euler at
 *   opts->dt; nested NIRGraph nodes are flattened with dotted names
 *   ("lif1.lif"); a node where several edges meet gets an add node in front
 *   ("<name>.sum"); each cycle is cut at one edge, preferably one leaving a
 *   neuron, which becomes a recurrent node ("<source>.prev").
 * Accepted: unordered edges, float32/float64, int32/int64, scalar or (1,)
 * scalars, 0-d (or one-value) neuron parameters (broadcast to the shape
 * arriving), unknown datasets and metadata (ignored, noted), a missing
 * v_reset (0), a missing Conv input_shape or Flatten input_type (inferred),
 * an Output shape with the right number of values but another shape (noted).
 * Rejected, naming the graph, node and field: a missing `type` (also one
 * stored only as an HDF5 attribute), an unknown type, a missing `edges`, an
 * edge to a node that does not exist, a shape mismatch along an edge,
 * parameters of one node with different shapes, no Input node (a cycle the
 * graph cannot start from), more than one Input or Output, oversized or
 * truncated datasets. */
#ifndef NC_NIR_H
#define NC_NIR_H

#include "nc_net.h"

#define NC_NIR_VERSION "1.0.7"    /* the `version` we write               */
#define NC_NIR_FORMAT "neurocuda-nir" /* root attribute `format` (+ " 1")   */

/* ---- notes: what an export or import wants the user to know ------------- */

typedef enum nc_nir_note_kind {
    NC_NIR_NOTE_INFO,       /* how something was written or read            */
    NC_NIR_NOTE_DIFFERENCE, /* export: other tools will interpret this
                             * differently from our simulator               */
    NC_NIR_NOTE_WARNING     /* import: the file deviates from NIR, or the
                             * chosen dt looks wrong for it                 */
} nc_nir_note_kind;

typedef struct nc_nir_note {
    nc_nir_note_kind kind;
    char node[NC_NAME_MAX]; /* the node it is about, "" for the whole graph */
    char text[512];         /* one sentence, the same for every node it applies to */
} nc_nir_note;

typedef struct nc_nir_notes {
    int count, capacity;
    nc_nir_note *items;
} nc_nir_notes;

void nc_nir_notes_clear(nc_nir_notes *notes); /* frees; NULL is a no-op */
int nc_nir_notes_count(const nc_nir_notes *notes, nc_nir_note_kind kind);
/* Formats the notes of one kind (kind < 0: all) one per line, nodes with the
 * same text grouped: "  - <text> (nodes: a, b, c)\n"; at most 8 node names
 * per line ("and 12 more").  Returns buf (truncated to size). */
const char *nc_nir_notes_format(const nc_nir_notes *notes, int kind, char *buf, size_t size);

/* ---- export ------------------------------------------------------------- */

typedef struct nc_nir_export_options {
    int allow_approx;     /* 1: write a MaxPool whose strategy is not "avg" (and
                           * an avgpool that does not count its padding) as an
                           * average pool, listing it as a difference       */
    const char *source;   /* free text for the graph metadata `source` (e.g.
                           * the model path); NULL: none                    */
} nc_nir_export_options;

/* Writes `net` (an SNN: shapes inferred; IF neurons, or NIR models from an
 * import) to `path` (a temporary file next to it, renamed over it at the end:
 * an existing file survives any failure).  opts may be NULL (defaults).
 * diffs (may be NULL) receives the differences other tools will see
 * (NC_NIR_NOTE_DIFFERENCE) and how things were written (NC_NIR_NOTE_INFO).
 * Errors: NC_ERR_UNSUPPORTED naming the node and the way out; NC_ERR_IO. */
nc_status nc_nir_export(const nc_net *net, const char *path, const nc_nir_export_options *opts,
                        nc_nir_notes *diffs, nc_error *err);

/* ---- import ------------------------------------------------------------- */

typedef struct nc_nir_load_options {
    double dt;           /* seconds per step for the continuous-time neurons;
                          * ≤ 0: 1e-3 (1 ms)                                 */
    int reset_subtract;  /* spiking NIR neurons: 0 (default): v ← v_reset after
                          * a spike, NIR's rule; 1: v ← v − v_threshold (for
                          * files trained with it, which NIR cannot say)    */
    int if_dt;           /* IF and I: 0 (default): v += r·x per step, as sinabs,
                          * snnTorch, Norse and Lava read IF; 1: v += dt·r·x
                          * (SpikingJelly's r = 1/dt files)                 */
    int ignore_ours;     /* 1: read a file we wrote by NIR's rules only, not
                          * from our metadata                               */
} nc_nir_load_options;

/* Reads a NIR file into a new net (source_format "nir", shapes inferred).
 * opts may be NULL (defaults).  notes (may be NULL) receives what was
 * assumed (the dt and discretisation, the IF convention, cut cycles, added
 * nodes) and warnings (dt/τ > 1, ignored datasets, shape deviations).  A
 * file this program wrote (and nobody changed since: see the fingerprint
 * above) comes back as the exact net that was exported, unless
 * opts->ignore_ours.  Errors: NC_ERR_IO (cannot open), NC_ERR_FORMAT (not
 * NIR, damaged, invalid graph), NC_ERR_SHAPE (a shape mismatch along an
 * edge), NC_ERR_UNSUPPORTED (valid NIR this program cannot run). */
nc_status nc_nir_load(const char *path, const nc_nir_load_options *opts, nc_net **out, nc_nir_notes *notes,
                      nc_error *err);

/* 1 if `path` is an HDF5 file with a root group `node` holding a `type`
 * dataset (so it should be read as NIR), else 0.  Never fails. */
int nc_nir_probe(const char *path);

#endif
