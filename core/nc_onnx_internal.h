/* nc_onnx_internal.h — declarations shared by the files of the ONNX
 * importer (nc_onnx*.c); not part of the library's interface, which is
 * nc_onnx.h.  See nc_onnx.c for how the import works.
 *
 * Functions shared between those files carry the prefix onnx_ (core/ is a
 * static library: a plain name such as report() or emit() could collide with
 * a symbol of whatever program links it). */
#ifndef NC_ONNX_INTERNAL_H
#define NC_ONNX_INTERNAL_H

#include "nc_onnx.h"

#include "onnx.pb-c.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define CV_MAX_DIMS 8
#define REASON_MAX 512

#define TRY(expr)                                                                                 \
    do {                                                                                          \
        nc_status try_st_ = (expr);                                                               \
        if (try_st_ != NC_OK)                                                                     \
            return try_st_;                                                                       \
    } while (0)

static inline const char *S(const char *s) { return s ? s : ""; }

/* What tensor loading needs to know about the file it reads from. */
typedef struct loader {
    const char *path;    /* the model file, first word of every message   */
    char dir[PATH_MAX];  /* real path of its folder; "" = no external data */
    size_t limit, used;  /* memory budget for constants, in bytes          */
    nc_error *err;
} loader;

/* A constant known at import: float32 values, or int64 for integer and bool
 * types (shapes, indices).  Arithmetic is done in the storage type. */
typedef struct cval {
    int is_int;
    int ndim;
    int64_t dims[CV_MAX_DIMS];
    int64_t n;
    float *f;
    int64_t *i;
} cval;

enum {
    DT_FLOAT = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
    DT_UINT8 = ONNX__TENSOR_PROTO__DATA_TYPE__UINT8,
    DT_INT8 = ONNX__TENSOR_PROTO__DATA_TYPE__INT8,
    DT_UINT16 = ONNX__TENSOR_PROTO__DATA_TYPE__UINT16,
    DT_INT16 = ONNX__TENSOR_PROTO__DATA_TYPE__INT16,
    DT_INT32 = ONNX__TENSOR_PROTO__DATA_TYPE__INT32,
    DT_INT64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64,
    DT_STRING = ONNX__TENSOR_PROTO__DATA_TYPE__STRING,
    DT_BOOL = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL,
    DT_FLOAT16 = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16,
    DT_DOUBLE = ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE,
    DT_UINT32 = ONNX__TENSOR_PROTO__DATA_TYPE__UINT32,
    DT_UINT64 = ONNX__TENSOR_PROTO__DATA_TYPE__UINT64,
    DT_BFLOAT16 = ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16
};

/* One ONNX value (a tensor name in the graph). */
typedef struct value {
    const char *name;   /* points into the parsed model                        */
    int defined;        /* an initializer, input or an earlier node produced it */
    cval *c;            /* the constant, or NULL for data                       */
    int elem_type;      /* declared ONNX element type (graph inputs)            */
    int ir;             /* data: index of the IR node that computes it          */
    int ndim;           /* data: per-sample shape, no batch axis                */
    int64_t dims[NC_MAX_DIMS];
    int producer;       /* ONNX node index, -1 for inputs and initializers      */
    int n_consumers;    /* ONNX node inputs reading it, +1 if a graph output    */
    int consumer;       /* the last ONNX node that reads it                     */
    int is_output;      /* a graph output                                       */
    int tainted;        /* depends on an unsupported node                       */
} value;

typedef struct importer {
    loader L;
    const nc_onnx_options *opts;
    nc_error *err;
    Onnx__ModelProto *model;
    Onnx__GraphProto *graph;
    int opset;
    int64_t batch;        /* batch used for Shape: the declared one, else 1 */
    int n_values, cap_values;
    value *values;
    size_t table_size;    /* open-addressing name → value index (+1) table   */
    int *table;
    int n_nodes;          /* ONNX nodes */
    int *order;           /* topological order                                */
    int *handled;         /* 1 once a node is reported (patterns take several) */
    int *entry;           /* report entry of each ONNX node, -1 before        */
    int *unchecked;       /* failed only because an input was unsupported     */
    int *live;            /* 1 when a graph output depends on the node        */
    int *refs;            /* per IR node: ONNX consumers of values it computes */
    int cap_refs;
    nc_net *net;
    nc_report report;
    int n_unsupported;
} importer;

/* Per-node context for the op converters. */
typedef struct nctx {
    importer *imp;
    const Onnx__NodeProto *p;
    int index;                /* ONNX node index                  */
    char name[NC_NAME_MAX];   /* its name, or "<op>_<index>"       */
    const char *op;
    char why[REASON_MAX];     /* reason when unsupported / removed */
    int guess_ndim;           /* when unsupported: the shape its output would */
    int64_t guess[NC_MAX_DIMS]; /* have (-1 = unknown), for checking later nodes */
} nctx;

static inline loader *LD(nctx *c) { return &c->imp->L; }

/* ---- nc_onnx_read.c: messages, memory budget, constants, tensors, files ---- */

