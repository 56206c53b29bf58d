/* nc_nir_import_internal.h — declarations shared by the files of the NIR
 * importer (nc_nir_import*.c, nc_nir_restore.c); not part of the library's
 * interface, which is nc_nir.h.  See nc_nir_import.c for the order of work.
 *
 * Functions shared between those files carry the prefix nirimp_ (core/ is a
 * static library: a plain name such as field() or add_ir() could collide
 * with a symbol of whatever program links it). */
#ifndef NC_NIR_IMPORT_INTERNAL_H
#define NC_NIR_IMPORT_INTERNAL_H

#include "nc_nir.h"
#include "nc_nir_doc.h"

#include <stdint.h>

enum frole { F_NODE, F_INPUT, F_OUTPUT, F_IDENT };

typedef struct fnode {
    char name[NC_NAME_MAX];   /* dotted for nodes of nested graphs            */
    const nir_node *nn;       /* NULL for an implicit Input/Output           */
    char type[NIR_TYPE_MAX];
    int role;
    int shaped;               /* out shape known                               */
    int ndim;                 /* NIR output shape                              */
    int64_t shape[NIR_MAX_NDIM];
    int has_in;               /* NIR input shape known                         */
    int in_ndim;
    int64_t in_shape[NIR_MAX_NDIM];
    int ir_ndim;              /* the IR's output shape                         */
    int64_t ir_shape[4];
    int reach, done, order;
    int n_pred;               /* non-recurrent incoming edges                  */
    int ir;                   /* IR node holding its value                     */
    int prev_ir;              /* its RECURRENT node, −1 if none                */
} fnode;

typedef struct fedge {
    int from, to;
    int recurrent;
} fedge;

typedef struct imp {
    const nc_nir_load_options *opts;
    nc_nir_notes *notes;
    nc_error *err;
    fnode *n;
    int count, cap;
    fedge *e;
    int64_t ne, cape;
    int input, output;
    nc_net *net;
} imp;

typedef struct param_spec {
    const char *name;
    nc_neuron_param row;
    int required;
    float dflt;
} param_spec;

typedef struct conv_geom {
    int64_t cout, cin_g, groups, k[2], s[2], d[2], pad[4]; /* pad: top, left, bottom, right */
} conv_geom;

/* ---- nc_nir_import_graph.c: the flattened graph and its structure ---- */

int nirimp_is_type(const fnode *f, const char *t);
int nirimp_is_neuron_type(const char *t);
nc_status nirimp_node_fail(imp *c, const fnode *f, nc_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
nc_status nirimp_flatten_graph(imp *c, const nir_graph *g, const char *prefix, const char *gname, int nested,
                               int *entry, int *exit);
int nirimp_cut_one_cycle(imp *c, int64_t *cut_edge);
void nirimp_count_preds(imp *c);
nc_status nirimp_mark_reachable(imp *c);
nc_status nirimp_find_ends(imp *c);
nc_status nirimp_topo_order(imp *c, int *order);

/* ---- nc_nir_import_shapes.c: fields, neuron parameters, shapes ---- */

const nir_value *nirimp_field(const fnode *f, const char *name);
double nirimp_value_at(const nir_value *v, int64_t k);
int nirimp_same_shape(int na, const int64_t *a, int nb, const int64_t *b);
int nirimp_neuron_params(const char *type, param_spec *out);
nc_neuron_model nirimp_model_of(const char *type);
nc_status nirimp_conv_geometry(imp *c, const fnode *f, int dims, conv_geom *g);
nc_status nirimp_pool_geometry(imp *c, const fnode *f, conv_geom *g);
nc_status nirimp_mismatch(imp *c, const fnode *from, const fnode *to, const char *field_name, int want_ndim,
                          const int64_t *want);
nc_status nirimp_infer_fnode(imp *c, int fi);

/* ---- nc_nir_import_build.c: building the IR ---- */

nc_tensor *nirimp_tensor_from(const nir_value *v, int ndim, const int64_t *shape);
int nirimp_add_ir(imp *c, nc_node_kind kind, const char *base, int n_inputs, const int *inputs);
nc_status nirimp_build_node(imp *c, fnode *f, int in);
void nirimp_neuron_notes(imp *c);

/* ---- nc_nir_restore.c: restoring a net this program exported ---- */

nc_status nirimp_restore_ours(const nir_node *root, const nc_nir_load_options *opts, nc_net **out,
                              nc_nir_notes *notes, nc_error *err, int *is_ours);

#endif
