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
                     "if the model is really that large, raise NC_MEMORY_BUDGET (e.g. NC_MEMORY_BUDGET=16G)",
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
    for (int d = 0; d < ndim; d++)
        c->dims[d] = dims[d];
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
    if (need > L->limit - L->used) { /* the bytes are read before the constant is charged */
        close(fd);
        return budget_take(L, need, what);
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

/* Decodes any numeric TensorProto into a constant; `what` names it in errors.
 * The bytes the shape needs are checked against the data the file really
 * holds (raw bytes, typed values, the external file's size) before the
 * constant is allocated, so a tiny file cannot declare a huge tensor. */
static nc_status tensor_to_cval(loader *L, const Onnx__TensorProto *t, const char *what, cval **out)
{
    int dt = t->data_type;
    size_t esize = dtype_size(dt);
    *out = NULL;
    if (!esize)
        return lfail(L, NC_ERR_UNSUPPORTED, "%s has type %s, which cannot be imported", what, dtype_name(dt));
    if (t->n_dims > CV_MAX_DIMS)
        return lfail(L, NC_ERR_UNSUPPORTED, "%s has %zu dimensions; at most %d are supported", what, t->n_dims,
                     CV_MAX_DIMS);
    size_t n, need;
    for (size_t d = 0; d < t->n_dims; d++)
        if (t->dims[d] < 0)
            return lfail(L, NC_ERR_FORMAT, "%s has a negative dimension (%lld)", what, (long long)t->dims[d]);
    if (nc_shape_bytes((int)t->n_dims, t->dims, 1, &n) != 0 || n > (size_t)INT64_MAX ||
        nc_mul_size(n, esize, &need) != 0)
        return lfail(L, NC_ERR_MEMORY, "%s: the element count overflows", what);
    size_t value_bytes;
    if (nc_mul_size(n, dtype_is_float(dt) ? sizeof(float) : sizeof(int64_t), &value_bytes) != 0)
        return lfail(L, NC_ERR_MEMORY, "%s: the byte size overflows", what);
    if (value_bytes > L->limit - L->used)
        return budget_take(L, value_bytes, what); /* fails, naming the budget */
    unsigned char *bytes = NULL;
    const unsigned char *raw = NULL;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        TRY(read_external(L, t, what, need, &bytes));
        raw = bytes;
    } else if (t->has_raw_data) {
        if (t->raw_data.len != need)
            return lfail(L, NC_ERR_FORMAT, "%s has %zu bytes of raw data, but its shape needs %zu", what,
                         t->raw_data.len, need);
        raw = t->raw_data.data;
    } else if (typed_count(t, dt) != n) {
        return lfail(L, NC_ERR_FORMAT, "%s holds %zu values, but its shape needs %zu", what, typed_count(t, dt), n);
    }
    cval *c;
    nc_status st = cv_new(L, !dtype_is_float(dt), (int)t->n_dims, t->dims, what, &c);
    if (st == NC_OK) {
        if (raw)
            decode_raw(c, raw, dt);
        else
            decode_typed(c, t, dt);
        *out = c;
    }
    free(bytes);
    return st;
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
    loader L = {.path = path, .limit = nc_memory_budget(), .err = err};
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
    c->guess_ndim = -1;
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

/* ==== constant folding ====================================================== */

static loader *LD(nctx *c) { return &c->imp->L; }

static void const_what(nctx *c, char *buf, size_t size)
{
    snprintf(buf, size, "node '%s' (%s) output", c->name, c->op);
}

static nc_status new_out(nctx *c, int is_int, int ndim, const int64_t *dims, cval **out)
{
    char what[NC_NAME_MAX + 64];
    const_what(c, what, sizeof what);
    return cv_new(LD(c), is_int, ndim, dims, what, out);
}

/* Output i of node c becomes the constant k (owned by the value from now). */
static void set_const(nctx *c, size_t i, cval *k)
{
    value *o = out_value(c, i);
    if (!o) {
        cv_free(k);
        return;
    }
    cv_free(o->c);
    o->c = k;
}

/* A constant input that must be there. */
static nc_status need_const(nctx *c, size_t i, cval **out)
{
    value *v = in_value(c, i);
    if (!v)
        return node_fail(c, NC_ERR_FORMAT, "input %zu is missing", i);
    if (!v->c)
        return unsup(c, "input %zu ('%s') is computed at run time; it must be a constant", i, v->name);
    *out = v->c;
    return NC_OK;
}

/* Normalises an axis into [0, rank); -1 when out of range. */
static int norm_axis(int64_t axis, int rank)
{
    if (axis < 0)
        axis += rank;
    return axis >= 0 && axis < rank ? (int)axis : -1;
}

static void strides_of(int ndim, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= dims[d];
    }
}

/* ---- elementwise ---- */

typedef enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_POW } bin_op;

static int bin_int(bin_op op, int64_t a, int64_t b, int64_t *r)
{
    switch (op) {
    case BIN_ADD: return __builtin_add_overflow(a, b, r) ? -1 : 0;
    case BIN_SUB: return __builtin_sub_overflow(a, b, r) ? -1 : 0;
    case BIN_MUL: return __builtin_mul_overflow(a, b, r) ? -1 : 0;
    case BIN_DIV:
        if (b == 0 || (a == INT64_MIN && b == -1))
            return -1;
        *r = a / b;
        return 0;
    case BIN_POW: {
        int64_t p = 1;
        for (int64_t k = 0; k < b; k++)
            if (__builtin_mul_overflow(p, a, &p))
                return -1;
        *r = b < 0 ? 0 : p;
        return 0;
    }
    }
    return -1;
}

static double bin_float(bin_op op, double a, double b)
{
    switch (op) {
    case BIN_ADD: return a + b;
    case BIN_SUB: return a - b;
    case BIN_MUL: return a * b;
    case BIN_DIV: return a / b;
    case BIN_POW: return pow(a, b);
    }
    return 0;
}

/* numpy broadcasting of two shapes; -1 when they do not broadcast. */
static int broadcast_dims(const cval *a, const cval *b, int *ndim, int64_t *dims)
{
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int d = 0; d < n; d++) {
        int da = d - (n - a->ndim), db = d - (n - b->ndim);
        int64_t x = da >= 0 ? a->dims[da] : 1, y = db >= 0 ? b->dims[db] : 1;
        if (x != y && x != 1 && y != 1)
            return -1;
        dims[d] = x == 1 ? y : x;
    }
    *ndim = n;
    return 0;
}

/* Strides of `c` seen through a broadcast to an n-d shape (0 on size-1 axes). */
static void broadcast_strides(const cval *c, int n, int64_t *out)
{
    int64_t own[CV_MAX_DIMS];
    strides_of(c->ndim, c->dims, own);
    for (int d = 0; d < n; d++) {
        int dc = d - (n - c->ndim);
        out[d] = dc >= 0 && c->dims[dc] != 1 ? own[dc] : 0;
    }
}

static nc_status cv_binary(nctx *c, bin_op op, const cval *a, const cval *b, cval **out)
{
    int n;
    int64_t dims[CV_MAX_DIMS], sa[CV_MAX_DIMS], sb[CV_MAX_DIMS], idx[CV_MAX_DIMS] = {0};
    char ba[96], bb[96];
    if (broadcast_dims(a, b, &n, dims) != 0)
        return node_fail(c, NC_ERR_SHAPE, "shapes %s and %s do not broadcast", dims_str(a->ndim, a->dims, ba, 96),
                         dims_str(b->ndim, b->dims, bb, 96));
    cval *r;
    TRY(new_out(c, a->is_int && b->is_int, n, dims, &r));
    broadcast_strides(a, n, sa);
    broadcast_strides(b, n, sb);
    int64_t ia = 0, ib = 0;
    for (int64_t k = 0; k < r->n; k++) {
        if (r->is_int) {
            if (bin_int(op, a->i[ia], b->i[ib], &r->i[k]) != 0) {
                cv_free(r);
                return node_fail(c, NC_ERR_FORMAT, "integer overflow or division by zero in a constant");
            }
        } else {
            r->f[k] = (float)bin_float(op, cv_get(a, ia), cv_get(b, ib));
        }
        for (int d = n - 1; d >= 0; d--) { /* odometer step over the output index */
            ia += sa[d];
            ib += sb[d];
            if (++idx[d] < dims[d])
                break;
            ia -= sa[d] * dims[d];
            ib -= sb[d] * dims[d];
            idx[d] = 0;
        }
    }
    *out = r;
    return NC_OK;
}

static nc_status c_binary(nctx *c)
{
    static const struct { const char *op; bin_op bin; } ops[] = {
        {"Add", BIN_ADD}, {"Sub", BIN_SUB}, {"Mul", BIN_MUL}, {"Div", BIN_DIV}, {"Pow", BIN_POW}};
    cval *a, *b, *r;
    TRY(need_const(c, 0, &a));
    TRY(need_const(c, 1, &b));
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        if (strcmp(c->op, ops[k].op) == 0) {
            TRY(cv_binary(c, ops[k].bin, a, b, &r));
            set_const(c, 0, r);
            return NC_OK;
        }
    }
    return unsup(c, "no constant evaluation for %s", c->op);
}

static double unary(const char *op, double x)
{
    if (!strcmp(op, "Neg")) return -x;
    if (!strcmp(op, "Sqrt")) return sqrt(x);
    if (!strcmp(op, "Reciprocal")) return 1.0 / x;
    if (!strcmp(op, "Floor")) return floor(x);
    if (!strcmp(op, "Ceil")) return ceil(x);
    if (!strcmp(op, "Abs")) return fabs(x);
    if (!strcmp(op, "Relu")) return x > 0 ? x : 0;
    return x; /* Identity, Dropout */
}

static nc_status c_unary(nctx *c)
{
    cval *a, *r;
    TRY(need_const(c, 0, &a));
    TRY(new_out(c, a->is_int, a->ndim, a->dims, &r));
    for (int64_t k = 0; k < a->n; k++) {
        if (a->is_int && (!strcmp(c->op, "Identity") || !strcmp(c->op, "Dropout")))
            r->i[k] = a->i[k];
        else
            cv_set(r, k, unary(c->op, cv_get(a, k)));
    }
    set_const(c, 0, r);
    return NC_OK;
}

static nc_status c_cast(nctx *c)
{
    cval *a, *r;
    TRY(need_const(c, 0, &a));
    int to = (int)attr_int(c, "to", DT_FLOAT);
    if (!dtype_size(to))
        return unsup(c, "cast to %s", dtype_name(to));
    TRY(new_out(c, !dtype_is_float(to), a->ndim, a->dims, &r));
    for (int64_t k = 0; k < a->n; k++) {
        if (to == DT_BOOL)
            r->i[k] = cv_get(a, k) != 0;
        else if (r->is_int && a->is_int)
            r->i[k] = a->i[k];
        else
            cv_set(r, k, cv_get(a, k));
    }
    set_const(c, 0, r);
    return NC_OK;
}

/* ---- shapes and indexing ---- */

static nc_status c_constant(nctx *c)
{
    const Onnx__AttributeProto *a = attr(c, "value");
    cval *r;
    char what[NC_NAME_MAX + 64];
    const_what(c, what, sizeof what);
    if (a && a->t)
        TRY(tensor_to_cval(LD(c), a->t, what, &r));
    else if ((a = attr(c, "value_float")) && a->has_f) {
        TRY(new_out(c, 0, 0, NULL, &r));
        r->f[0] = a->f;
    } else if ((a = attr(c, "value_int")) && a->has_i) {
        TRY(new_out(c, 1, 0, NULL, &r));
        r->i[0] = a->i;
    } else if ((a = attr(c, "value_floats"))) {
        int64_t n = (int64_t)a->n_floats;
        TRY(new_out(c, 0, 1, &n, &r));
        for (int64_t k = 0; k < n; k++)
            r->f[k] = a->floats[k];
    } else if ((a = attr(c, "value_ints"))) {
        int64_t n = (int64_t)a->n_ints;
        TRY(new_out(c, 1, 1, &n, &r));
        for (int64_t k = 0; k < n; k++)
            r->i[k] = a->ints[k];
    } else {
        return unsup(c, "a Constant without a numeric value (sparse or string constants are not supported)");
    }
    set_const(c, 0, r);
    return NC_OK;
}

/* Full shape of a value, batch axis included for data. */
static int full_shape(const importer *imp, const value *v, int64_t *dims)
{
    if (v->c) {
        memcpy(dims, v->c->dims, (size_t)v->c->ndim * sizeof(int64_t));
        return v->c->ndim;
    }
    dims[0] = imp->batch;
    memcpy(dims + 1, v->dims, (size_t)v->ndim * sizeof(int64_t));
    return v->ndim + 1;
}

