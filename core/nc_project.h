/* nc_project.h — the native project file (`.ncsnn`, HDF5, versioned).
 *
 * A project holds the whole converted network and everything NIR cannot say:
 * soft reset, v0 = θ/2, L and φ of QCFS, the MaxPool strategy, thresholds per
 * channel, the conversion report, the dataset preprocessing, the calibration
 * settings and statistics, the source model's path and SHA-256, and the
 * accuracies measured at each stage.
 *
 * File layout (version 1; h5py-readable; every name below is fixed):
 *   /                 attrs format = "neurocuda-project", version = 1, created_by
 *   /net              attrs input, output, n_nodes, source_path, source_format
 *   /net/nodes/NNNNNN one group per node, NNNNNN = 6-digit index (topological order)
 *       attrs name, kind ("conv2d", ... as nc_node_kind_name), shape (i64),
 *             inputs (i32, absent for the input node), kernel, stride, pad,
 *             dilation, groups, count_include_pad, ceil_mode, maxpool_strategy
 *             ("avg" | "pre-spike" | "gated");
 *             neuron nodes also: model ("relu" | "clip" | "qcfs" | "if"),
 *             clip_min, clip_max, levels, shift (φ), v0_fraction,
 *             reset ("subtract" | "zero"), compare ("ge" | "gt")
 *       datasets weight, bias (f32, their own shapes, when present),
 *                threshold (f32 [n_threshold], neuron nodes with thresholds)
 *   /report           datasets source_name, op_type, support, target, reason
 *                     (strings [n]) and opset (i32 [n])
 *   /preprocess       attrs scale, mean (f32 [n]), std (f32 [n]); absent = none
 *   /calibration      attrs method, percentile, per_channel; absent = none
 *   /calibration/stats/NNNNNN  attrs node, name; dataset data (f32)
 *   /source           attrs path, sha256
 *   /metadata         datasets keys, values (strings [n])
 *   /metrics          datasets keys (strings [n]), values (f64 [n])
 *
 * Loading validates everything (format and version, node kinds and enum
 * names, inputs that come earlier, shapes re-inferred by nc_net_infer_shapes
 * and compared with the stored ones, sizes of every array); a damaged or
 * truncated file gives NC_ERR_FORMAT with a message naming the file and the
 * object at fault, never a crash. */
#ifndef NC_PROJECT_H
#define NC_PROJECT_H

#include "nc_dataset.h"
#include "nc_net.h"

#define NC_PROJECT_FORMAT "neurocuda-project"
#define NC_PROJECT_VERSION 1
#define NC_PROJECT_KEY_MAX 128

/* A named float array attached to a node, e.g. calibration statistics
 * ("max", "p99.9", per channel or per layer).  node = "" for the whole net. */
typedef struct nc_named_array {
    char node[NC_NAME_MAX];
    char name[NC_PROJECT_KEY_MAX];
    nc_tensor *data;              /* owned */
} nc_named_array;

typedef struct nc_kv_string {
    char key[NC_PROJECT_KEY_MAX];
    char *value;                  /* owned */
} nc_kv_string;

typedef struct nc_kv_number {
    char key[NC_PROJECT_KEY_MAX];
    double value;
} nc_kv_number;

typedef struct nc_project_calibration {
    int set;                      /* 0: the project was not calibrated       */
    char method[32];              /* "max", "percentile", "mmse", ...         */
    double percentile;            /* e.g. 99.9 (method "percentile")          */
    int per_channel;              /* 1: one threshold per channel            */
} nc_project_calibration;

typedef struct nc_project {
    nc_net *net;                  /* owned; may be NULL until set            */
    int has_preprocess;
    nc_preprocess preprocess;
    nc_project_calibration calibration;
    char source_path[1024];       /* the model it was converted from         */
    char source_sha256[65];       /* 64 hex digits, or "" when unknown       */
    int n_stats;
    nc_named_array *stats;        /* calibration statistics                  */
    int n_meta;
    nc_kv_string *meta;           /* free key/value strings                  */
    int n_metrics;
    nc_kv_number *metrics;        /* "ann_accuracy", "qcfs_accuracy", ...     */
} nc_project;

nc_project *nc_project_new(void);
void nc_project_free(nc_project *p); /* NULL is a no-op; frees the net too */

/* Takes ownership of net (the old one is freed). */
void nc_project_set_net(nc_project *p, nc_net *net);

/* Records the source model: its path and the SHA-256 of its contents. */
nc_status nc_project_set_source(nc_project *p, const char *model_path, nc_error *err);

/* Key/value strings and numbers: setting an existing key replaces it.
 * Keys are 1..NC_PROJECT_KEY_MAX−1 bytes. */
nc_status nc_project_set_meta(nc_project *p, const char *key, const char *value, nc_error *err);
const char *nc_project_get_meta(const nc_project *p, const char *key); /* NULL if absent */
nc_status nc_project_set_metric(nc_project *p, const char *key, double value, nc_error *err);
int nc_project_get_metric(const nc_project *p, const char *key, double *value); /* 1 found, 0 not */

/* Adds (or replaces) the array `name` of node `node`, copying data of the
 * given shape (1..4 dims). */
nc_status nc_project_add_stat(nc_project *p, const char *node, const char *name, int ndim,
                              const int64_t *shape, const float *data, nc_error *err);
const nc_named_array *nc_project_get_stat(const nc_project *p, const char *node, const char *name);

/* Writes the project to `path` (temporary file in the same folder, fsync,
 * rename: an existing file survives any failure).  The net must be set. */
nc_status nc_project_save(const nc_project *p, const char *path, nc_error *err);

/* Reads and validates a project file; *out is a new project. */
nc_status nc_project_load(const char *path, nc_project **out, nc_error *err);

#endif
