/* nc_onnx.c — ONNX import: protobuf-c parse, constant folding, ops → IR.
 *
 * The import runs in one pass over the graph in topological order.  Every
 * ONNX value is either a constant (initializer, binding, folded subgraph),
 * kept as a `cval`, or data that an IR node computes (value->ir).  Values
 * carry their per-sample shape (no batch axis) so that Shape, Reshape and
 * SAME padding can be resolved at import.  Each ONNX node adds exactly one
 * report entry. */
#include "nc_onnx.h"

#include "onnx.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_BUDGET ((size_t)4 << 30)
#define CV_MAX_DIMS 8
#define REASON_MAX 512

#define TRY(expr)                                                                                 \
    do {                                                                                          \
        nc_status try_st_ = (expr);                                                               \
        if (try_st_ != NC_OK)                                                                     \
            return try_st_;                                                                       \
    } while (0)

static const char *S(const char *s) { return s ? s : ""; }

/* ==== messages and the memory budget ==================================== */

/* What tensor loading needs to know about the file it reads from. */
typedef struct loader {
    const char *path;    /* the model file, first word of every message   */
    char dir[PATH_MAX];  /* real path of its folder; "" = no external data */
    size_t limit, used;  /* memory budget for constants, in bytes          */
    nc_error *err;
} loader;