static nc_status op_shape(nctx *c)
{
    value *x = in_value(c, 0);
    if (!x)
        return node_fail(c, NC_ERR_FORMAT, "input 0 is missing");
    int64_t dims[CV_MAX_DIMS + 1];
    int r = full_shape(c->imp, x, dims);
    int64_t start = attr_int(c, "start", 0), end = attr_int(c, "end", r);
    start = start < 0 ? start + r : start;
    end = end < 0 ? end + r : end;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < start ? start : end > r ? r : end;
    int64_t n = end - start;
    cval *out;
    TRY(new_out(c, 1, 1, &n, &out));
    memcpy(out->i, dims + start, (size_t)n * sizeof(int64_t));
    set_const(c, 0, out);
    credit_node_constants(c, "");
    return report(c, NC_SUPPORT_FOLDED, "", x->c ? "constant: evaluated at import"
                                                 : "the shape is known at import (batch as declared, or 1)");
}

static nc_status c_gather(nctx *c)
{
    cval *data, *ind, *r;
    TRY(need_const(c, 0, &data));
    TRY(need_const(c, 1, &ind));
    int axis = norm_axis(attr_int(c, "axis", 0), data->ndim);
    if (axis < 0 || data->ndim - 1 + ind->ndim > CV_MAX_DIMS)
        return node_fail(c, NC_ERR_FORMAT, "bad axis for a %d-d tensor", data->ndim);
    int64_t dims[CV_MAX_DIMS], outer = 1, inner = 1, len = data->dims[axis];
    int n = 0;
    for (int d = 0; d < axis; d++)
        outer *= (dims[n++] = data->dims[d]);
    for (int d = 0; d < ind->ndim; d++)
        dims[n++] = ind->dims[d];
    for (int d = axis + 1; d < data->ndim; d++)
        inner *= (dims[n++] = data->dims[d]);
    TRY(new_out(c, data->is_int, n, dims, &r));
    int64_t k = 0;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < ind->n; j++) {
            int64_t at = cv_geti(ind, j);
            at = at < 0 ? at + len : at;
            if (at < 0 || at >= len) {
                cv_free(r);
                return node_fail(c, NC_ERR_FORMAT, "index %lld is out of range [0, %lld)",
                                 (long long)cv_geti(ind, j), (long long)len);
            }
            for (int64_t i = 0; i < inner; i++, k++) {
                int64_t src = (o * len + at) * inner + i;
                if (r->is_int)
                    r->i[k] = data->i[src];
                else
                    r->f[k] = data->f[src];
            }
        }
    }
    set_const(c, 0, r);
    return NC_OK;
}

/* The axes of Squeeze/Unsqueeze: an attribute before opset 13, then input 1. */
static nc_status axes_arg(nctx *c, int64_t *axes, int *n)
{
    size_t count = 0;
    const int64_t *a = attr_ints(c, "axes", &count);
    cval *in = NULL;
    if (!a && in_value(c, 1))
        TRY(need_const(c, 1, &in));
    if (in)
        count = (size_t)in->n;
    if (count > CV_MAX_DIMS)
        return node_fail(c, NC_ERR_FORMAT, "too many axes");
    for (size_t k = 0; k < count; k++)
        axes[k] = a ? a[k] : cv_geti(in, (int64_t)k);
    *n = (int)count;
    return NC_OK;
}

/* Output shape of Squeeze (unsq = 0) or Unsqueeze (unsq = 1) on a full shape. */
static nc_status squeeze_shape(nctx *c, int unsq, int rank, const int64_t *dims, int *out_rank, int64_t *out)
{
    int64_t axes[CV_MAX_DIMS];
    int n_axes = 0, mark[CV_MAX_DIMS + 1] = {0};
    TRY(axes_arg(c, axes, &n_axes));
    int r = unsq ? rank + n_axes : rank;
    if (r > CV_MAX_DIMS)
        return unsup(c, "the result would have %d dimensions", r);
    for (int k = 0; k < n_axes; k++) {
        int a = norm_axis(axes[k], r);
        if (a < 0 || mark[a] || (!unsq && dims[a] != 1))
            return node_fail(c, NC_ERR_FORMAT, "axis %lld cannot be %s", (long long)axes[k],
                             unsq ? "inserted" : "squeezed");
        mark[a] = 1;
    }
    int n = 0;
    for (int d = 0, src = 0; d < r; d++) {
        if (unsq && mark[d])
            out[n++] = 1;
        else if (unsq)
            out[n++] = dims[src++];
        else if (!(mark[d] || (n_axes == 0 && dims[d] == 1)))
            out[n++] = dims[d];
    }
    *out_rank = n;
    return NC_OK;
}

/* Same values, new shape (Reshape, Flatten, Squeeze, Unsqueeze on constants). */
static nc_status c_reshaped(nctx *c, const cval *a, int ndim, const int64_t *dims)
{
    cval *r;
    TRY(cv_copy(LD(c), a, "a reshaped constant", &r));
    if (nc_shape_numel(ndim, dims) != a->n) {
        cv_free(r);
        return node_fail(c, NC_ERR_SHAPE, "cannot reshape %lld values", (long long)a->n);
    }
    r->ndim = ndim;
    memcpy(r->dims, dims, (size_t)ndim * sizeof(int64_t));
    set_const(c, 0, r);
    return NC_OK;
}

static nc_status c_squeeze(nctx *c)
{
    cval *a;
    int n;
    int64_t dims[CV_MAX_DIMS];
    TRY(need_const(c, 0, &a));
    TRY(squeeze_shape(c, !strcmp(c->op, "Unsqueeze"), a->ndim, a->dims, &n, dims));
    return c_reshaped(c, a, n, dims);
}

static nc_status c_flatten(nctx *c)
{
    cval *a;
    TRY(need_const(c, 0, &a));
    int axis = (int)attr_int(c, "axis", 1);
    axis = axis < 0 ? axis + a->ndim : axis;
    if (axis < 0 || axis > a->ndim)
        return node_fail(c, NC_ERR_FORMAT, "axis out of range");
    int64_t dims[2] = {1, 1};
    for (int d = 0; d < a->ndim; d++)
        dims[d >= axis] *= a->dims[d];
    return c_reshaped(c, a, 2, dims);
}

/* Resolves a Reshape target (0 = copy, unless allowzero; -1 = inferred). */
static nc_status reshape_target(nctx *c, int rank, const int64_t *in, int64_t numel, int *out_rank,
                                int64_t *out)
{
    cval *shape = NULL;
    size_t n_attr;
    const int64_t *from_attr = attr_ints(c, "shape", &n_attr); /* opset < 5 */
    if (!from_attr)
        TRY(need_const(c, 1, &shape));
    int n = from_attr ? (int)n_attr : (int)shape->n;
    if (n > CV_MAX_DIMS)
        return unsup(c, "a %d-d target shape", n);
    int infer = -1, allowzero = (int)attr_int(c, "allowzero", 0);
    int64_t known = 1;
    for (int d = 0; d < n; d++) {
        int64_t v = from_attr ? from_attr[d] : cv_geti(shape, d);
        if (v == 0 && !allowzero && d < rank)
            v = in[d];
        if (v == -1 && infer < 0)
            infer = d;
        else if (v < 0)
            return node_fail(c, NC_ERR_FORMAT, "bad target dimension %lld", (long long)v);
        else if (__builtin_mul_overflow(known, v, &known))
            return node_fail(c, NC_ERR_FORMAT, "target shape overflows");
        out[d] = v;
    }
    if (infer >= 0)
        out[infer] = known ? numel / known : 0;
    if (nc_shape_numel(n, out) != numel)
        return node_fail(c, NC_ERR_SHAPE, "cannot reshape %lld values into the target shape", (long long)numel);
    *out_rank = n;
    return NC_OK;
}

static nc_status c_reshape(nctx *c)
{
    cval *a;
    int n;
    int64_t dims[CV_MAX_DIMS];
    TRY(need_const(c, 0, &a));
    TRY(reshape_target(c, a->ndim, a->dims, a->n, &n, dims));
    return c_reshaped(c, a, n, dims);
}

static nc_status c_concat(nctx *c)
{
    cval *first, *r;
    TRY(need_const(c, 0, &first));
    int axis = norm_axis(attr_int(c, "axis", 0), first->ndim);
    if (axis < 0)
        return node_fail(c, NC_ERR_FORMAT, "axis out of range");
    int64_t dims[CV_MAX_DIMS], outer = 1;
    memcpy(dims, first->dims, sizeof dims);
    dims[axis] = 0;
    for (size_t i = 0; i < c->p->n_input; i++) {
        cval *a;
        TRY(need_const(c, i, &a));
        int fits = a->ndim == first->ndim;
        for (int d = 0; fits && d < a->ndim; d++)
            fits = d == axis || a->dims[d] == first->dims[d];
        if (!fits)
            return node_fail(c, NC_ERR_SHAPE, "input %zu does not fit the others", i);
        dims[axis] += a->dims[axis];
    }
    for (int d = 0; d < axis; d++)
        outer *= dims[d];
    TRY(new_out(c, first->is_int, first->ndim, dims, &r));
    int64_t k = 0;
    for (int64_t o = 0; o < outer; o++) {
        for (size_t i = 0; i < c->p->n_input; i++) {
            const cval *a = in_value(c, i)->c;
            int64_t chunk = a->n / (outer ? outer : 1);
            for (int64_t j = 0; j < chunk; j++, k++) {
                if (r->is_int)
                    r->i[k] = cv_geti(a, o * chunk + j);
                else
                    r->f[k] = (float)cv_get(a, o * chunk + j);
            }
        }
    }
    set_const(c, 0, r);
    return NC_OK;
}

/* Slice parameters: attributes before opset 10, then inputs 1..4. */
static nc_status slice_args(nctx *c, int rank, int64_t *start, int64_t *end, int64_t *step)
{
    for (int d = 0; d < rank; d++)
        start[d] = 0, step[d] = 1;
    int64_t s[CV_MAX_DIMS], e[CV_MAX_DIMS], ax[CV_MAX_DIMS], st[CV_MAX_DIMS];
    size_t n = 0, ne = 0, na = 0;
    const int64_t *a;
    cval *k;
    if ((a = attr_ints(c, "starts", &n))) {
        memcpy(s, a, (n > CV_MAX_DIMS ? CV_MAX_DIMS : n) * sizeof *s);
        if ((a = attr_ints(c, "ends", &ne)))
            memcpy(e, a, (ne > CV_MAX_DIMS ? CV_MAX_DIMS : ne) * sizeof *e);
        if ((a = attr_ints(c, "axes", &na)))
            memcpy(ax, a, (na > CV_MAX_DIMS ? CV_MAX_DIMS : na) * sizeof *ax);
    } else {
        TRY(need_const(c, 1, &k));
        n = (size_t)k->n;
        for (size_t j = 0; j < n && j < CV_MAX_DIMS; j++)
            s[j] = cv_geti(k, (int64_t)j);
        TRY(need_const(c, 2, &k));
        ne = (size_t)k->n;
        for (size_t j = 0; j < ne && j < CV_MAX_DIMS; j++)
            e[j] = cv_geti(k, (int64_t)j);
        if (in_value(c, 3)) {
            TRY(need_const(c, 3, &k));
            na = (size_t)k->n;
            for (size_t j = 0; j < na && j < CV_MAX_DIMS; j++)
                ax[j] = cv_geti(k, (int64_t)j);
        }
    }
    if (n > (size_t)rank || ne != n || (na && na != n))
        return node_fail(c, NC_ERR_FORMAT, "starts, ends and axes differ in length");
    for (size_t j = 0; j < n; j++)
        st[j] = 1;
    if (in_value(c, 4)) {
        TRY(need_const(c, 4, &k));
        for (size_t j = 0; j < n && j < (size_t)k->n; j++)
            st[j] = cv_geti(k, (int64_t)j);
    }
    for (size_t j = 0; j < n; j++) {
        int d = na ? norm_axis(ax[j], rank) : (int)j;
        if (d < 0 || st[j] == 0)
            return node_fail(c, NC_ERR_FORMAT, "bad axis or zero step");
        start[d] = s[j], end[d] = e[j], step[d] = st[j];
    }
    return NC_OK;
}

