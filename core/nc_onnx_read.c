/* nc_onnx_read.c — ONNX import, reading: the model file, TensorProto
 * decoding (every element type, raw or typed fields), external data files
 * (only inside the model's folder, sizes checked against the file) and the
 * constant values (`cval`) they become, all charged to the memory budget. */
#include "nc_onnx_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ==== messages and the memory budget ==================================== */

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

void onnx_cv_free(cval *c)
{
    if (!c)
        return;
    free(c->f);
    free(c->i);
    free(c);
}

nc_status onnx_cv_new(loader *L, int is_int, int ndim, const int64_t *dims, const char *what, cval **out)
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

double onnx_cv_get(const cval *c, int64_t k) { return c->is_int ? (double)c->i[k] : (double)c->f[k]; }

/* Integer read of any constant; floats are truncated, saturating. */
int64_t onnx_cv_geti(const cval *c, int64_t k)
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

void onnx_cv_set(cval *c, int64_t k, double v)
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

nc_status onnx_cv_copy(loader *L, const cval *src, const char *what, cval **out)
{
    TRY(onnx_cv_new(L, src->is_int, src->ndim, src->dims, what, out));
    if (src->is_int)
        memcpy((*out)->i, src->i, (size_t)src->n * sizeof(int64_t));
    else
        memcpy((*out)->f, src->f, (size_t)src->n * sizeof(float));
    return NC_OK;
}

const char *onnx_dims_str(int ndim, const int64_t *dims, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "", (long long)dims[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

/* ==== TensorProto decoding ================================================ */

const char *onnx_dtype_name(int dt)
{
    static const char *names[] = {"undefined", "float32", "uint8", "int8", "uint16", "int16", "int32",
                                  "int64", "string", "bool", "float16", "float64", "uint32", "uint64",
                                  "complex64", "complex128", "bfloat16"};
    return dt >= 0 && dt < (int)(sizeof names / sizeof names[0]) ? names[dt] : "an unknown type";
}

/* Bytes per element in raw_data, 0 for types this importer cannot read. */
size_t onnx_dtype_size(int dt)
{
    switch (dt) {
    case DT_UINT8: case DT_INT8: case DT_BOOL: return 1;
    case DT_UINT16: case DT_INT16: case DT_FLOAT16: case DT_BFLOAT16: return 2;
    case DT_FLOAT: case DT_INT32: case DT_UINT32: return 4;
    case DT_INT64: case DT_DOUBLE: case DT_UINT64: return 8;
    default: return 0;
    }
}

int onnx_dtype_is_float(int dt)
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
    memcpy(&u, p, onnx_dtype_size(dt));
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
    size_t size = onnx_dtype_size(dt);
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
nc_status onnx_tensor_to_cval(loader *L, const Onnx__TensorProto *t, const char *what, cval **out)
{
    int dt = t->data_type;
    size_t esize = onnx_dtype_size(dt);
    *out = NULL;
    if (!esize)
        return lfail(L, NC_ERR_UNSUPPORTED, "%s has type %s, which cannot be imported", what, onnx_dtype_name(dt));
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
    if (nc_mul_size(n, onnx_dtype_is_float(dt) ? sizeof(float) : sizeof(int64_t), &value_bytes) != 0)
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
    nc_status st = onnx_cv_new(L, !onnx_dtype_is_float(dt), (int)t->n_dims, t->dims, what, &c);
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

nc_tensor *onnx_cv_to_tensor(const cval *c, int ndim, const int64_t *dims)
{
    nc_tensor *t = nc_tensor_new(ndim, dims);
    if (t)
        for (int64_t k = 0; k < c->n; k++)
            t->data[k] = (float)onnx_cv_get(c, k);
    return t;
}

/* ==== reading files ======================================================= */

nc_status onnx_read_whole_file(loader *L, unsigned char **out, size_t *size)
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

nc_status onnx_not_onnx(loader *L)
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
    TRY(onnx_read_whole_file(&L, &buf, &size));
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
        st = onnx_tensor_to_cval(&L, t, "the tensor", &c);
    if (st == NC_OK && !(*out = onnx_cv_to_tensor(c, c->ndim, c->dims)))
        st = lfail(&L, NC_ERR_MEMORY, "out of memory for the tensor");
    onnx_cv_free(c);
    onnx__tensor_proto__free_unpacked(t, NULL);
    return st;
}