static nc_status lfail(loader *L, nc_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static nc_status lfail(loader *L, nc_status code, const char *fmt, ...)
{
    char text[NC_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return nc_fail(L->err, code, "%s: %s", L->path, text);
}

/* Charges `bytes` to the budget before anything is allocated for it. */
static nc_status budget_take(loader *L, size_t bytes, const char *what)
{
    if (bytes > L->limit || L->used > L->limit - bytes)
        return lfail(L, NC_ERR_MEMORY,
                     "%s needs %zu bytes, more than the %zu bytes left of the memory budget (%zu); "
                     "raise nc_onnx_options.memory_budget if the model is really that large",
                     what, bytes, L->limit - L->used, L->limit);
    L->used += bytes;
    return NC_OK;
}

/* ==== constant tensors =================================================== */

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

static void cv_free(cval *c)
{
    if (!c)
        return;
    free(c->f);
    free(c->i);
    free(c);
}

static nc_status cv_new(loader *L, int is_int, int ndim, const int64_t *dims, const char *what, cval **out)
{
    *out = NULL;
    if (ndim < 0 || ndim > CV_MAX_DIMS)
        return lfail(L, NC_ERR_UNSUPPORTED, "%s has %d dimensions; at most %d are supported", what, ndim,
                     CV_MAX_DIMS);
    size_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (dims[d] < 0)
            return lfail(L, NC_ERR_FORMAT, "%s has a negative dimension (%lld)", what, (long long)dims[d]);
        if (nc_mul_size(n, (size_t)dims[d], &n) != 0 || n > (size_t)INT64_MAX)
            return lfail(L, NC_ERR_MEMORY, "%s: the element count overflows", what);
    }
    size_t bytes;
    if (nc_mul_size(n, is_int ? sizeof(int64_t) : sizeof(float), &bytes) != 0)
        return lfail(L, NC_ERR_MEMORY, "%s: the byte size overflows", what);
    TRY(budget_take(L, bytes, what));
    cval *c = calloc(1, sizeof *c);
    if (!c)
        return lfail(L, NC_ERR_MEMORY, "out of memory for %s", what);
    c->is_int = is_int;
    c->ndim = ndim;
    memcpy(c->dims, dims, (size_t)ndim * sizeof(int64_t));
    c->n = (int64_t)n;
    if (is_int)
        c->i = calloc(n ? n : 1, sizeof(int64_t));
    else
        c->f = calloc(n ? n : 1, sizeof(float));
    if (!c->i && !c->f) {
        free(c);
        return lfail(L, NC_ERR_MEMORY, "out of memory for %s (%zu bytes)", what, bytes);
    }
    *out = c;
    return NC_OK;
}

static double cv_get(const cval *c, int64_t k) { return c->is_int ? (double)c->i[k] : (double)c->f[k]; }

/* Integer read of any constant; floats are truncated, saturating. */
static int64_t cv_geti(const cval *c, int64_t k)
{
    if (c->is_int)
        return c->i[k];
    double v = c->f[k];
    if (!(v == v))
        return 0;
    if (v >= 9.2e18)
        return INT64_MAX;
    if (v <= -9.2e18)
        return INT64_MIN;
    return (int64_t)v;
}

static void cv_set(cval *c, int64_t k, double v)
{
    if (!c->is_int) {
        c->f[k] = (float)v;
        return;
    }
    if (!(v == v))
        c->i[k] = 0;
    else if (v >= 9.2e18)
        c->i[k] = INT64_MAX;
    else if (v <= -9.2e18)
        c->i[k] = INT64_MIN;
    else
        c->i[k] = (int64_t)v;
}

static nc_status cv_copy(loader *L, const cval *src, const char *what, cval **out)
{
    TRY(cv_new(L, src->is_int, src->ndim, src->dims, what, out));
    if (src->is_int)
        memcpy((*out)->i, src->i, (size_t)src->n * sizeof(int64_t));
    else
        memcpy((*out)->f, src->f, (size_t)src->n * sizeof(float));
    return NC_OK;
}

static const char *dims_str(int ndim, const int64_t *dims, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "", (long long)dims[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

/* ==== TensorProto decoding ================================================ */

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

static const char *dtype_name(int dt)
{
    static const char *names[] = {"undefined", "float32", "uint8", "int8", "uint16", "int16", "int32",
                                  "int64", "string", "bool", "float16", "float64", "uint32", "uint64",
                                  "complex64", "complex128", "bfloat16"};
    return dt >= 0 && dt < (int)(sizeof names / sizeof names[0]) ? names[dt] : "an unknown type";
}

/* Bytes per element in raw_data, 0 for types this importer cannot read. */
static size_t dtype_size(int dt)
{
    switch (dt) {
    case DT_UINT8: case DT_INT8: case DT_BOOL: return 1;
    case DT_UINT16: case DT_INT16: case DT_FLOAT16: case DT_BFLOAT16: return 2;
    case DT_FLOAT: case DT_INT32: case DT_UINT32: return 4;
    case DT_INT64: case DT_DOUBLE: case DT_UINT64: return 8;
    default: return 0;
    }
}

static int dtype_is_float(int dt)
{
    return dt == DT_FLOAT || dt == DT_DOUBLE || dt == DT_FLOAT16 || dt == DT_BFLOAT16;
}

static float half_to_float(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    float v;
    if (exp == 0)
        v = ldexpf((float)man, -24);
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexpf((float)(man | 1024), exp - 25);
    return sign ? -v : v;
}

static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* One element of little-endian raw bytes as a double (ints exactly up to 2^53)
 * or, for 64-bit integers, through *as_int to keep them exact. */
static double raw_element(const unsigned char *p, int dt, int64_t *as_int)
{
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; int32_t i32; uint32_t u32;
            int64_t i64; uint64_t u64; float f; double d; } u;
    memcpy(&u, p, dtype_size(dt));
    switch (dt) {
    case DT_FLOAT: return u.f;
    case DT_DOUBLE: return u.d;
    case DT_FLOAT16: return half_to_float(u.u16);
    case DT_BFLOAT16: return bf16_to_float(u.u16);
    case DT_UINT8: return *as_int = u.u8;
    case DT_BOOL: return *as_int = u.u8 != 0;
    case DT_INT8: return *as_int = u.i8;
    case DT_UINT16: return *as_int = u.u16;
    case DT_INT16: return *as_int = u.i16;
    case DT_INT32: return *as_int = u.i32;
    case DT_UINT32: return *as_int = u.u32;
    case DT_INT64: return (double)(*as_int = u.i64);
    case DT_UINT64: return (double)(*as_int = (int64_t)u.u64);
    }
    return 0;
}

static void decode_raw(cval *c, const unsigned char *bytes, int dt)
{
    size_t size = dtype_size(dt);
    for (int64_t k = 0; k < c->n; k++) {
        int64_t iv = 0;
        double v = raw_element(bytes + (size_t)k * size, dt, &iv);
        if (c->is_int)
            c->i[k] = iv;
        else
            c->f[k] = (float)v;
    }
}

/* The typed repeated field that holds a tensor of type dt, and its length. */
static size_t typed_count(const Onnx__TensorProto *t, int dt)
{
    switch (dt) {
    case DT_FLOAT: return t->n_float_data;
    case DT_DOUBLE: return t->n_double_data;
    case DT_INT64: return t->n_int64_data;
    case DT_UINT32: case DT_UINT64: return t->n_uint64_data;
    default: return t->n_int32_data;
    }
}

static void decode_typed(cval *c, const Onnx__TensorProto *t, int dt)
{
    for (int64_t k = 0; k < c->n; k++) {
        switch (dt) {
        case DT_FLOAT: c->f[k] = t->float_data[k]; break;
        case DT_DOUBLE: c->f[k] = (float)t->double_data[k]; break;
        case DT_INT64: c->i[k] = t->int64_data[k]; break;
        case DT_UINT32: case DT_UINT64: c->i[k] = (int64_t)t->uint64_data[k]; break;
        case DT_FLOAT16: c->f[k] = half_to_float((uint16_t)t->int32_data[k]); break;
        case DT_BFLOAT16: c->f[k] = bf16_to_float((uint16_t)t->int32_data[k]); break;
        case DT_BOOL: c->i[k] = t->int32_data[k] != 0; break;
        default: c->i[k] = t->int32_data[k]; break;
        }
    }
}

/* ---- external data: <model folder>/<location>, never outside it ---- */

static const char *external_key(const Onnx__TensorProto *t, const char *key)
{
    for (size_t k = 0; k < t->n_external_data; k++)
        if (t->external_data[k] && strcmp(S(t->external_data[k]->key), key) == 0)
            return S(t->external_data[k]->value);
    return NULL;
}

static int parse_u64(const char *text, uint64_t *out)
{
    if (!text || !*text)
        return -1;
    uint64_t v = 0;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = v;
    return 0;
}

/* A location may only name a file below the model's folder: no absolute path,
 * no ".." component (checked on the text, before touching the file system). */
static int location_is_safe(const char *loc)
{
    if (!*loc || loc[0] == '/')
        return 0;
    for (const char *p = loc; *p;) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return 0;
        p += len;
        while (*p == '/')
            p++;
    }
    return 1;
}

/* Resolves the location against the folder and refuses symlinks that leave it. */
static nc_status external_path(loader *L, const char *loc, const char *what, char *resolved)
{
    if (!L->dir[0])
        return lfail(L, NC_ERR_FORMAT, "%s uses external data, which this file cannot have", what);
    if (!location_is_safe(loc))
        return lfail(L, NC_ERR_FORMAT,
                     "%s: external data location '%s' is not inside the model's folder (absolute paths and "
                     "'..' are refused); keep the .onnx.data file next to the .onnx file",
                     what, loc);
    char joined[PATH_MAX * 2];
    snprintf(joined, sizeof joined, "%s/%s", L->dir, loc);
    if (!realpath(joined, resolved))
        return lfail(L, NC_ERR_IO,
                     "%s: cannot open external data file '%s' (%s); copy it next to the model, as "
                     "torch.onnx.export wrote it",
                     what, loc, strerror(errno));
    size_t n = strlen(L->dir);
    int inside = strncmp(resolved, L->dir, n) == 0 && (resolved[n] == '/' || (n == 1 && L->dir[0] == '/'));
    if (!inside)
        return lfail(L, NC_ERR_FORMAT,
                     "%s: external data location '%s' resolves to '%s', outside the model's folder "
                     "(a symbolic link?); refused",
                     what, loc, resolved);
    return NC_OK;
}

static nc_status read_exact(loader *L, int fd, unsigned char *buf, size_t size, uint64_t offset,
                            const char *file)
{
    size_t done = 0;
    while (done < size) {
        ssize_t got = pread(fd, buf + done, size - done, (off_t)(offset + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return lfail(L, NC_ERR_IO, "reading external data file '%s' failed (%s)", file,
                         got < 0 ? strerror(errno) : "unexpected end of file");
        done += (size_t)got;
    }
    return NC_OK;
}

/* Reads `need` bytes of a tensor's external data into a new buffer. */
static nc_status read_external(loader *L, const Onnx__TensorProto *t, const char *what, size_t need,
                               unsigned char **out)
{
    const char *loc = external_key(t, "location");
    const char *off_text = external_key(t, "offset"), *len_text = external_key(t, "length");
    uint64_t offset = 0, length = need;
    if (!loc)
        return lfail(L, NC_ERR_FORMAT, "%s is marked as external data but has no 'location'", what);
    if ((off_text && parse_u64(off_text, &offset) != 0) || (len_text && parse_u64(len_text, &length) != 0))
        return lfail(L, NC_ERR_FORMAT, "%s: external data offset '%s' or length '%s' is not a number", what,
                     S(off_text), S(len_text));
    if (length != need)
        return lfail(L, NC_ERR_FORMAT, "%s: external data length %llu does not match its shape (%zu bytes)",
                     what, (unsigned long long)length, need);
    char resolved[PATH_MAX];
    TRY(external_path(L, loc, what, resolved));
    int fd = open(resolved, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return lfail(L, NC_ERR_IO, "%s: external data '%s' is not a readable file", what, loc);
    }
    size_t end;
    if (nc_add_size((size_t)offset, (size_t)length, &end) != 0 || offset > SIZE_MAX ||
        end > (uint64_t)st.st_size) {
        close(fd);
        return lfail(L, NC_ERR_FORMAT,
                     "%s: external data (offset %llu, length %llu) runs past the end of '%s' (%lld bytes); "
                     "the .onnx.data file is truncated or belongs to another export",
                     what, (unsigned long long)offset, (unsigned long long)length, loc, (long long)st.st_size);
    }
    unsigned char *buf = malloc(need ? need : 1);
    nc_status st_read = buf ? read_exact(L, fd, buf, need, offset, loc)
                            : lfail(L, NC_ERR_MEMORY, "out of memory reading %s", what);
    close(fd);
    if (st_read != NC_OK) {
        free(buf);
        return st_read;
    }
    *out = buf;
    return NC_OK;
}

/* Decodes any numeric TensorProto into a constant; `what` names it in errors. */
static nc_status tensor_to_cval(loader *L, const Onnx__TensorProto *t, const char *what, cval **out)
{
    int dt = t->data_type;
    size_t esize = dtype_size(dt);
    if (!esize)
        return lfail(L, NC_ERR_UNSUPPORTED, "%s has type %s, which cannot be imported", what, dtype_name(dt));
    if (t->n_dims > CV_MAX_DIMS)
        return lfail(L, NC_ERR_UNSUPPORTED, "%s has %zu dimensions; at most %d are supported", what, t->n_dims,
                     CV_MAX_DIMS);
    cval *c;
    TRY(cv_new(L, !dtype_is_float(dt), (int)t->n_dims, t->dims, what, &c));
    size_t need;
    if (nc_mul_size((size_t)c->n, esize, &need) != 0) {
        cv_free(c);
        return lfail(L, NC_ERR_MEMORY, "%s: the byte size overflows", what);
    }
    nc_status st = NC_OK;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        unsigned char *bytes = NULL;
        st = read_external(L, t, what, need, &bytes);
        if (st == NC_OK)
            decode_raw(c, bytes, dt);
        free(bytes);
    } else if (t->has_raw_data) {
        if (t->raw_data.len != need)
            st = lfail(L, NC_ERR_FORMAT, "%s has %zu bytes of raw data, but its shape needs %zu", what,
                       t->raw_data.len, need);
        else
            decode_raw(c, t->raw_data.data, dt);
    } else if (typed_count(t, dt) != (size_t)c->n) {
        st = lfail(L, NC_ERR_FORMAT, "%s holds %zu values, but its shape needs %lld", what, typed_count(t, dt),
                   (long long)c->n);
    } else {
        decode_typed(c, t, dt);
    }
    if (st != NC_OK) {
        cv_free(c);
        return st;
    }
    *out = c;
    return NC_OK;
}

static nc_tensor *cv_to_tensor(const cval *c, int ndim, const int64_t *dims)
{
    nc_tensor *t = nc_tensor_new(ndim, dims);
    if (t)
        for (int64_t k = 0; k < c->n; k++)
            t->data[k] = (float)cv_get(c, k);
    return t;
}

/* ==== reading files ======================================================= */

static nc_status read_whole_file(loader *L, unsigned char **out, size_t *size)
{
    FILE *fp = fopen(L->path, "rb");
    if (!fp)
        return lfail(L, NC_ERR_IO, "cannot open the file (%s)", strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return lfail(L, NC_ERR_IO, "not a regular file");
    }
    if ((uint64_t)st.st_size > L->limit || (uint64_t)st.st_size > SIZE_MAX - 1) {
        fclose(fp);
        return lfail(L, NC_ERR_MEMORY, "the file is %lld bytes, more than the memory budget (%zu bytes)",
                     (long long)st.st_size, L->limit);
    }
    unsigned char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        fclose(fp);
        return lfail(L, NC_ERR_MEMORY, "out of memory reading %lld bytes", (long long)st.st_size);
    }
    size_t got = fread(buf, 1, (size_t)st.st_size, fp);
    int bad = ferror(fp);
    fclose(fp);
    if (bad || got != (size_t)st.st_size) {
        free(buf);
        return lfail(L, NC_ERR_IO, "reading the file failed");
    }
    *out = buf;
    *size = got;
    return NC_OK;
}

static nc_status not_onnx(loader *L)
{
    return lfail(L, NC_ERR_FORMAT,
                 "is not a valid ONNX model (protobuf parse failed: truncated or corrupt file); "
                 "re-export it with torch.onnx.export");
}

nc_status nc_onnx_read_tensor_file(const char *path, nc_tensor **out, nc_error *err)
{
    *out = NULL;
    loader L = {.path = path, .limit = DEFAULT_BUDGET, .err = err};
    unsigned char *buf;
    size_t size;
    TRY(read_whole_file(&L, &buf, &size));
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, size, buf);
    free(buf);
    if (!t)
        return lfail(&L, NC_ERR_FORMAT, "is not a serialized onnx.TensorProto (protobuf parse failed)");
    cval *c = NULL;
    nc_status st = NC_OK;
    if (t->n_dims > NC_MAX_DIMS)
        st = lfail(&L, NC_ERR_UNSUPPORTED, "the tensor has %zu dimensions; at most %d fit an nc_tensor",
                   t->n_dims, NC_MAX_DIMS);
    if (st == NC_OK)
        st = tensor_to_cval(&L, t, "the tensor", &c);
    if (st == NC_OK && !(*out = cv_to_tensor(c, c->ndim, c->dims)))
        st = lfail(&L, NC_ERR_MEMORY, "out of memory for the tensor");
    cv_free(c);
    onnx__tensor_proto__free_unpacked(t, NULL);
    return st;
}