/* Clamps a slice to a dimension the way numpy does; returns its length. */
static int64_t slice_clamp(int64_t dim, int64_t *start, int64_t *end, int64_t step)
{
    int64_t s = *start, e = *end;
    s = s < 0 ? s + dim : s;
    e = e < 0 ? (e < -dim ? -1 : e + dim) : e;
    if (step > 0) {
        s = s < 0 ? 0 : s > dim ? dim : s;
        e = e < 0 ? 0 : e > dim ? dim : e;
        *start = s;
        return e > s ? (e - s + step - 1) / step : 0;
    }
    s = s < 0 ? -1 : s > dim - 1 ? dim - 1 : s;
    e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    *start = s;
    return s > e ? (s - e + (-step) - 1) / (-step) : 0;
}

static nc_status c_slice(nctx *c)
{
    cval *a, *r;
    TRY(need_const(c, 0, &a));
    int64_t start[CV_MAX_DIMS], end[CV_MAX_DIMS], step[CV_MAX_DIMS], dims[CV_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++)
        end[d] = a->dims[d];
    TRY(slice_args(c, a->ndim, start, end, step));
    for (int d = 0; d < a->ndim; d++)
        dims[d] = slice_clamp(a->dims[d], &start[d], &end[d], step[d]);
    TRY(new_out(c, a->is_int, a->ndim, dims, &r));
    int64_t strides[CV_MAX_DIMS], idx[CV_MAX_DIMS] = {0};
    strides_of(a->ndim, a->dims, strides);
    for (int64_t k = 0; k < r->n; k++) {
        int64_t src = 0;
        for (int d = 0; d < a->ndim; d++)
            src += (start[d] + idx[d] * step[d]) * strides[d];
        if (r->is_int)
            r->i[k] = a->i[src];
        else
            r->f[k] = a->f[src];
        for (int d = a->ndim - 1; d >= 0 && ++idx[d] == dims[d]; d--)
            idx[d] = 0;
    }
    set_const(c, 0, r);
    return NC_OK;
}

static nc_status c_transpose(nctx *c)
{
    cval *a, *r;
    TRY(need_const(c, 0, &a));
    size_t n;
    const int64_t *perm = attr_ints(c, "perm", &n);
    int p[CV_MAX_DIMS], seen[CV_MAX_DIMS] = {0};
    if (perm && (int)n != a->ndim)
        return node_fail(c, NC_ERR_FORMAT, "perm has %zu entries for a %d-d tensor", n, a->ndim);
    for (int d = 0; d < a->ndim; d++) {
        p[d] = perm ? norm_axis(perm[d], a->ndim) : a->ndim - 1 - d;
        if (p[d] < 0 || seen[p[d]]++)
            return node_fail(c, NC_ERR_FORMAT, "perm is not a permutation");
    }
    int64_t dims[CV_MAX_DIMS], strides[CV_MAX_DIMS], idx[CV_MAX_DIMS] = {0};
    for (int d = 0; d < a->ndim; d++)
        dims[d] = a->dims[p[d]];
    strides_of(a->ndim, a->dims, strides);
    TRY(new_out(c, a->is_int, a->ndim, dims, &r));
    for (int64_t k = 0; k < r->n; k++) {
        int64_t src = 0;
        for (int d = 0; d < a->ndim; d++)
            src += idx[d] * strides[p[d]];
        if (r->is_int)
            r->i[k] = a->i[src];
        else
            r->f[k] = a->f[src];
        for (int d = a->ndim - 1; d >= 0 && ++idx[d] == dims[d]; d--)
            idx[d] = 0;
    }
    set_const(c, 0, r);
    return NC_OK;
}

static nc_status c_constant_of_shape(nctx *c)
{
    cval *shape, *r, *fill = NULL;
    TRY(need_const(c, 0, &shape));
    if (shape->n > CV_MAX_DIMS)
        return unsup(c, "a %lld-d result", (long long)shape->n);
    int64_t dims[CV_MAX_DIMS];
    for (int64_t d = 0; d < shape->n; d++)
        dims[d] = cv_geti(shape, d);
    const Onnx__AttributeProto *a = attr(c, "value");
    if (a && a->t)
        TRY(tensor_to_cval(LD(c), a->t, "ConstantOfShape value", &fill));
    nc_status st = new_out(c, fill ? fill->is_int : 0, (int)shape->n, dims, &r);
    if (st == NC_OK && fill && fill->n >= 1)
        for (int64_t k = 0; k < r->n; k++)
            cv_set(r, k, cv_get(fill, 0));
    cv_free(fill);
    if (st == NC_OK)
        set_const(c, 0, r);
    return st;
}

static nc_status c_range(nctx *c)
{
    cval *s, *l, *d, *r;
    TRY(need_const(c, 0, &s));
    TRY(need_const(c, 1, &l));
    TRY(need_const(c, 2, &d));
    if (s->n != 1 || l->n != 1 || d->n != 1 || cv_get(d, 0) == 0)
        return node_fail(c, NC_ERR_FORMAT, "start, limit and delta must be scalars, delta non-zero");
    double start = cv_get(s, 0), delta = cv_get(d, 0);
    double count = ceil((cv_get(l, 0) - start) / delta);
    int64_t n = count > 0 ? (count < 1e15 ? (int64_t)count : INT64_MAX / 16) : 0;
    TRY(new_out(c, s->is_int, 1, &n, &r));
    for (int64_t k = 0; k < n; k++)
        cv_set(r, k, s->is_int ? (double)(cv_geti(s, 0) + k * cv_geti(d, 0)) : start + (double)k * delta);
    set_const(c, 0, r);
    return NC_OK;
}

/* ==== data ops → IR nodes =================================================== */

/* Input i as a data value (computed at run time). */
static nc_status data_in(nctx *c, size_t i, value **out)
{
    value *v = in_value(c, i);
    if (!v)
        return node_fail(c, NC_ERR_FORMAT, "input %zu is missing", i);
    if (v->c)
        return unsup(c, "input %zu ('%s') is a constant where the op needs the network's data", i, v->name);
    *out = v;
    return NC_OK;
}

static nc_status need_rank(nctx *c, const value *x, int ndim, const char *what)
{
    if (x->ndim == ndim)
        return NC_OK;
    if (x->ndim == 2 && ndim == 3)
        return unsup(c, "1-D %s (only 2-D is supported)", what);
    if (x->ndim == 4 && ndim == 3)
        return unsup(c, "3-D %s (only 2-D is supported)", what);
    char buf[96];
    return unsup(c, "%s on a %d-d input %s per sample (expected %d-d)", what, x->ndim,
                 dims_str(x->ndim, x->dims, buf, sizeof buf), ndim);
}

static float *float_array(int64_t n) { return calloc(n > 0 ? (size_t)n : 1, sizeof(float)); }

/* The constant k, broadcast against data x, as one value per channel (axis 0
 * of the per-sample shape); it may not vary along any other axis. */
static nc_status per_channel(nctx *c, const cval *k, const value *x, float **vec)
{
    char buf[96];
    int rank = x->ndim + 1, varies = 0;
    if (x->ndim < 1)
        return unsup(c, "the data has no channel axis (each sample is a scalar)");
    if (k->ndim > rank)
        return unsup(c, "a constant of shape %s has more dimensions than the data", dims_str(k->ndim, k->dims, buf, 96));
    for (int d = 0; d < k->ndim; d++) {
        int axis = d + rank - k->ndim; /* right-aligned, as in ONNX broadcasting */
        if (k->dims[d] == 1)
            continue;
        if (axis != 1 || k->dims[d] != x->dims[0])
            return unsup(c, "a constant of shape %s varies %s; only per-channel constants (shape [C, 1, 1] or a "
                            "scalar) can be folded", dims_str(k->ndim, k->dims, buf, 96),
                         axis == 0 ? "along the batch axis" : "within a channel");
        varies = 1;
    }
    int64_t C = x->dims[0];
    float *v = float_array(C);
    if (!v)
        return oom(c->imp);
    for (int64_t ch = 0; ch < C; ch++)
        v[ch] = (float)cv_get(k, varies ? ch : 0);
    *vec = v;
    return NC_OK;
}

/* Folds y = scale·x + shift (per output channel) into the IR node that
 * computes x, when only this node reads it. */
static int fold_affine(importer *imp, const value *x, const float *scale, const float *shift)
{
    if (!sole_reader(imp, x))
        return 0;
    nc_node *n = ir_node(imp, x->ir);
    if (n->kind != NC_NODE_CONV2D && n->kind != NC_NODE_DENSE && n->kind != NC_NODE_AFFINE)
        return 0;
    int64_t C = n->weight->shape[0], per = nc_tensor_numel(n->weight) / (C ? C : 1);
    if (n->kind == NC_NODE_AFFINE)
        C = nc_tensor_numel(n->weight), per = 1;
    if (C != x->dims[0] || (!n->bias && !(n->bias = nc_tensor_new1(C))))
        return 0;
    for (int64_t o = 0; o < C; o++) {
        float s = scale ? scale[o] : 1.0f;
        for (int64_t j = 0; j < per; j++)
            n->weight->data[o * per + j] *= s;
        n->bias->data[o] = n->bias->data[o] * s + (shift ? shift[o] : 0.0f);
    }
    return 1;
}

/* y = scale·x + shift per channel: folded into the producer, else an AFFINE
 * node.  Takes ownership of scale and shift (either may be NULL). */
static nc_status affine_op(nctx *c, value *x, float *scale, float *shift, const char *what)
{
    importer *imp = c->imp;
    nc_status st = NC_OK;
    if (fold_affine(imp, x, scale, shift)) {
        const char *target = ir_node(imp, x->ir)->name;
        char reason[REASON_MAX];
        snprintf(reason, sizeof reason, "%s folded into the weights and bias of '%s'", what, target);
        alias_value(imp, out_value(c, 0), x);
        credit_node_constants(c, target);
        st = report(c, NC_SUPPORT_FOLDED, target, reason);
    } else {
        int64_t C = x->dims[0];
        nc_tensor *w = nc_tensor_new1(C), *b = nc_tensor_new1(C);
        int ir;
        if (!w || !b) {
            nc_tensor_free(w);
            nc_tensor_free(b);
            st = oom(imp);
        } else {
            for (int64_t ch = 0; ch < C; ch++) {
                w->data[ch] = scale ? scale[ch] : 1.0f;
                b->data[ch] = shift ? shift[ch] : 0.0f;
            }
            st = emit(c, NC_NODE_AFFINE, 1, &x, x->ndim, x->dims, &ir);
            if (st == NC_OK) {
                ir_node(imp, ir)->weight = w;
                ir_node(imp, ir)->bias = b;
            } else {
                nc_tensor_free(w);
                nc_tensor_free(b);
            }
        }
    }
    free(scale);
    free(shift);
    return st;
}

/* ---- neurons ---- */

static nc_status op_relu(nctx *c)
{
    value *x;
    int ir;
    TRY(data_in(c, 0, &x));
    TRY(emit(c, NC_NODE_NEURON, 1, &x, x->ndim, x->dims, &ir));
    ir_node(c->imp, ir)->neuron.model = NC_NEURON_RELU;
    return NC_OK;
}

/* Clip bounds: attributes before opset 11, then optional constant inputs. */
static nc_status clip_bounds(nctx *c, float *lo, float *hi)
{
    *lo = -INFINITY;
    *hi = INFINITY;
    if (c->imp->opset < 11) {
        *lo = attr_float(c, "min", -INFINITY);
        *hi = attr_float(c, "max", INFINITY);
        return NC_OK;
    }
    for (size_t i = 1; i <= 2; i++) {
        value *b = in_value(c, i);
        if (!b)
            continue;
        if (!b->c || b->c->n != 1)
            return unsup(c, "Clip bound '%s' is %s; it must be a constant scalar", b->name,
                         b->c ? "not a scalar" : "computed at run time");
        *(i == 1 ? lo : hi) = (float)cv_get(b->c, 0);
    }
    return NC_OK;
}

static nc_status op_clip(nctx *c)
{
    value *x;
    float lo, hi;
    int ir;
    TRY(data_in(c, 0, &x));
    TRY(clip_bounds(c, &lo, &hi));
    TRY(emit(c, NC_NODE_NEURON, 1, &x, x->ndim, x->dims, &ir));
    nc_neuron *n = &ir_node(c->imp, ir)->neuron;
    n->model = NC_NEURON_CLIP;
    n->clip_min = lo;
    n->clip_max = hi;
    return NC_OK;
}

/* ---- the QCFS chain: Div(λ) → Clip(0,1) → Mul(L) → Add(φ) → Floor → Div(L) → Mul(λ) ---- */

