/* nc_nir_doc.h — PRIVATE to core/nc_nir*.c: a NIR graph in memory, as the
 * HDF5 file holds it (node groups of named datasets, edges as name pairs),
 * and its reader and writer.  Export builds a document from a net and writes
 * it; import reads a document and builds a net from it. */
#ifndef NC_NIR_DOC_H
#define NC_NIR_DOC_H

#include <hdf5.h>

#include "nc_nir.h"

#define NIR_MAX_NDIM 8
#define NIR_FIELD_NAME_MAX 128
#define NIR_TYPE_MAX 32
#define NIR_MAX_DEPTH 16        /* nested NIRGraph levels                 */
#define NIR_MAX_NODES 100000    /* nodes in one graph                      */
#define NIR_MAX_EDGES 1000000
#define NIR_MAX_STRING 65536    /* bytes of one string value               */

typedef enum nir_value_kind { NIR_FLOAT, NIR_INT, NIR_STRING } nir_value_kind;

/* One dataset: numbers (float32 or int64 in memory, whatever the file's
 * type) or strings. */
typedef struct nir_value {
    char name[NIR_FIELD_NAME_MAX];
    nir_value_kind kind;
    int ndim;                     /* 0 = scalar                                  */
    int64_t shape[NIR_MAX_NDIM];
    int64_t numel;
    float *f;                     /* NIR_FLOAT                                   */
    int64_t *i;                   /* NIR_INT                                     */
    char **s;                     /* NIR_STRING: numel strings                   */
} nir_value;

typedef struct nir_graph nir_graph;

typedef struct nir_node {
    char name[NC_NAME_MAX];
    char type[NIR_TYPE_MAX];
    int n_fields, cap_fields;
    nir_value *fields;            /* every dataset but `type` (graph: but edges) */
    int n_meta, cap_meta;
    nir_value *meta;              /* datasets of the `metadata` group            */
    nir_graph *graph;             /* type NIRGraph: its nodes and edges          */
} nir_node;

struct nir_graph {
    int n_nodes, cap_nodes;
    nir_node *nodes;
    int64_t n_edges, cap_edges;
    char **edges;                 /* 2·n_edges names: source, target, ...       */
    int has_edges;                /* reading: an `edges` dataset was there       */
};

void nir_value_clear(nir_value *v);
void nir_node_clear(nir_node *n);
void nir_graph_free(nir_graph *g);

/* Building (all return NULL / non-zero on out of memory). */
nir_graph *nir_graph_new(void);
nir_node *nir_graph_add(nir_graph *g, const char *name, const char *type);
int nir_graph_edge(nir_graph *g, const char *from, const char *to);
/* Adds a field (or, with meta = 1, a metadata entry) and returns it with its
 * data allocated for the shape; NULL on out of memory. */
nir_value *nir_add_float(nir_node *n, int meta, const char *name, int ndim, const int64_t *shape);
nir_value *nir_add_int(nir_node *n, int meta, const char *name, int ndim, const int64_t *shape);
nir_value *nir_add_string(nir_node *n, int meta, const char *name, const char *text);
/* Convenience: a scalar int, a scalar float, a 1-d int64 array. */
int nir_set_int(nir_node *n, int meta, const char *name, int64_t value);
int nir_set_float(nir_node *n, int meta, const char *name, float value);
int nir_set_ints(nir_node *n, int meta, const char *name, int count, const int64_t *values);
/* A 1-d array of count strings (copied). */
int nir_set_strings(nir_node *n, int meta, const char *name, int64_t count, const char *const *texts);
/* A float array of the given shape, copied from data. */
int nir_set_floats(nir_node *n, int meta, const char *name, int ndim, const int64_t *shape, const float *data);

/* Names in the graph metadata of a file this program exported: the tables
 * from which nc_nir_load rebuilds the exact net (nc_nir_import.c reads what
 * nc_nir_export.c writes). */
#define NIR_META_FORMAT "neurocuda_format"          /* string NC_NIR_FORMAT       */
#define NIR_META_FORMAT_VERSION "neurocuda_format_version" /* int 1              */
#define NIR_META_FINGERPRINT "neurocuda_fingerprint" /* 16 hex digits             */
#define NIR_META_NAMES "neurocuda_ir_names"         /* strings [n]: node names   */
#define NIR_META_KINDS "neurocuda_ir_kinds"         /* strings [n]: kind names   */
#define NIR_META_CARRIERS "neurocuda_ir_carriers"   /* strings [n]: NIR node with
                                                     * its parameters, or ""     */
#define NIR_META_COUNTS "neurocuda_ir_input_counts" /* int64 [n]                 */
#define NIR_META_INPUTS "neurocuda_ir_inputs"       /* int64 [sum of counts]     */
#define NIR_META_RECUR "neurocuda_ir_recur_source"  /* int64 [n], −1 if none     */
#define NIR_META_SHAPES "neurocuda_ir_shapes"       /* int64 [n, 5]: ndim, dims  */

/* Lookup: the field (meta = 0) or metadata entry (meta = 1) `name`, or NULL. */
nir_value *nir_get(const nir_node *n, int meta, const char *name);
nir_node *nir_graph_find(const nir_graph *g, const char *name);

/* FNV-1a 64 over the NIR content of a graph node (types, fields, edges,
 * nested graphs; not metadata), independent of the order of nodes, fields
 * and edges. */
uint64_t nir_fingerprint(const nir_node *root);

/* Writes root (a NIRGraph node) as the file's `node` group, with the root
 * dataset `version` and the root attributes given (NULL-terminated
 * key/value pairs), through a temporary file renamed over `path`. */
nc_status nir_write_file(const char *path, const nir_node *root, const char *version,
                         const char *const *root_attrs, nc_error *err);

/* Reads the file's `node` group into *root (name "node").  *version gets the
 * root `version` string ("" when absent).  Structural errors (missing type,
 * missing edges, bad strings, oversized data) fail with NC_ERR_FORMAT naming
 * the node; unknown datasets and groups are kept (datasets) or skipped with
 * a note. */
nc_status nir_read_file(const char *path, nir_node *root, char *version, size_t version_size,
                        nc_nir_notes *notes, nc_error *err);

/* Notes (nc_nir.c). */
int nir_note(nc_nir_notes *notes, nc_nir_note_kind kind, const char *node, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