/* ==== the importer ========================================================= */

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
} nctx;

static nc_status ifail(importer *imp, nc_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static nc_status ifail(importer *imp, nc_status code, const char *fmt, ...)
{
    char text[NC_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return nc_fail(imp->err, code, "%s: %s", imp->L.path, text);
}

/* A hard error about one node: "model.onnx: node 'x' (Conv, opset 13): ...". */
static nc_status node_fail(nctx *c, nc_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static nc_status node_fail(nctx *c, nc_status code, const char *fmt, ...)
{
    char text[NC_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return nc_fail(c->imp->err, code, "%s: node '%s' (%s, opset %d): %s", c->imp->L.path, c->name, c->op,
                   c->imp->opset, text);
}

/* Records why a node cannot be converted; the caller reports it. */
static nc_status unsup(nctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static nc_status unsup(nctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    return NC_ERR_UNSUPPORTED;
}

static nc_status oom(importer *imp) { return ifail(imp, NC_ERR_MEMORY, "out of memory"); }

static size_t hash_name(const char *s)
{
    size_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int find_value(const importer *imp, const char *name)
{
    if (!imp->table_size)
        return -1;
    size_t mask = imp->table_size - 1;
    for (size_t h = hash_name(name) & mask;; h = (h + 1) & mask) {
        int slot = imp->table[h];
        if (!slot)
            return -1;
        if (strcmp(imp->values[slot - 1].name, name) == 0)
            return slot - 1;
    }
}

static nc_status grow_table(importer *imp)
{
    size_t size = imp->table_size ? imp->table_size * 2 : 256;
    int *table = calloc(size, sizeof *table);
    if (!table)
        return oom(imp);
    for (int v = 0; v < imp->n_values; v++) {
        size_t h = hash_name(imp->values[v].name) & (size - 1);
        while (table[h])
            h = (h + 1) & (size - 1);
        table[h] = v + 1;
    }
    free(imp->table);
    imp->table = table;
    imp->table_size = size;
    return NC_OK;
}

/* The value called `name`, created (undefined) when new. */
static nc_status get_value(importer *imp, const char *name, value **out)
{
    int v = find_value(imp, name);
    if (v < 0) {
        if ((size_t)(imp->n_values + 1) * 2 > imp->table_size)
            TRY(grow_table(imp));
        if (imp->n_values == imp->cap_values) {
            int cap = imp->cap_values ? imp->cap_values * 2 : 64;
            value *values = realloc(imp->values, (size_t)cap * sizeof *values);
            if (!values)
                return oom(imp);
            imp->values = values;
            imp->cap_values = cap;
        }
        v = imp->n_values++;
        value *nv = &imp->values[v];
        memset(nv, 0, sizeof *nv);
        nv->name = name;
        nv->ir = -1;
        nv->producer = -1;
        nv->consumer = -1;
        size_t h = hash_name(name) & (imp->table_size - 1);
        while (imp->table[h])
            h = (h + 1) & (imp->table_size - 1);
        imp->table[h] = v + 1;
    }
    *out = &imp->values[v];
    return NC_OK;
}

/* Input i of the node, or NULL when absent (ONNX marks skipped optional
 * inputs with an empty name).  Every present input is defined: the graph
 * checks run before conversion. */
static value *in_value(nctx *c, size_t i)
{
    if (i >= c->p->n_input || !c->p->input[i] || !c->p->input[i][0])
        return NULL;
    int v = find_value(c->imp, c->p->input[i]);
    return v < 0 ? NULL : &c->imp->values[v];
}

static value *out_value(nctx *c, size_t i)
{
    if (i >= c->p->n_output || !c->p->output[i] || !c->p->output[i][0])
        return NULL;
    int v = find_value(c->imp, c->p->output[i]);
    return v < 0 ? NULL : &c->imp->values[v];
}

/* An output that something reads (a node or the graph outputs). */
static int output_used(nctx *c, size_t i)
{
    value *v = out_value(c, i);
    return v && v->n_consumers > 0;
}

static const char *node_display_name(const Onnx__NodeProto *p, int index, char *buf, size_t size)
{
    if (p->name && p->name[0])
        snprintf(buf, size, "%s", p->name);
    else
        snprintf(buf, size, "%s_%d", S(p->op_type), index);
    return buf;
}

static void nctx_init(nctx *c, importer *imp, int index)
{
    memset(c, 0, sizeof *c);
    c->imp = imp;
    c->index = index;
    c->p = imp->graph->node[index];
    c->op = S(c->p->op_type);
    node_display_name(c->p, index, c->name, sizeof c->name);
}

/* ---- report ---- */

static nc_status report(nctx *c, nc_support support, const char *target, const char *reason)
{
    importer *imp = c->imp;
    if (!nc_report_add(&imp->report, c->name, c->op, imp->opset, support, target, "%s", reason ? reason : ""))
        return oom(imp);
    imp->entry[c->index] = imp->report.count - 1;
    imp->handled[c->index] = 1;
    return NC_OK;
}

/* A constant-folded node is reported as folded into the first IR node that
 * reads its result; until one does, the target stays empty. */
static void credit_constants(importer *imp, const value *v, const char *target)
{
    int *stack = malloc((size_t)(imp->n_nodes + 1) * sizeof *stack);
    if (!stack)
        return; /* only the report's target names are lost */
    int top = 0;
    if (v->producer >= 0)
        stack[top++] = v->producer;
    while (top > 0) {
        int k = stack[--top];
        int e = imp->entry[k];
        if (e < 0 || imp->report.entries[e].support != NC_SUPPORT_FOLDED || imp->report.entries[e].target[0])
            continue;
        snprintf(imp->report.entries[e].target, NC_NAME_MAX, "%s", target);
        const Onnx__NodeProto *p = imp->graph->node[k];
        for (size_t i = 0; i < p->n_input && top < imp->n_nodes; i++) {
            int iv = p->input[i] && p->input[i][0] ? find_value(imp, p->input[i]) : -1;
            if (iv >= 0 && imp->values[iv].producer >= 0)
                stack[top++] = imp->values[iv].producer;
        }
    }
    free(stack);
}

static void credit_node_constants(nctx *c, const char *target)
{
    for (size_t i = 0; i < c->p->n_input; i++) {
        value *v = in_value(c, i);
        if (v && v->c)
            credit_constants(c->imp, v, target);
    }
}

/* ==== IR construction ====================================================== */

static nc_status ensure_refs(importer *imp, int n)
{
    if (n <= imp->cap_refs)
        return NC_OK;
    int cap = imp->cap_refs ? imp->cap_refs * 2 : 64;
    while (cap < n)
        cap *= 2;
    int *refs = realloc(imp->refs, (size_t)cap * sizeof *refs);
    if (!refs)
        return oom(imp);
    memset(refs + imp->cap_refs, 0, (size_t)(cap - imp->cap_refs) * sizeof *refs);
    imp->refs = refs;
    imp->cap_refs = cap;
    return NC_OK;
}

/* A name not yet used in the net: base, or base_2, base_3, ... */
static void unique_name(const nc_net *net, const char *base, char *out)
{
    snprintf(out, NC_NAME_MAX, "%s", base[0] ? base : "node");
    for (int n = 2; nc_net_find(net, out) >= 0; n++) {
        char suffix[16];
        int len = snprintf(suffix, sizeof suffix, "_%d", n);
        snprintf(out, NC_NAME_MAX, "%.*s%s", NC_NAME_MAX - 1 - len, base, suffix);
    }
}

static void set_dims(int *ndim, int64_t *dims, int n, const int64_t *src)
{
    *ndim = n;
    for (int d = 0; d < n; d++)
        dims[d] = src[d];
}

/* Appends an IR node named after `base`; returns its index in *out. */
static nc_status add_ir(importer *imp, nc_node_kind kind, const char *base, int n_in, const int *in, int ndim,
                        const int64_t *dims, int *out)
{
    char name[NC_NAME_MAX];
    unique_name(imp->net, base, name);
    int k = nc_net_add_node(imp->net, kind, name, n_in, in);
    if (k < 0)
        return oom(imp);
    TRY(ensure_refs(imp, k + 1));
    imp->refs[k] = 0;
    nc_node *node = &imp->net->nodes[k];
    node->ndim = ndim > 4 ? 4 : ndim;
    for (int d = 0; d < node->ndim; d++)
        node->shape[d] = dims[d];
    *out = k;
    return NC_OK;
}

/* The value now stands for IR node `ir` with the given per-sample shape. */
static void bind_value(importer *imp, value *v, int ir, int ndim, const int64_t *dims)
{
    v->ir = ir;
    set_dims(&v->ndim, v->dims, ndim, dims);
    if (ir >= 0)
        imp->refs[ir] += v->n_consumers;
}

/* Output `out` becomes another name for data value `in` (Identity, folds):
 * the edge in → this node goes away, out's consumers read in's IR node. */
static void alias_value(importer *imp, value *out, const value *in)
{
    if (!out)
        return;
    bind_value(imp, out, in->ir, in->ndim, in->dims);
    if (in->ir >= 0)
        imp->refs[in->ir] -= 1;
}

/* True when the value's IR node is read by this one consumer only, so that
 * changing its weights cannot affect anything else. */
static int sole_reader(const importer *imp, const value *v)
{
    return v->ir >= 0 && !v->tainted && imp->refs[v->ir] == 1;
}

static nc_node *ir_node(importer *imp, int ir) { return &imp->net->nodes[ir]; }

/* New IR node for node c reading `n_in` data values; output 0 maps to it. */
static nc_status emit(nctx *c, nc_node_kind kind, int n_in, value *const *in, int ndim, const int64_t *dims,
                      int *out)
{
    int ins[16];
    if (n_in > 16)
        return node_fail(c, NC_ERR_UNSUPPORTED, "more than 16 inputs");
    for (int i = 0; i < n_in; i++)
        ins[i] = in[i]->ir;
    TRY(add_ir(c->imp, kind, c->name, n_in, ins, ndim, dims, out));
    value *o = out_value(c, 0);
    if (o)
        bind_value(c->imp, o, *out, ndim, dims);
    credit_node_constants(c, ir_node(c->imp, *out)->name);
    return report(c, NC_SUPPORT_CONVERTED, ir_node(c->imp, *out)->name, NULL);
}

/* Node c has no effect: output 0 is its data input x. */
static nc_status remove_node(nctx *c, value *x, const char *reason)
{
    alias_value(c->imp, out_value(c, 0), x);
    return report(c, NC_SUPPORT_REMOVED, x->ir >= 0 ? ir_node(c->imp, x->ir)->name : "", reason);
}

/* ==== attributes ============================================================ */

static const Onnx__AttributeProto *attr(const nctx *c, const char *name)
{
    for (size_t k = 0; k < c->p->n_attribute; k++)
        if (c->p->attribute[k] && strcmp(S(c->p->attribute[k]->name), name) == 0)
            return c->p->attribute[k];
    return NULL;
}

static int64_t attr_int(const nctx *c, const char *name, int64_t fallback)
{
    const Onnx__AttributeProto *a = attr(c, name);
    return a && a->has_i ? a->i : fallback;
}

static float attr_float(const nctx *c, const char *name, float fallback)
{
    const Onnx__AttributeProto *a = attr(c, name);
    return a && a->has_f ? a->f : fallback;
}

/* The ints of an attribute, or NULL (count 0) when absent. */
static const int64_t *attr_ints(const nctx *c, const char *name, size_t *count)
{
    const Onnx__AttributeProto *a = attr(c, name);
    *count = a ? a->n_ints : 0;
    return a && a->n_ints ? a->ints : NULL;
}

/* A string attribute into buf ("" when absent). */
static const char *attr_string(const nctx *c, const char *name, char *buf, size_t size)
{
    const Onnx__AttributeProto *a = attr(c, name);
    size_t n = a && a->has_s ? a->s.len : 0;
    if (n >= size)
        n = size - 1;
    if (n)
        memcpy(buf, a->s.data, n);
    buf[n] = 0;
    return buf;
}

/* Exactly `want` positive ints (strides, dilations), default 1 each. */
static nc_status attr_pair(nctx *c, const char *name, int want, int *out)
{
    size_t n;
    const int64_t *v = attr_ints(c, name, &n);
    for (int k = 0; k < want; k++)
        out[k] = 1;
    if (!v)
        return NC_OK;
    if ((int)n != want)
        return node_fail(c, NC_ERR_FORMAT, "attribute '%s' has %zu values, expected %d", name, n, want);
    for (int k = 0; k < want; k++) {
        if (v[k] < 1 || v[k] > INT_MAX)
            return node_fail(c, NC_ERR_FORMAT, "attribute '%s' has a bad value %lld", name, (long long)v[k]);
        out[k] = (int)v[k];
    }
    return NC_OK;
}