/* The only reader of v, if it is an op_type node not yet handled. */
static int chain_next(importer *imp, const value *v, const char *op_type)
{
    if (v->n_consumers != 1 || v->is_output || v->consumer < 0 || imp->handled[v->consumer])
        return -1;
    const Onnx__NodeProto *p = imp->graph->node[v->consumer];
    if (strcmp(S(p->op_type), op_type) != 0 || (p->domain && p->domain[0] && strcmp(p->domain, "ai.onnx")))
        return -1;
    return v->consumer;
}

/* The constant operand of a binary chain node that reads v. */
static const cval *chain_const(nctx *cc, const value *v, int commutative)
{
    value *a = in_value(cc, 0), *b = in_value(cc, 1);
    if (a == v && b && b->c)
        return b->c;
    if (commutative && b == v && a && a->c)
        return a->c;
    return NULL;
}

static int same_const(const cval *a, const cval *b)
{
    if (a->n != b->n)
        return 0;
    for (int64_t k = 0; k < a->n; k++)
        if (cv_get(a, k) != cv_get(b, k))
            return 0;
    return 1;
}

typedef struct qcfs_match {
    int nodes[6];   /* Clip, Mul, Add, Floor, Div, Mul */
    int levels;
    float shift;
} qcfs_match;

/* One step of the chain: the node after *v of type op, with its constant. */
static int chain_step(importer *imp, value **v, const char *op, int commutative, nctx *cc, const cval **k)
{
    int n = chain_next(imp, *v, op);
    if (n < 0)
        return -1;
    nctx_init(cc, imp, n);
    *k = NULL;
    if (commutative >= 0 && !(*k = chain_const(cc, *v, commutative)))
        return -1;
    value *o = out_value(cc, 0);
    if (!o || cc->p->n_output != 1)
        return -1;
    *v = o;
    return n;
}

static int match_qcfs(importer *imp, value *v, const cval *lambda, qcfs_match *m)
{
    nctx cc;
    const cval *k;
    float lo, hi;
    if ((m->nodes[0] = chain_step(imp, &v, "Clip", -1, &cc, &k)) < 0 || clip_bounds(&cc, &lo, &hi) != NC_OK ||
        lo != 0.0f || hi != 1.0f)
        return 0;
    if ((m->nodes[1] = chain_step(imp, &v, "Mul", 1, &cc, &k)) < 0 || k->n != 1)
        return 0;
    double L = cv_get(k, 0);
    if ((m->nodes[2] = chain_step(imp, &v, "Add", 1, &cc, &k)) < 0 || k->n != 1)
        return 0;
    m->shift = (float)cv_get(k, 0);
    if ((m->nodes[3] = chain_step(imp, &v, "Floor", -1, &cc, &k)) < 0)
        return 0;
    if ((m->nodes[4] = chain_step(imp, &v, "Div", 0, &cc, &k)) < 0 || k->n != 1 || cv_get(k, 0) != L)
        return 0;
    if ((m->nodes[5] = chain_step(imp, &v, "Mul", 1, &cc, &k)) < 0 || !same_const(k, lambda))
        return 0;
    if (!(L >= 1 && L <= 1 << 20 && L == floor(L)))
        return 0;
    m->levels = (int)L;
    return 1;
}

/* Builds the QCFS neuron for the Div node c that heads a matched chain. */
static nc_status emit_qcfs(nctx *c, value *x, const cval *lambda, const qcfs_match *m)
{
    importer *imp = c->imp;
    float *th;
    int ir;
    TRY(per_channel(c, lambda, x, &th));
    int n = lambda->n == 1 ? 1 : (int)x->dims[0];
    nc_status st = emit(c, NC_NODE_NEURON, 1, &x, x->ndim, x->dims, &ir);
    nc_neuron *neuron = &ir_node(imp, ir)->neuron;
    if (st == NC_OK)
        st = nc_neuron_set_threshold(neuron, n, th, imp->err);
    free(th);
    TRY(st);
    neuron->model = NC_NEURON_QCFS;
    neuron->levels = m->levels;
    neuron->shift = m->shift;
    const char *target = ir_node(imp, ir)->name;
    value *last = NULL;
    for (int s = 0; s < 6; s++) {
        nctx cc;
        nctx_init(&cc, imp, m->nodes[s]);
        last = out_value(&cc, 0);
        credit_node_constants(&cc, target);
        TRY(report(&cc, NC_SUPPORT_FOLDED, target, "part of the QCFS chain Div→Clip→Mul→Add→Floor→Div→Mul"));
    }
    /* the chain's result is the neuron's output */
    imp->refs[ir] -= out_value(c, 0)->n_consumers;
    bind_value(imp, last, ir, x->ndim, x->dims);
    return NC_OK;
}

/* ---- arithmetic with the data ---- */

static nc_status op_add(nctx *c)
{
    value *a = in_value(c, 0), *b = in_value(c, 1);
    char ba[96], bb[96];
    int ir;
    if (!a || !b)
        return node_fail(c, NC_ERR_FORMAT, "needs two inputs");
    if (!a->c && !b->c) {
        value *in[2] = {a, b};
        int same = a->ndim == b->ndim && !memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof(int64_t));
        if (!same)
            return unsup(c, "Add with broadcasting between two computed values (%s and %s)",
                         dims_str(a->ndim, a->dims, ba, 96), dims_str(b->ndim, b->dims, bb, 96));
        return emit(c, NC_NODE_ADD, 2, in, a->ndim, a->dims, &ir);
    }
    value *x = a->c ? b : a;
    float *shift;
    TRY(per_channel(c, (a->c ? a : b)->c, x, &shift));
    return affine_op(c, x, NULL, shift, "the constant");
}

static nc_status op_sub(nctx *c)
{
    value *a = in_value(c, 0), *b = in_value(c, 1);
    if (!a || !b)
        return node_fail(c, NC_ERR_FORMAT, "needs two inputs");
    if (!a->c && !b->c)
        return unsup(c, "Sub of two computed values has no spiking equivalent");
    value *x = a->c ? b : a;
    float *shift, *scale = NULL;
    TRY(per_channel(c, (a->c ? a : b)->c, x, &shift));
    int64_t C = x->dims[0];
    if (a->c) { /* k − x */
        if (!(scale = float_array(C))) {
            free(shift);
            return oom(c->imp);
        }
        for (int64_t ch = 0; ch < C; ch++)
            scale[ch] = -1.0f;
    } else {
        for (int64_t ch = 0; ch < C; ch++)
            shift[ch] = -shift[ch];
    }
    return affine_op(c, x, scale, shift, "the constant");
}

static nc_status op_mul(nctx *c)
{
    value *a = in_value(c, 0), *b = in_value(c, 1);
    if (!a || !b)
        return node_fail(c, NC_ERR_FORMAT, "needs two inputs");
    if (!a->c && !b->c)
        return unsup(c, "the product of two computed values has no spiking equivalent");
    value *x = a->c ? b : a;
    float *scale;
    TRY(per_channel(c, (a->c ? a : b)->c, x, &scale));
    return affine_op(c, x, scale, NULL, "the constant factor");
}

static nc_status op_div(nctx *c)
{
    value *a = in_value(c, 0), *b = in_value(c, 1);
    if (!a || !b)
        return node_fail(c, NC_ERR_FORMAT, "needs two inputs");
    if (a->c || !b->c)
        return unsup(c, "division by a computed value has no spiking equivalent");
    value *o = out_value(c, 0);
    qcfs_match m;
    if (o && match_qcfs(c->imp, o, b->c, &m))
        return emit_qcfs(c, a, b->c, &m);
    float *scale;
    TRY(per_channel(c, b->c, a, &scale));
    for (int64_t ch = 0; ch < a->dims[0]; ch++)
        scale[ch] = 1.0f / scale[ch];
    return affine_op(c, a, scale, NULL, "the constant divisor");
}

static nc_status op_batchnorm(nctx *c)
{
    value *x;
    cval *k[4]; /* scale, B, mean, var */
    TRY(data_in(c, 0, &x));
    if (attr_int(c, "training_mode", 0) || (c->imp->opset < 7 && !attr_int(c, "is_test", 1)) ||
        output_used(c, 1) || output_used(c, 2) || output_used(c, 3) || output_used(c, 4))
        return unsup(c, "training-mode BatchNormalization (batch statistics); export the model in eval() mode");
    if (c->imp->opset < 9 && !attr_int(c, "spatial", 1))
        return unsup(c, "BatchNormalization with spatial=0 (per-position statistics)");
    for (int i = 0; i < 4; i++)
        TRY(need_const(c, (size_t)i + 1, &k[i]));
    if (x->ndim < 1)
        return unsup(c, "the data has no channel axis");
    int64_t C = x->dims[0];
    for (int i = 0; i < 4; i++)
        if (k[i]->n != C)
            return node_fail(c, NC_ERR_SHAPE, "input %d has %lld values for %lld channels", i + 1,
                             (long long)k[i]->n, (long long)C);
    double eps = attr_float(c, "epsilon", 1e-5f);
    float *scale = float_array(C), *shift = float_array(C);
    if (!scale || !shift) {
        free(scale);
        free(shift);
        return oom(c->imp);
    }
    for (int64_t ch = 0; ch < C; ch++) { /* y = γ(x − μ)/√(σ² + ε) + β */
        double s = cv_get(k[0], ch) / sqrt(cv_get(k[3], ch) + eps);
        scale[ch] = (float)s;
        shift[ch] = (float)(cv_get(k[1], ch) - cv_get(k[2], ch) * s);
    }
    return affine_op(c, x, scale, shift, "BatchNormalization");
}

/* ---- layout ---- */

/* A reshape of the data that keeps the batch axis: identity → removed, flat
 * → FLATTEN, anything else cannot be expressed in the IR. */
static nc_status relayout(nctx *c, value *x, int ndim, const int64_t *dims)
{
    char a[96], b[96];
    int ir;
    if (ndim == x->ndim && !memcmp(dims, x->dims, (size_t)ndim * sizeof(int64_t)))
        return remove_node(c, x, "does not change the per-sample layout");
    if (ndim == 1 && dims[0] == nc_shape_numel(x->ndim, x->dims)) {
        if (x->ndim == 1)
            return remove_node(c, x, "the data is already flat");
        return emit(c, NC_NODE_FLATTEN, 1, &x, 1, dims, &ir);
    }
    if (ndim <= NC_MAX_DIMS - 1) {
        c->guess_ndim = ndim;
        memcpy(c->guess, dims, (size_t)ndim * sizeof *dims);
    }
    return unsup(c, "%s changes the per-sample shape %s to %s; only flattening (to [N, -1]) is supported", c->op,
                 dims_str(x->ndim, x->dims, a, 96), dims_str(ndim, dims, b, 96));
}

static nc_status op_flatten(nctx *c)
{
    value *x;
    TRY(data_in(c, 0, &x));
    int64_t axis = attr_int(c, "axis", 1), rank = x->ndim + 1;
    if (axis < 0)
        axis += rank;
    if (axis != 1)
        return unsup(c, "Flatten axis %lld mixes the batch axis with other axes; only axis=1 is supported",
                     (long long)attr_int(c, "axis", 1));
    int64_t n = nc_shape_numel(x->ndim, x->dims);
    return relayout(c, x, 1, &n);
}

static nc_status op_reshape(nctx *c)
{
    value *x;
    int64_t full[NC_MAX_DIMS + 1], target[CV_MAX_DIMS];
    int n;
    char buf[96];
    TRY(data_in(c, 0, &x));
    if (in_value(c, 1) && !in_value(c, 1)->c)
        return unsup(c, "the target shape is computed at run time");
    int rank = full_shape(c->imp, x, full);
    TRY(reshape_target(c, rank, full, nc_shape_numel(rank, full), &n, target));
    if (n < 1 || target[0] != c->imp->batch)
        return unsup(c, "Reshape to %s mixes the batch axis (batch %lld) with the other axes",
                     dims_str(n, target, buf, 96), (long long)c->imp->batch);
    if (n - 1 > NC_MAX_DIMS - 1)
        return unsup(c, "Reshape to %d dimensions (a sample has at most 4)", n);
    return relayout(c, x, n - 1, target + 1);
}