void onnx_cv_free(cval *c);
nc_status onnx_cv_new(loader *L, int is_int, int ndim, const int64_t *dims, const char *what, cval **out);
double onnx_cv_get(const cval *c, int64_t k);
int64_t onnx_cv_geti(const cval *c, int64_t k);
void onnx_cv_set(cval *c, int64_t k, double v);
nc_status onnx_cv_copy(loader *L, const cval *src, const char *what, cval **out);
const char *onnx_dims_str(int ndim, const int64_t *dims, char *buf, size_t size);
const char *onnx_dtype_name(int dt);
size_t onnx_dtype_size(int dt);
int onnx_dtype_is_float(int dt);
nc_status onnx_tensor_to_cval(loader *L, const Onnx__TensorProto *t, const char *what, cval **out);
nc_tensor *onnx_cv_to_tensor(const cval *c, int ndim, const int64_t *dims);
nc_status onnx_read_whole_file(loader *L, unsigned char **out, size_t *size);
nc_status onnx_not_onnx(loader *L);

/* ---- nc_onnx_context.c: values, node context, IR nodes, attributes ---- */

nc_status onnx_ifail(importer *imp, nc_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A hard error about one node: "model.onnx: node 'x' (Conv, opset 13): ...". */
nc_status onnx_node_fail(nctx *c, nc_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Records why a node cannot be converted; the caller reports it. */
nc_status onnx_unsup(nctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
nc_status onnx_oom(importer *imp);
int onnx_find_value(const importer *imp, const char *name);
nc_status onnx_get_value(importer *imp, const char *name, value **out);
value *onnx_in_value(nctx *c, size_t i);
value *onnx_out_value(nctx *c, size_t i);
int onnx_output_used(nctx *c, size_t i);
const char *onnx_node_display_name(const Onnx__NodeProto *p, int index, char *buf, size_t size);
void onnx_nctx_init(nctx *c, importer *imp, int index);
void onnx_set_dims(int *ndim, int64_t *dims, int n, const int64_t *src);
nc_status onnx_add_ir(importer *imp, nc_node_kind kind, const char *base, int n_in, const int *in, int ndim,
                      const int64_t *dims, int *out);
void onnx_bind_value(importer *imp, value *v, int ir, int ndim, const int64_t *dims);
void onnx_alias_value(importer *imp, value *out, const value *in);
int onnx_sole_reader(const importer *imp, const value *v);
nc_node *onnx_ir_node(importer *imp, int ir);
const Onnx__AttributeProto *onnx_attr(const nctx *c, const char *name);
int64_t onnx_attr_int(const nctx *c, const char *name, int64_t fallback);
float onnx_attr_float(const nctx *c, const char *name, float fallback);
const int64_t *onnx_attr_ints(const nctx *c, const char *name, size_t *count);
const char *onnx_attr_string(const nctx *c, const char *name, char *buf, size_t size);
nc_status onnx_attr_pair(nctx *c, const char *name, int want, int *out);

/* ---- nc_onnx_report.c: the conversion report ---- */

nc_status onnx_report(nctx *c, nc_support support, const char *target, const char *reason);
void onnx_credit_node_constants(nctx *c, const char *target);
nc_status onnx_mark_unsupported(nctx *c, const char *why, int unchecked);
nc_status onnx_unsupported_message(importer *imp);
nc_status onnx_sort_report(importer *imp);
nc_status onnx_copy_report(const nc_report *src, nc_report *dst);

/* ---- nc_onnx_fold.c: constant folding ---- */

nc_status onnx_need_const(nctx *c, size_t i, cval **out);
int onnx_norm_axis(int64_t axis, int rank);
nc_status onnx_c_binary(nctx *c);
nc_status onnx_c_unary(nctx *c);
nc_status onnx_c_cast(nctx *c);
nc_status onnx_c_constant(nctx *c);
int onnx_full_shape(const importer *imp, const value *v, int64_t *dims);
nc_status onnx_op_shape(nctx *c);
nc_status onnx_c_gather(nctx *c);
nc_status onnx_axes_arg(nctx *c, int64_t *axes, int *n);
nc_status onnx_squeeze_shape(nctx *c, int unsq, int rank, const int64_t *dims, int *out_rank, int64_t *out);
nc_status onnx_c_flatten(nctx *c);
nc_status onnx_reshape_target(nctx *c, int rank, const int64_t *in, int64_t numel, int *out_rank,
                              int64_t *out);
nc_status onnx_c_reshape(nctx *c);
nc_status onnx_c_concat(nctx *c);
nc_status onnx_c_slice(nctx *c);
nc_status onnx_c_transpose(nctx *c);
nc_status onnx_c_constant_of_shape(nctx *c);
nc_status onnx_c_range(nctx *c);

/* ---- nc_onnx_ops.c: data ops → IR nodes ---- */

nc_status onnx_op_relu(nctx *c);
nc_status onnx_op_clip(nctx *c);
nc_status onnx_op_add(nctx *c);
nc_status onnx_op_sub(nctx *c);
nc_status onnx_op_mul(nctx *c);
nc_status onnx_op_div(nctx *c);
nc_status onnx_op_batchnorm(nctx *c);
nc_status onnx_op_flatten(nctx *c);
nc_status onnx_op_reshape(nctx *c);
nc_status onnx_op_squeeze(nctx *c);
nc_status onnx_op_concat(nctx *c);
nc_status onnx_op_identity(nctx *c);
nc_status onnx_op_dropout(nctx *c);
nc_status onnx_op_cast(nctx *c);
nc_status onnx_op_softmax(nctx *c);
nc_status onnx_op_conv(nctx *c);
nc_status onnx_op_gemm(nctx *c);
nc_status onnx_op_matmul(nctx *c);
nc_status onnx_op_pool(nctx *c);
nc_status onnx_op_global_avgpool(nctx *c);
nc_status onnx_op_reduce_mean(nctx *c);
nc_status onnx_op_pad(nctx *c);

#endif