static nc_status op_squeeze(nctx *c)
{
    value *x;
    int64_t full[CV_MAX_DIMS], target[CV_MAX_DIMS];
    int n;
    TRY(data_in(c, 0, &x));
    int rank = full_shape(c->imp, x, full);
    full[0] = 2; /* a batch of 1 must not be squeezed away as if it were a unit axis */
    TRY(squeeze_shape(c, !strcmp(c->op, "Unsqueeze"), rank, full, &n, target));
    if (n < 1 || target[0] != 2)
        return unsup(c, "%s of the batch axis", c->op);
    if (n - 1 > NC_MAX_DIMS - 1)
        return unsup(c, "%s to %d dimensions", c->op, n);
    return relayout(c, x, n - 1, target + 1);
}

static nc_status op_concat(nctx *c)
{
    value *in[16];
    int ir;
    size_t n = c->p->n_input;
    if (n < 1 || n > 16)
        return unsup(c, "Concat of %zu inputs (1 to 16 are supported)", n);
    for (size_t i = 0; i < n; i++) {
        if (in_value(c, i) && in_value(c, i)->c)
            return unsup(c, "Concat of the data with a constant (only computed values can be concatenated)");
        TRY(data_in(c, i, &in[i]));
        if (in[i]->ndim != in[0]->ndim)
            return node_fail(c, NC_ERR_SHAPE, "inputs differ in rank");
    }
    int64_t axis = attr_int(c, "axis", 1), rank = in[0]->ndim + 1;
    if (axis < 0)
        axis += rank;
    if (axis != 1)
        return unsup(c, "Concat along axis %lld; only the channel axis (1) is supported",
                     (long long)attr_int(c, "axis", 1));
    int64_t dims[NC_MAX_DIMS];
    memcpy(dims, in[0]->dims, sizeof dims);
    for (size_t i = 1; i < n; i++) {
        for (int d = 1; d < in[0]->ndim; d++)
            if (in[i]->dims[d] != dims[d])
                return node_fail(c, NC_ERR_SHAPE, "input %zu differs in a dimension other than channels", i);
        dims[0] += in[i]->dims[0];
    }
    return emit(c, NC_NODE_CONCAT, (int)n, in, in[0]->ndim, dims, &ir);
}

/* ---- nodes with no effect at inference ---- */

static nc_status op_identity(nctx *c)
{
    value *x = NULL;
    TRY(data_in(c, 0, &x));
    return remove_node(c, x, "no effect at inference");
}

static nc_status op_dropout(nctx *c)
{
    value *x, *mode = in_value(c, 2);
    TRY(data_in(c, 0, &x));
    if (output_used(c, 1))
        return unsup(c, "the Dropout mask output is used");
    if (mode && (!mode->c || (mode->c->n >= 1 && cv_get(mode->c, 0) != 0)))
        return unsup(c, "Dropout in training mode; export the model in eval() mode");
    return remove_node(c, x, "no effect at inference");
}

static nc_status op_cast(nctx *c)
{
    value *x;
    TRY(data_in(c, 0, &x));
    int to = (int)attr_int(c, "to", 0);
    if (!dtype_is_float(to))
        return unsup(c, "Cast of the data to %s", dtype_name(to));
    return remove_node(c, x, "a cast between float types has no effect on float32 values");
}

static nc_status op_softmax(nctx *c)
{
    value *x, *y = out_value(c, 0);
    TRY(data_in(c, 0, &x));
    if (!y || !y->is_output || y->n_consumers != 1)
        return unsup(c, "%s in the middle of the network: spiking neurons cannot compute it (only a final "
                        "Softmax, whose result is a graph output, is dropped)", c->op);
    return remove_node(c, x, "softmax does not change the argmax; the SNN output is the accumulated logits");
}

/* ---- convolution, dense, pooling ---- */

/* Padding [top, left, bottom, right] from `pads` or `auto_pad`, given the
 * input size, the (dilated) kernel and the strides. */
static nc_status window_pads(nctx *c, const value *x, const int *k, const int *s, const int *d, int *pad)
{
    char mode[32];
    size_t n;
    const int64_t *p = attr_ints(c, "pads", &n);
    attr_string(c, "auto_pad", mode, sizeof mode);
    memset(pad, 0, 4 * sizeof *pad);
    if (!mode[0] || !strcmp(mode, "NOTSET")) {
        if (p && n != 4)
            return node_fail(c, NC_ERR_FORMAT, "pads has %zu values, expected 4", n);
        for (size_t j = 0; p && j < 4; j++) {
            if (p[j] < 0 || p[j] > INT_MAX / 4)
                return node_fail(c, NC_ERR_FORMAT, "bad padding %lld", (long long)p[j]);
            pad[j] = (int)p[j];
        }
        return NC_OK;
    }
    if (!strcmp(mode, "VALID"))
        return NC_OK;
    if (strcmp(mode, "SAME_UPPER") && strcmp(mode, "SAME_LOWER"))
        return node_fail(c, NC_ERR_FORMAT, "unknown auto_pad '%s'", mode);
    for (int a = 0; a < 2; a++) { /* output = ceil(in / stride) */
        int64_t in = x->dims[1 + a], out = (in + s[a] - 1) / s[a];
        int64_t total = (out - 1) * s[a] + (int64_t)(k[a] - 1) * d[a] + 1 - in;
        total = total < 0 ? 0 : total > INT_MAX / 4 ? INT_MAX / 4 : total;
        int small = (int)(total / 2), large = (int)(total - total / 2);
        int upper = !strcmp(mode, "SAME_UPPER"); /* the extra pixel goes at the end */
        pad[a] = upper ? small : large;
        pad[a + 2] = upper ? large : small;
    }
    return NC_OK;
}

/* Output [C, OH, OW] of a sliding window (the same rule as nc_net.c). */
static nc_status window_shape(nctx *c, const value *x, int64_t channels, const nc_node *n, int64_t *dims)
{
    dims[0] = channels;
    for (int a = 0; a < 2; a++) {
        int64_t span = x->dims[1 + a] + n->pad[a] + n->pad[a + 2] - ((int64_t)(n->kernel[a] - 1) * n->dilation[a] + 1);
        int64_t out = span < 0 ? 0 : n->ceil_mode ? (span + n->stride[a] - 1) / n->stride[a] + 1 : span / n->stride[a] + 1;
        if (n->ceil_mode && out > 0 && (out - 1) * n->stride[a] >= x->dims[1 + a] + n->pad[a])
            out--;
        if (out < 1)
            return node_fail(c, NC_ERR_SHAPE, "a %dx%d window does not fit the %lldx%lld input", n->kernel[0],
                             n->kernel[1], (long long)x->dims[1], (long long)x->dims[2]);
        dims[1 + a] = out;
    }
    return NC_OK;
}

/* Fills kernel, stride, dilation and pads of a window node template. */
static nc_status window_params(nctx *c, const value *x, const int *kernel, nc_node *t)
{
    memset(t, 0, sizeof *t);
    t->kernel[0] = kernel[0];
    t->kernel[1] = kernel[1];
    TRY(attr_pair(c, "strides", 2, t->stride));
    TRY(attr_pair(c, "dilations", 2, t->dilation));
    return window_pads(c, x, t->kernel, t->stride, t->dilation, t->pad);
}

static void copy_window(nc_node *dst, const nc_node *t)
{
    memcpy(dst->kernel, t->kernel, sizeof t->kernel);
    memcpy(dst->stride, t->stride, sizeof t->stride);
    memcpy(dst->dilation, t->dilation, sizeof t->dilation);
    memcpy(dst->pad, t->pad, sizeof t->pad);
    dst->ceil_mode = t->ceil_mode;
    dst->count_include_pad = t->count_include_pad;
}

static nc_status conv_weights(nctx *c, const value *x, cval **w, cval **b, int *groups)
{
    TRY(need_const(c, 1, w));
    if ((*w)->ndim != 4)
        return unsup(c, "%d-D convolution (only 2-D is supported)", (*w)->ndim - 2);
    *b = NULL;
    if (in_value(c, 2))
        TRY(need_const(c, 2, b));
    int64_t g = attr_int(c, "group", 1), cout = (*w)->dims[0];
    if (g < 1 || g > INT_MAX || cout % g || (*w)->dims[1] * g != x->dims[0])
        return node_fail(c, NC_ERR_SHAPE, "weight %lldx%lld with group %lld does not fit %lld input channels",
                         (long long)cout, (long long)(*w)->dims[1], (long long)g, (long long)x->dims[0]);
    if (*b && (*b)->n != cout)
        return node_fail(c, NC_ERR_SHAPE, "bias has %lld values for %lld output channels", (long long)(*b)->n,
                         (long long)cout);
    if ((*w)->dims[2] > INT_MAX || (*w)->dims[3] > INT_MAX)
        return node_fail(c, NC_ERR_SHAPE, "kernel too large");
    *groups = (int)g;
    return NC_OK;
}

static nc_status op_conv(nctx *c)
{
    value *x;
    cval *w, *b;
    int groups = 1, ir;
    nc_node t;
    int64_t dims[3];
    TRY(data_in(c, 0, &x));
    if (x->ndim != 3 && in_value(c, 1) && in_value(c, 1)->c && in_value(c, 1)->c->ndim != 4)
        return unsup(c, "%d-D convolution (only 2-D is supported)", in_value(c, 1)->c->ndim - 2);
    TRY(need_rank(c, x, 3, "convolution"));
    TRY(conv_weights(c, x, &w, &b, &groups));
    int kernel[2] = {(int)w->dims[2], (int)w->dims[3]};
    size_t nk;
    const int64_t *ks = attr_ints(c, "kernel_shape", &nk);
    if (ks && (nk != 2 || ks[0] != kernel[0] || ks[1] != kernel[1]))
        return node_fail(c, NC_ERR_SHAPE, "kernel_shape does not match the weight");
    TRY(window_params(c, x, kernel, &t));
    TRY(window_shape(c, x, w->dims[0], &t, dims));
    nc_tensor *wt = cv_to_tensor(w, 4, w->dims), *bt = b ? cv_to_tensor(b, 1, &w->dims[0]) : NULL;
    if (!wt || (b && !bt)) {
        nc_tensor_free(wt);
        nc_tensor_free(bt);
        return oom(c->imp);
    }
    nc_status st = emit(c, NC_NODE_CONV2D, 1, &x, 3, dims, &ir);
    if (st != NC_OK) {
        nc_tensor_free(wt);
        nc_tensor_free(bt);
        return st;
    }
    nc_node *n = ir_node(c->imp, ir);
    copy_window(n, &t);
    n->groups = groups;
    n->weight = wt;
    n->bias = bt;
    return NC_OK;
}

/* A DENSE node with weight [out, in] = scale·W (transposed when `trans`:
 * W given as [in, out]) and bias [out] broadcast from `bias` times beta. */
static nc_status emit_dense(nctx *c, value *x, const cval *w, int trans, double scale, const cval *bias,
                            double beta)
{
    int64_t out = trans ? w->dims[1] : w->dims[0], in = trans ? w->dims[0] : w->dims[1];
    int ir;
    if (in != x->dims[0])
        return node_fail(c, NC_ERR_SHAPE, "the weight expects %lld inputs, the data has %lld", (long long)in,
                         (long long)x->dims[0]);
    nc_tensor *wt = nc_tensor_new2(out, in), *bt = bias ? nc_tensor_new1(out) : NULL;
    if (!wt || (bias && !bt)) {
        nc_tensor_free(wt);
        nc_tensor_free(bt);
        return oom(c->imp);
    }
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in; i++)
            wt->data[o * in + i] = (float)(scale * cv_get(w, trans ? i * out + o : o * in + i));
    for (int64_t o = 0; bt && o < out; o++)
        bt->data[o] = (float)(beta * cv_get(bias, bias->n == 1 ? 0 : o));
    nc_status st = emit(c, NC_NODE_DENSE, 1, &x, 1, &out, &ir);
    if (st != NC_OK) {
        nc_tensor_free(wt);
        nc_tensor_free(bt);
        return st;
    }
    ir_node(c->imp, ir)->weight = wt;
    ir_node(c->imp, ir)->bias = bt;
    return NC_OK;
}

static nc_status op_gemm(nctx *c)
{
    value *a = in_value(c, 0);
    cval *b, *bias = NULL;
    char buf[96];
    if (!a)
        return node_fail(c, NC_ERR_FORMAT, "input A is missing");
    if (a->c)
        return unsup(c, "A is a constant and B the data; only data × constant weights is supported");
    if (attr_int(c, "transA", 0))
        return unsup(c, "transA=1: A is the data, so it cannot be transposed");
    TRY(need_const(c, 1, &b));
    if (in_value(c, 2))
        TRY(need_const(c, 2, &bias));
    TRY(need_rank(c, a, 1, "Gemm"));
    if (b->ndim != 2)
        return node_fail(c, NC_ERR_SHAPE, "B must be 2-d");
    int64_t out = attr_int(c, "transB", 0) ? b->dims[0] : b->dims[1];
    if (bias) { /* C broadcasts against [N, out]; it may only vary along out */
        int ok = bias->ndim <= 2 && (bias->n == 1 || bias->n == out) &&
                 (bias->ndim < 2 || bias->dims[0] == 1);
        if (!ok)
            return unsup(c, "the bias C of shape %s varies along the batch axis; only a bias of [out] or [1, out] "
                            "is supported", dims_str(bias->ndim, bias->dims, buf, 96));
    }
    return emit_dense(c, a, b, !attr_int(c, "transB", 0), attr_float(c, "alpha", 1.0f), bias,
                      attr_float(c, "beta", 1.0f));
}

static nc_status op_matmul(nctx *c)
{
    value *a = in_value(c, 0);
    cval *b;
    if (!a)
        return node_fail(c, NC_ERR_FORMAT, "input A is missing");
    if (a->c)
        return unsup(c, "the data is the second operand; only data × constant weights is supported");
    TRY(need_const(c, 1, &b));
    if (a->ndim != 1)
        return unsup(c, "MatMul on a %d-D input; only [N, K] × [K, M] with constant weights is supported",
                     a->ndim + 1);
    if (b->ndim != 2)
        return unsup(c, "MatMul with a %d-d weight; only a 2-d [K, M] weight is supported", b->ndim);
    return emit_dense(c, a, b, 1, 1.0, NULL, 1.0);
}

/* Kernel of a 2-D pool; 1-D and 3-D pools are unsupported. */
static nc_status pool_kernel(nctx *c, const value *x, int *kernel)
{
    size_t n;
    const int64_t *k = attr_ints(c, "kernel_shape", &n);
    if (!k)
        return node_fail(c, NC_ERR_FORMAT, "kernel_shape is missing");
    if (n != 2)
        return unsup(c, "%zu-D pooling (only 2-D is supported)", n);
    TRY(need_rank(c, x, 3, "pooling"));
    for (int a = 0; a < 2; a++) {
        if (k[a] < 1 || k[a] > INT_MAX)
            return node_fail(c, NC_ERR_FORMAT, "bad kernel size %lld", (long long)k[a]);
        kernel[a] = (int)k[a];
    }
    return NC_OK;
}

static nc_status op_pool(nctx *c)
{
    value *x;
    int kernel[2], ir, is_max = !strcmp(c->op, "MaxPool");
    nc_node t;
    int64_t dims[3];
    TRY(data_in(c, 0, &x));
    if (is_max && output_used(c, 1))
        return unsup(c, "MaxPool with a second output (Indices)");
    TRY(pool_kernel(c, x, kernel));
    TRY(window_params(c, x, kernel, &t));
    if (!is_max && (t.dilation[0] != 1 || t.dilation[1] != 1))
        return unsup(c, "AveragePool with dilations");
    t.ceil_mode = (int)attr_int(c, "ceil_mode", 0) != 0;
    t.count_include_pad = (int)attr_int(c, "count_include_pad", 0) != 0;
    TRY(window_shape(c, x, x->dims[0], &t, dims));
    TRY(emit(c, is_max ? NC_NODE_MAXPOOL : NC_NODE_AVGPOOL, 1, &x, 3, dims, &ir));
    copy_window(ir_node(c->imp, ir), &t);
    return NC_OK;
}

static nc_status op_global_avgpool(nctx *c)
{
    value *x;
    int ir;
    TRY(data_in(c, 0, &x));
    TRY(need_rank(c, x, 3, "global pooling"));
    int64_t dims[3] = {x->dims[0], 1, 1};
    return emit(c, NC_NODE_GLOBAL_AVGPOOL, 1, &x, 3, dims, &ir);
}

/* ReduceMean over H and W (how some exporters write adaptive average
 * pooling to 1×1): a global average pool, flattened when keepdims=0. */
static nc_status op_reduce_mean(nctx *c)
{
    value *x;
    int64_t axes[CV_MAX_DIMS];
    int n = 0, seen[4] = {0}, ir;
    TRY(data_in(c, 0, &x));
    TRY(axes_arg(c, axes, &n));
    for (int k = 0; k < n; k++) {
        int a = norm_axis(axes[k], x->ndim + 1);
        if (a >= 0 && a < 4)
            seen[a] = 1;
    }
    if (x->ndim != 3 || n != 2 || !seen[2] || !seen[3])
        return unsup(c, "ReduceMean other than over the spatial axes (2, 3) of an [N, C, H, W] input");
    int64_t pooled[3] = {x->dims[0], 1, 1};
    TRY(emit(c, NC_NODE_GLOBAL_AVGPOOL, 1, &x, 3, pooled, &ir));
    if (attr_int(c, "keepdims", 1))
        return NC_OK;
    char name[NC_NAME_MAX + 16];
    snprintf(name, sizeof name, "%.*s_flatten", NC_NAME_MAX - 16, ir_node(c->imp, ir)->name);
    value *o = out_value(c, 0);
    int flat;
    TRY(add_ir(c->imp, NC_NODE_FLATTEN, name, 1, &ir, 1, pooled, &flat));
    if (o) { /* the flattened node computes the output now */
        c->imp->refs[ir] -= o->n_consumers;
        c->imp->refs[ir] += 1;
        bind_value(c->imp, o, flat, 1, pooled);
    }
    return NC_OK;
}

/* Pad: all-zero pads do nothing (the TorchScript exporter writes one before
 * every AvgPool2d).  Zero-valued constant padding of H and W becomes a 1×1
 * average pool with that padding and count_include_pad = 1: it copies the
 * input and puts zeros around it, exactly, with no new node kind. */
static nc_status pad_amounts(nctx *c, const value *x, int64_t *pads, int *n)
{
    value *p = in_value(c, 1);
    size_t count = 0;
    const int64_t *attr_pads = attr_ints(c, "pads", &count);
    if (p && p->name && p->name[0]) {
        if (!p->c)
            return unsup(c, "Pad with pads computed at run time");
        count = (size_t)p->c->n;
        for (size_t j = 0; j < count && j < 2 * CV_MAX_DIMS; j++)
            pads[j] = cv_geti(p->c, (int64_t)j);
    } else if (attr_pads) {
        for (size_t j = 0; j < count && j < 2 * CV_MAX_DIMS; j++)
            pads[j] = attr_pads[j];
    }
    if (count != (size_t)(2 * (x->ndim + 1)))
        return node_fail(c, NC_ERR_FORMAT, "pads has %zu values for a %d-d input", count, x->ndim + 1);
    *n = (int)count;
    return NC_OK;
}

static nc_status op_pad(nctx *c)
{
    value *x, *fill = in_value(c, 2);
    char mode[32];
    int64_t pads[2 * CV_MAX_DIMS] = {0};
    int n = 0, ir, rank;
    TRY(data_in(c, 0, &x));
    TRY(pad_amounts(c, x, pads, &n));
    rank = n / 2;
    int all_zero = 1;
    for (int j = 0; j < n; j++)
        all_zero &= pads[j] == 0;
    if (all_zero)
        return remove_node(c, x, "all pads are zero");
    attr_string(c, "mode", mode, sizeof mode);
    if (mode[0] && strcmp(mode, "constant"))
        return unsup(c, "Pad mode '%s' (only constant zero padding is supported)", mode);
    if (fill && fill->name && fill->name[0] && (!fill->c || (fill->c->n > 0 && cv_get(fill->c, 0) != 0)))
        return unsup(c, "Pad with a non-zero value");
    if (rank != 4 || pads[0] || pads[1] || pads[4] || pads[5])
        return unsup(c, "Pad of axes other than H and W of an [N, C, H, W] input");
    for (int j = 0; j < n; j++)
        if (pads[j] < 0 || pads[j] > INT_MAX / 4)
            return unsup(c, "negative padding (cropping)");
    nc_node t;
    memset(&t, 0, sizeof t);
    t.kernel[0] = t.kernel[1] = t.stride[0] = t.stride[1] = t.dilation[0] = t.dilation[1] = 1;
    t.pad[0] = (int)pads[2], t.pad[1] = (int)pads[3], t.pad[2] = (int)pads[6], t.pad[3] = (int)pads[7];
    t.count_include_pad = 1;
    int64_t dims[3];
    TRY(window_shape(c, x, x->dims[0], &t, dims));
    TRY(emit(c, NC_NODE_AVGPOOL, 1, &x, 3, dims, &ir));
    copy_window(ir_node(c->imp, ir), &t);
    return NC_OK;
}

/* ==== dispatch ============================================================== */

typedef struct op_def {
    const char *name;
    nc_status (*data)(nctx *);  /* when an input is computed at run time */
    nc_status (*konst)(nctx *); /* when every input is a constant          */
} op_def;

static const op_def OPS[] = {
    {"Conv", op_conv, NULL},
    {"Gemm", op_gemm, NULL},
    {"MatMul", op_matmul, NULL},
    {"Relu", op_relu, c_unary},
    {"Clip", op_clip, NULL},
    {"MaxPool", op_pool, NULL},
    {"AveragePool", op_pool, NULL},
    {"GlobalAveragePool", op_global_avgpool, NULL},
    {"ReduceMean", op_reduce_mean, NULL},
    {"BatchNormalization", op_batchnorm, NULL},
    {"Flatten", op_flatten, c_flatten},
    {"Reshape", op_reshape, c_reshape},
    {"Squeeze", op_squeeze, c_squeeze},
    {"Unsqueeze", op_squeeze, c_squeeze},
    {"Add", op_add, c_binary},
    {"Sub", op_sub, c_binary},
    {"Mul", op_mul, c_binary},
    {"Div", op_div, c_binary},
    {"Pow", NULL, c_binary},
    {"Concat", op_concat, c_concat},
    {"Dropout", op_dropout, c_unary},
    {"Identity", op_identity, c_unary},
    {"Pad", op_pad, NULL},
    {"Cast", op_cast, c_cast},
    {"Softmax", op_softmax, NULL},
    {"LogSoftmax", op_softmax, NULL},
    {"Constant", NULL, c_constant},
    {"Shape", op_shape, op_shape},
    {"Gather", NULL, c_gather},
    {"Slice", NULL, c_slice},
    {"Transpose", NULL, c_transpose},
    {"ConstantOfShape", NULL, c_constant_of_shape},
    {"Range", NULL, c_range},
    {"Neg", NULL, c_unary},
    {"Sqrt", NULL, c_unary},
    {"Reciprocal", NULL, c_unary},
    {"Floor", NULL, c_unary},
    {"Ceil", NULL, c_unary},
    {"Abs", NULL, c_unary},
};

static const op_def *find_op(const char *name)
{
    for (size_t k = 0; k < sizeof OPS / sizeof OPS[0]; k++)
        if (!strcmp(OPS[k].name, name))
            return &OPS[k];
    return NULL;
}

/* Why an op the importer does not know cannot be converted, and what to do. */
static const char *unknown_op_reason(const char *op)
{
    static const char *activations[] = {"Sigmoid", "Tanh", "Gelu", "Elu", "Selu", "LeakyRelu", "PRelu",
                                        "Softplus", "Softsign", "Mish", "HardSigmoid", "HardSwish", "Celu",
                                        "ThresholdedRelu", "Exp", "Log"};
    for (size_t k = 0; k < sizeof activations / sizeof activations[0]; k++)
        if (!strcmp(op, activations[k]))
            return "this activation has no integrate-and-fire equivalent; replace it with ReLU (or a clamp) "
                   "and fine-tune";
    if (!strcmp(op, "LSTM") || !strcmp(op, "GRU") || !strcmp(op, "RNN"))
        return "recurrent layers are not supported";
    if (!strncmp(op, "Quantize", 8) || !strncmp(op, "Dequantize", 10) || strstr(op, "Integer"))
        return "quantized ops are not supported; export the float model";
    return "this op has no spiking equivalent in the importer";
}

/* Node c cannot be converted: report it and let its outputs stand in for its
 * first data input, so that the nodes after it can still be checked. */
static nc_status mark_unsupported(nctx *c, const char *why, int unchecked)
{
    importer *imp = c->imp;
    const value *src = NULL;
    for (size_t i = 0; i < c->p->n_input && !src; i++) {
        value *v = in_value(c, i);
        src = v && !v->c ? v : NULL;
    }
    for (size_t i = 0; i < c->p->n_output; i++) {
        value *o = out_value(c, i);
        if (!o)
            continue;
        cv_free(o->c);
        o->c = NULL;
        o->tainted = 1;
        o->ir = src ? src->ir : -1;
        if (c->guess_ndim >= 0)
            set_dims(&o->ndim, o->dims, c->guess_ndim, c->guess);
        else
            set_dims(&o->ndim, o->dims, src ? src->ndim : 0, src ? src->dims : NULL);
    }
    imp->unchecked[c->index] = unchecked;
    imp->n_unsupported += !unchecked;
    return report(c, NC_SUPPORT_UNSUPPORTED, "", why);
}

static int inputs_tainted(nctx *c)
{
    for (size_t i = 0; i < c->p->n_input; i++) {
        value *v = in_value(c, i);
        if (v && v->tainted)
            return 1;
    }
    return 0;
}

static int inputs_constant(nctx *c)
{
    for (size_t i = 0; i < c->p->n_input; i++) {
        value *v = in_value(c, i);
        if (v && !v->c)
            return 0;
    }
    return 1;
}

static nc_status run_op(nctx *c, const op_def *d)
{
    if (!d)
        return unsup(c, "%s", unknown_op_reason(c->op));
    if (inputs_constant(c) && d->konst) {
        TRY(d->konst(c));
        if (c->imp->handled[c->index])
            return NC_OK;
        return report(c, NC_SUPPORT_FOLDED, "", "constant: evaluated at import");
    }
    if (d->data)
        return d->data(c);
    if (!strcmp(c->op, "Floor"))
        return unsup(c, "Floor outside the QCFS chain Div(λ)→Clip(0,1)→Mul(L)→Add(0.5)→Floor→Div(L)→Mul(λ)");
    return unsup(c, "%s of a value computed at run time (only constant %s subgraphs are folded at import)",
                 c->op, c->op);
}

static nc_status convert_node(importer *imp, int k)
{
    nctx c;
    if (imp->handled[k])
        return NC_OK;
    nctx_init(&c, imp, k);
    if (!imp->live[k])
        return report(&c, NC_SUPPORT_REMOVED, "", "its result is never used");
    int tainted = inputs_tainted(&c);
    const char *domain = S(c.p->domain);
    nc_status st;
    if (domain[0] && strcmp(domain, "ai.onnx"))
        st = unsup(&c, "op from domain '%s' (a custom op or an exporter's local function; export with the "
                       "standard ONNX ops)", domain);
    else
        st = run_op(&c, find_op(c.op));
    if (st == NC_ERR_UNSUPPORTED) {
        const char *why = c.why[0] ? c.why : imp->err->message;
        return mark_unsupported(&c, why, 0);
    }
    if (st != NC_OK && tainted) { /* a guessed shape downstream of an unsupported node */
        return mark_unsupported(&c, "not checked: an input comes from an unsupported node", 1);
    }
    TRY(st);
    for (size_t i = 0; tainted && i < c.p->n_output; i++)
        if (out_value(&c, i))
            out_value(&c, i)->tainted = 1;
    return NC_OK;
}

/* ==== the graph ============================================================ */

static nc_status load_initializers(importer *imp)
{
    for (size_t k = 0; k < imp->graph->n_initializer; k++) {
        const Onnx__TensorProto *t = imp->graph->initializer[k];
        value *v;
        char what[NC_NAME_MAX + 32];
        TRY(get_value(imp, S(t->name), &v));
        if (v->defined)
            return ifail(imp, NC_ERR_FORMAT, "initializer '%s' appears twice", v->name);
        snprintf(what, sizeof what, "initializer '%s'", v->name);
        TRY(tensor_to_cval(&imp->L, t, what, &v->c));
        v->defined = 1;
    }
    return NC_OK;
}

static const Onnx__TypeProto__Tensor *tensor_type(const Onnx__ValueInfoProto *vi)
{
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return NULL;
    return vi->type->tensor_type;
}

/* Declared dims of a graph input; -1 for symbolic ones.  Rank -1 = unknown. */
static int declared_dims(const Onnx__ValueInfoProto *vi, int64_t *dims, int max)
{
    const Onnx__TypeProto__Tensor *tt = tensor_type(vi);
    if (!tt || !tt->shape || (int)tt->shape->n_dim > max)
        return tt && tt->shape ? (int)tt->shape->n_dim : -1;
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        int known = dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dims[d] = known ? dim->dim_value : -1;
    }
    return (int)tt->shape->n_dim;
}

static const nc_onnx_binding *find_binding(const importer *imp, const char *name)
{
    const nc_onnx_options *o = imp->opts;
    for (int k = 0; o && k < o->n_bindings; k++)
        if (o->bindings[k].name && !strcmp(o->bindings[k].name, name))
            return &o->bindings[k];
    return NULL;
}

/* A graph input bound by the caller becomes a constant of its declared type. */
static nc_status bind_input(importer *imp, value *v, const Onnx__ValueInfoProto *vi, const nc_tensor *t)
{
    int64_t dims[CV_MAX_DIMS];
    char a[96], b[96], what[NC_NAME_MAX + 32];
    if (!t)
        return ifail(imp, NC_ERR_ARGUMENT, "binding '%s' has no tensor", v->name);
    int rank = declared_dims(vi, dims, CV_MAX_DIMS);
    int fits = rank < 0 || rank == t->ndim;
    for (int d = 0; fits && rank > 0 && d < rank; d++)
        fits = dims[d] < 0 || dims[d] == t->shape[d];
    if (!fits)
        return ifail(imp, NC_ERR_SHAPE, "binding '%s' has shape %s, but the graph input is declared as %s",
                     v->name, dims_str(t->ndim, t->shape, a, 96), dims_str(rank, dims, b, 96));
    const Onnx__TypeProto__Tensor *tt = tensor_type(vi);
    int is_int = tt && tt->has_elem_type && !dtype_is_float(tt->elem_type);
    snprintf(what, sizeof what, "binding '%s'", v->name);
    TRY(cv_new(&imp->L, is_int, t->ndim, t->shape, what, &v->c));
    for (int64_t k = 0; k < v->c->n; k++)
        cv_set(v->c, k, t->data[k]);
    v->defined = 1;
    return NC_OK;
}

/* The one data input: an INPUT node with the declared shape minus the batch. */
static nc_status add_input_node(importer *imp, value *v, const Onnx__ValueInfoProto *vi)
{
    int64_t dims[NC_MAX_DIMS + 1];
    const Onnx__TypeProto__Tensor *tt = tensor_type(vi);
    if (!tt)
        return ifail(imp, NC_ERR_UNSUPPORTED, "input '%s' is not a tensor", v->name);
    int dt = tt->has_elem_type ? tt->elem_type : 0;
    if (!dtype_is_float(dt))
        return ifail(imp, NC_ERR_UNSUPPORTED, "input '%s' is %s; only float inputs are supported (%s input)",
                     v->name, dtype_name(dt), dtype_name(dt));
    int rank = declared_dims(vi, dims, NC_MAX_DIMS);
    if (rank < 0)
        return ifail(imp, NC_ERR_UNSUPPORTED, "input '%s' has no declared shape; export with a fixed input size",
                     v->name);
    if (rank < 2 || rank > NC_MAX_DIMS)
        return ifail(imp, NC_ERR_UNSUPPORTED,
                     "input '%s' has rank %d; a sample must have 1 to 4 dimensions after the batch axis (%s)",
                     v->name, rank, rank < 2 ? "each sample is a scalar" : "too many dimensions");
    for (int d = 1; d < rank; d++)
        if (dims[d] < 1)
            return ifail(imp, NC_ERR_UNSUPPORTED,
                         "input '%s' has a dynamic or empty dimension at axis %d; export with a fixed input size",
                         v->name, d);
    imp->batch = dims[0] >= 0 ? dims[0] : 1; /* a symbolic batch folds as 1 */
    v->elem_type = dt;
    v->defined = 1;
    int ir;
    TRY(add_ir(imp, NC_NODE_INPUT, v->name, 0, NULL, rank - 1, dims + 1, &ir));
    bind_value(imp, v, ir, rank - 1, dims + 1);
    return NC_OK;
}

static nc_status check_bindings(importer *imp)
{
    const nc_onnx_options *o = imp->opts;
    for (int k = 0; o && k < o->n_bindings; k++) {
        const char *name = o->bindings[k].name;
        int found = 0;
        for (size_t i = 0; name && i < imp->graph->n_input; i++)
            found |= !strcmp(S(imp->graph->input[i]->name), name);
        if (!found)
            return ifail(imp, NC_ERR_ARGUMENT, "binding '%s' does not name a graph input", S(name));
    }
    return NC_OK;
}

static nc_status setup_inputs(importer *imp)
{
    const Onnx__ValueInfoProto *data[2] = {NULL, NULL};
    char names[600] = "";
    int n_data = 0;
    TRY(check_bindings(imp));
    for (size_t i = 0; i < imp->graph->n_input; i++) {
        const Onnx__ValueInfoProto *vi = imp->graph->input[i];
        value *v;
        TRY(get_value(imp, S(vi->name), &v));
        if (v->defined && v->c && !find_binding(imp, v->name))
            continue; /* an initializer listed as an input (IR < 4) */
        const nc_onnx_binding *b = find_binding(imp, v->name);
        if (b) {
            cv_free(v->c);
            v->c = NULL;
            TRY(bind_input(imp, v, vi, b->value));
            continue;
        }
        if (n_data < 2)
            data[n_data] = vi;
        n_data++;
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s'%s'", used ? ", " : "", v->name);
    }
    if (n_data == 0)
        return ifail(imp, NC_ERR_FORMAT, "the graph has no data input");
    if (n_data > 1)
        return ifail(imp, NC_ERR_FORMAT,
                     "the graph has %d data inputs (%s); only one is supported: a weight listed as a graph input "
                     "needs an initializer (re-export with export_params=True) or a binding",
                     n_data, names);
    value *v;
    TRY(get_value(imp, S(data[0]->name), &v));
    return add_input_node(imp, v, data[0]);
}

/* Producers, consumers and graph outputs; dangling names are format errors. */
static nc_status link_values(importer *imp)
{
    for (int k = 0; k < imp->n_nodes; k++) {
        const Onnx__NodeProto *p = imp->graph->node[k];
        char name[NC_NAME_MAX];
        for (size_t i = 0; i < p->n_output; i++) {
            value *v;
            if (!p->output[i] || !p->output[i][0])
                continue;
            TRY(get_value(imp, p->output[i], &v));
            if (v->defined || v->producer >= 0)
                return ifail(imp, NC_ERR_FORMAT, "node '%s' (%s) writes '%s', which is already defined",
                             node_display_name(p, k, name, sizeof name), S(p->op_type), v->name);
            v->producer = k;
        }
    }
    for (int k = 0; k < imp->n_nodes; k++) {
        const Onnx__NodeProto *p = imp->graph->node[k];
        char name[NC_NAME_MAX];
        for (size_t i = 0; i < p->n_input; i++) {
            if (!p->input[i] || !p->input[i][0])
                continue;
            int vi = find_value(imp, p->input[i]);
            if (vi < 0 || (!imp->values[vi].defined && imp->values[vi].producer < 0))
                return ifail(imp, NC_ERR_FORMAT,
                             "node '%s' (%s, opset %d) reads '%s', which is neither an initializer, a graph input "
                             "nor a node output (a missing initializer?); re-export the model",
                             node_display_name(p, k, name, sizeof name), S(p->op_type), imp->opset, p->input[i]);
        }
    }
    for (size_t i = 0; i < imp->graph->n_output; i++) {
        int vi = find_value(imp, S(imp->graph->output[i]->name));
        if (vi < 0 || (!imp->values[vi].defined && imp->values[vi].producer < 0))
            return ifail(imp, NC_ERR_FORMAT, "graph output '%s' is not computed by any node",
                         S(imp->graph->output[i]->name));
        imp->values[vi].is_output = 1;
        imp->values[vi].n_consumers++;
    }
    return NC_OK;
}

/* Marks the nodes that graph outputs depend on (reverse topological order)
 * and counts consumers among them only, so that a dead branch neither blocks
 * folding nor fails the import. */
static void find_live(importer *imp)
{
    for (int i = imp->n_nodes - 1; i >= 0; i--) {
        int k = imp->order[i];
        const Onnx__NodeProto *p = imp->graph->node[k];
        for (size_t o = 0; o < p->n_output && !imp->live[k]; o++) {
            int vi = p->output[o] && p->output[o][0] ? find_value(imp, p->output[o]) : -1;
            imp->live[k] = vi >= 0 && imp->values[vi].n_consumers > 0;
        }
        for (size_t in = 0; imp->live[k] && in < p->n_input; in++) {
            int vi = p->input[in] && p->input[in][0] ? find_value(imp, p->input[in]) : -1;
            if (vi >= 0) {
                imp->values[vi].n_consumers++;
                imp->values[vi].consumer = k;
            }
        }
    }
}

/* The node that produces input i of p, or -1 (initializer, graph input). */
static int input_producer(const importer *imp, const Onnx__NodeProto *p, size_t i)
{
    int vi = p->input[i] && p->input[i][0] ? find_value(imp, p->input[i]) : -1;
    return vi >= 0 ? imp->values[vi].producer : -1;
}

/* Node → node edges as adjacency lists: the readers of node k are
 * edges[start[k] .. start[k+1]). */
static nc_status build_edges(importer *imp, int **start_out, int **edges_out)
{
    int n = imp->n_nodes;
    int *start = calloc((size_t)n + 2, sizeof *start), *fill = calloc((size_t)n + 1, sizeof *fill), *edges = NULL;
    if (start && fill) {
        for (int k = 0; k < n; k++)
            for (size_t i = 0; i < imp->graph->node[k]->n_input; i++) {
                int from = input_producer(imp, imp->graph->node[k], i);
                if (from >= 0)
                    start[from + 1]++;
            }
        for (int k = 0; k < n; k++)
            start[k + 1] += start[k];
        edges = malloc(((size_t)start[n] + 1) * sizeof *edges);
    }
    if (!start || !fill || !edges) {
        free(start), free(fill), free(edges);
        return oom(imp);
    }
    for (int k = 0; k < n; k++)
        for (size_t i = 0; i < imp->graph->node[k]->n_input; i++) {
            int from = input_producer(imp, imp->graph->node[k], i);
            if (from >= 0)
                edges[start[from] + fill[from]++] = k;
        }
    free(fill);
    *start_out = start;
    *edges_out = edges;
    return NC_OK;
}

/* Kahn's algorithm (ONNX files should be sorted already, but need not be);
 * a node left over lies on a cycle. */
static nc_status topo_sort(importer *imp)
{
    int n = imp->n_nodes, head = 0, tail = 0, *start = NULL, *edges = NULL;
    TRY(build_edges(imp, &start, &edges));
    int *indeg = calloc((size_t)n + 1, sizeof *indeg);
    if (!indeg) {
        free(start), free(edges);
        return oom(imp);
    }
    for (int e = 0; e < start[n]; e++)
        indeg[edges[e]]++;
    for (int k = 0; k < n; k++)
        if (!indeg[k])
            imp->order[tail++] = k;
    while (head < tail) {
        int k = imp->order[head++];
        for (int e = start[k]; e < start[k + 1]; e++)
            if (--indeg[edges[e]] == 0)
                imp->order[tail++] = edges[e];
    }
    nc_status st = NC_OK;
    if (tail < n) {
        int bad = 0;
        char name[NC_NAME_MAX];
        while (!indeg[bad])
            bad++;
        st = ifail(imp, NC_ERR_FORMAT, "the graph has a cycle through node '%s' (%s); ONNX graphs must be acyclic",
                   node_display_name(imp->graph->node[bad], bad, name, sizeof name),
                   S(imp->graph->node[bad]->op_type));
    }
    free(indeg), free(start), free(edges);
    return st;
}

static nc_status add_output_node(importer *imp)
{
    if (imp->graph->n_output != 1)
        return ifail(imp, NC_ERR_UNSUPPORTED, "the graph has %zu outputs; exactly one is supported",
                     imp->graph->n_output);
    value *v = &imp->values[find_value(imp, S(imp->graph->output[0]->name))];
    if (v->tainted)
        return NC_OK;
    if (v->c || v->ir < 0)
        return ifail(imp, NC_ERR_UNSUPPORTED, "graph output '%s' does not depend on the input", v->name);
    int ir;
    return add_ir(imp, NC_NODE_OUTPUT, v->name, 1, &v->ir, v->ndim, v->dims, &ir);
}

/* One message listing every unsupported node, with what to do. */
static nc_status unsupported_message(importer *imp)
{
    char list[NC_ERROR_MESSAGE_MAX];
    int with_reasons = 1, listed = 0, skipped = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        size_t used = 0;
        listed = skipped = 0;
        list[0] = 0;
        for (int k = 0; k < imp->n_nodes; k++) {
            int e = imp->entry[k];
            if (e < 0 || imp->report.entries[e].support != NC_SUPPORT_UNSUPPORTED || imp->unchecked[k])
                continue;
            const nc_report_entry *r = &imp->report.entries[e];
            char item[NC_NAME_MAX + 700];
            snprintf(item, sizeof item, "%s%s (%s, opset %d)%s%s", listed ? "; " : "", r->source_name, r->op_type,
                     r->opset, with_reasons ? ": " : "", with_reasons ? r->reason : "");
            if (used + strlen(item) + 40 >= sizeof list - 300) {
                skipped++;
                continue;
            }
            used += (size_t)snprintf(list + used, sizeof list - used, "%s", item);
            listed++;
        }
        if (!skipped)
            break;
        with_reasons = 0;
    }
    char more[48] = "";
    if (skipped)
        snprintf(more, sizeof more, " and %d more", skipped);
    return ifail(imp, NC_ERR_UNSUPPORTED,
                 "%d unsupported node%s: %s%s. Replace %s in the PyTorch model with supported layers "
                 "(see docs/ONNX.md) and export again; the conversion report lists every node",
                 imp->n_unsupported, imp->n_unsupported == 1 ? "" : "s", list, more,
                 imp->n_unsupported == 1 ? "it" : "them");
}

/* A node whose inputs are all constants already and whose op can be
 * evaluated at import. */
static int foldable_now(importer *imp, int k)
{
    nctx c;
    nctx_init(&c, imp, k);
    const op_def *d = find_op(c.op);
    const char *domain = S(c.p->domain);
    if (!imp->live[k] || !d || !d->konst || (domain[0] && strcmp(domain, "ai.onnx")))
        return 0;
    for (size_t i = 0; i < c.p->n_input; i++) {
        value *v = in_value(&c, i);
        if (v && !v->c)
            return 0;
    }
    return 1;
}

/* Puts the report in graph order (constants are folded first). */
static nc_status sort_report(importer *imp)
{
    nc_report_entry *sorted = malloc((size_t)(imp->report.count + 1) * sizeof *sorted);
    if (!sorted)
        return oom(imp);
    int n = 0;
    for (int k = 0; k < imp->n_nodes; k++) {
        if (imp->entry[k] >= 0) {
            sorted[n] = imp->report.entries[imp->entry[k]];
            imp->entry[k] = n++;
        }
    }
    free(imp->report.entries);
    imp->report.entries = sorted;
    imp->report.count = imp->report.capacity = n;
    return NC_OK;
}

static nc_status convert_graph(importer *imp)
{
    /* constants first, so that patterns (QCFS) see the folded values of
     * Constant nodes that the exporter placed after their consumer's head */
    for (int i = 0; i < imp->n_nodes; i++)
        if (foldable_now(imp, imp->order[i]))
            TRY(convert_node(imp, imp->order[i]));
    for (int i = 0; i < imp->n_nodes; i++)
        TRY(convert_node(imp, imp->order[i]));
    TRY(sort_report(imp));
    if (imp->n_unsupported)
        return unsupported_message(imp);
    TRY(add_output_node(imp));
    nc_status st = nc_net_infer_shapes(imp->net, imp->err);
    if (st != NC_OK)
        nc_error_prefix(imp->err, "%s", imp->L.path);
    return st;
}

/* ==== public API ============================================================ */

static void model_folder(const char *path, char *dir)
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", path);
    char *slash = strrchr(copy, '/');
    if (slash == copy)
        slash[1] = 0;
    else if (slash)
        *slash = 0;
    else
        snprintf(copy, sizeof copy, ".");
    if (!realpath(copy, dir))
        dir[0] = 0; /* external data will be refused with a message */
}

static nc_status parse_model(importer *imp)
{
    unsigned char *buf;
    size_t size;
    TRY(read_whole_file(&imp->L, &buf, &size));
    imp->model = onnx__model_proto__unpack(NULL, size, buf);
    free(buf);
    if (!imp->model || !imp->model->graph)
        return not_onnx(&imp->L);
    imp->graph = imp->model->graph;
    imp->opset = 1;
    for (size_t k = 0; k < imp->model->n_opset_import; k++) {
        const Onnx__OperatorSetIdProto *o = imp->model->opset_import[k];
        const char *d = S(o->domain);
        if ((!d[0] || !strcmp(d, "ai.onnx")) && o->has_version)
            imp->opset = o->version > INT_MAX ? INT_MAX : (int)o->version;
    }
    if (imp->graph->n_node > (size_t)INT_MAX / 4)
        return ifail(imp, NC_ERR_UNSUPPORTED, "the graph has too many nodes");
    imp->n_nodes = (int)imp->graph->n_node;
    size_t n = (size_t)imp->n_nodes + 1;
    imp->order = calloc(n, sizeof(int));
    imp->handled = calloc(n, sizeof(int));
    imp->entry = malloc(n * sizeof(int));
    imp->unchecked = calloc(n, sizeof(int));
    imp->live = calloc(n, sizeof(int));
    if (!imp->order || !imp->handled || !imp->entry || !imp->unchecked || !imp->live)
        return oom(imp);
    for (size_t k = 0; k < n; k++)
        imp->entry[k] = -1;
    for (int k = 0; k < imp->n_nodes; k++)
        if (!imp->graph->node[k])
            return not_onnx(&imp->L);
    return NC_OK;
}

static nc_status import_run(importer *imp)
{
    TRY(parse_model(imp));
    if (!(imp->net = nc_net_new()))
        return oom(imp);
    snprintf(imp->net->source_path, sizeof imp->net->source_path, "%s", imp->L.path);
    snprintf(imp->net->source_format, sizeof imp->net->source_format, "onnx");
    TRY(load_initializers(imp));
    TRY(setup_inputs(imp));
    TRY(link_values(imp));
    TRY(topo_sort(imp));
    find_live(imp);
    return convert_graph(imp);
}

static void importer_free(importer *imp)
{
    for (int v = 0; v < imp->n_values; v++)
        cv_free(imp->values[v].c);
    free(imp->values);
    free(imp->table);
    free(imp->order);
    free(imp->handled);
    free(imp->entry);
    free(imp->unchecked);
    free(imp->live);
    free(imp->refs);
    if (imp->model)
        onnx__model_proto__free_unpacked(imp->model, NULL);
}

static nc_status copy_report(const nc_report *src, nc_report *dst)
{
    memset(dst, 0, sizeof *dst);
    if (!src->count)
        return NC_OK;
    dst->entries = malloc((size_t)src->count * sizeof *dst->entries);
    if (!dst->entries)
        return NC_ERR_MEMORY;
    memcpy(dst->entries, src->entries, (size_t)src->count * sizeof *dst->entries);
    dst->count = dst->capacity = src->count;
    return NC_OK;
}

nc_status nc_onnx_load_with_report(const char *path, const nc_onnx_options *opts, nc_net **out,
                                   nc_report *report_out, nc_error *err)
{
    if (report_out)
        memset(report_out, 0, sizeof *report_out);
    if (!out || !path)
        return nc_fail(err, NC_ERR_ARGUMENT, "nc_onnx_load: path and out must not be NULL");
    *out = NULL;
    nc_error local = {0};
    importer imp = {0};
    imp.err = &local;
    imp.opts = opts;
    imp.L.path = path;
    imp.L.err = &local;
    imp.L.limit = opts && opts->memory_budget ? opts->memory_budget : nc_memory_budget();
    model_folder(path, imp.L.dir);
    nc_status st = import_run(&imp);
    if (st == NC_OK && report_out && copy_report(&imp.report, report_out) != NC_OK)
        st = oom(&imp);
    if (st == NC_OK) {
        imp.net->report = imp.report;
        *out = imp.net;
    } else {
        if (report_out)
            *report_out = imp.report;
        else
            nc_report_clear(&imp.report);
        nc_net_free(imp.net);
        nc_fail(err, st, "%s", local.message);
    }
    importer_free(&imp);
    return st;
}

nc_status nc_onnx_load(const char *path, const nc_onnx_options *opts, nc_net **out, nc_error *err)
{
    return nc_onnx_load_with_report(path, opts, out, NULL, err);
}
