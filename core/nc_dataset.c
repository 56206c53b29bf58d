/* nc_dataset.c — IDX, NumPy .npy and HDF5 datasets, and their preprocessing.
 *
 * Every loader first learns the declared shape, checks it against what the
 * file really holds, and only then allocates; sizes go through the overflow-
 * checked helpers of nc_status.h.  Loaders fill a nc_dataset with the raw
 * values (as float) and say whether they were uint8; finish_dataset() then
 * applies the preprocessing and checks the labels, the same way for every
 * format.  Nothing here prints. */
#include "nc_dataset.h"
#include "nc_dataset_stream.h"

#include <hdf5.h>

#include "nc_file.h"
#include "nc_h5util.h"
#include <zlib.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LABEL 1000                            /* labels must lie in [0, MAX_LABEL) */
#define NPY_MAX_HEADER (1 << 20)                  /* a real header is ~128 bytes */
#define IO_CHUNK (256 * 1024)
#define MISSING_HINT "install Debian's dataset-fashion-mnist or pass --data PATH"

/* ------------------------------------------------------------ helpers -- */

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static nc_status missing(nc_error *err, const char *path)
{
    return nc_fail(err, NC_ERR_IO, "%s: no such file or folder; " MISSING_HINT, path);
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* .npy data is little-endian; swap in place on a big-endian host. */
static void le_to_host(void *data, size_t count, size_t itemsize)
{
    if (host_is_little_endian() || itemsize == 1)
        return;
    uint8_t *p = data;
    for (size_t i = 0; i < count; i++, p += itemsize)
        for (size_t a = 0, b = itemsize - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* Bytes of count × per_item floats, refusing overflow and absurd sizes. */
static nc_status float_bytes(int64_t count, int64_t per_item, const char *path, size_t *out,
                             nc_error *err)
{
    size_t n;
    if (count < 0 || per_item < 0 || nc_mul_size((size_t)count, (size_t)per_item, &n) ||
        nc_mul_size(n, sizeof(float), out))
        return nc_fail(err, NC_ERR_FORMAT, "%s: declared size overflows", path);
    if (*out > nc_memory_budget())
        return nc_fail(err, NC_ERR_MEMORY, "%s: %lld samples would need %zu bytes, more than the memory budget "
                       "(%zu bytes); use --limit, or raise NC_MEMORY_BUDGET", path, (long long)count, *out,
                       nc_memory_budget());
    return NC_OK;
}

static nc_status alloc_dataset(nc_dataset *ds, int64_t count, int C, int H, int W, nc_error *err)
{
    size_t bytes;
    nc_status st = float_bytes(count, (int64_t)C * H * W, ds->path, &bytes, err);
    if (st)
        return st;
    ds->count = count;
    ds->channels = C;
    ds->height = H;
    ds->width = W;
    ds->images = malloc(bytes ? bytes : 1);
    ds->labels = malloc(count > 0 ? (size_t)count * sizeof(int32_t) : 1);
    if (!ds->images || !ds->labels)
        return nc_fail(err, NC_ERR_MEMORY, "%s: out of memory for %lld samples", ds->path, (long long)count);
    return NC_OK;
}

static int64_t apply_limit(int64_t count, int64_t limit)
{
    return limit > 0 && limit < count ? limit : count;
}

/* ------------------------------------------------------ preprocessing -- */

static nc_status check_values(const char *what, int n, const float *v, int C, int positive, nc_error *err)
{
    if (n != 0 && n != 1 && n != C)
        return nc_fail(err, NC_ERR_ARGUMENT, "%d %s values for %d channel%s; give 1 or %d", n, what, C,
                       C == 1 ? "" : "s", C);
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i]) || (positive && v[i] <= 0))
            return nc_fail(err, NC_ERR_ARGUMENT, "%s value %g is not %s", what, (double)v[i],
                           positive ? "a positive number" : "finite");
    return NC_OK;
}

static float channel_value(int n, const float *v, int c, float fallback)
{
    return n == 0 ? fallback : v[n == 1 ? 0 : c];
}

/* x = (raw · scale − mean[c]) / std[c], in place. */
static nc_status apply_preprocess(nc_dataset *ds, const nc_preprocess *pp, int raw_u8, nc_error *err)
{
    static const nc_preprocess none = {0};
    if (!pp)
        pp = &none;
    int C = ds->channels;
    nc_status st = check_values("mean", pp->n_mean, pp->mean, C, 0, err);
    if (!st)
        st = check_values("std", pp->n_std, pp->std, C, 1, err);
    if (st)
        return st;
    if (!isfinite(pp->scale) || pp->scale < 0)
        return nc_fail(err, NC_ERR_ARGUMENT, "scale %g is not a non-negative number", (double)pp->scale);
    float scale = pp->scale != 0 ? pp->scale : raw_u8 ? 1.0f / 255.0f : 1.0f;
    size_t plane = (size_t)ds->height * ds->width;
    for (int64_t i = 0; i < ds->count; i++)
        for (int c = 0; c < C; c++) {
            float mean = channel_value(pp->n_mean, pp->mean, c, 0.0f);
            float sd = channel_value(pp->n_std, pp->std, c, 1.0f);
            float *x = ds->images + ((size_t)i * C + c) * plane;
            for (size_t k = 0; k < plane; k++)
                x[k] = (x[k] * scale - mean) / sd;
        }
    return NC_OK;
}

/* Labels arrive as doubles from every format: integral and in [0, 1000). */
static nc_status set_labels(nc_dataset *ds, const double *values, const char *path, nc_error *err)
{
    int max = -1;
    for (int64_t i = 0; i < ds->count; i++) {
        double v = values[i];
        if (!(v >= 0 && v < MAX_LABEL) || v != floor(v))
            return nc_fail(err, NC_ERR_FORMAT, "%s: label %lld is %g; labels must be whole numbers in [0, %d)",
                           path, (long long)i, v, MAX_LABEL);
        ds->labels[i] = (int32_t)v;
        if (ds->labels[i] > max)
            max = ds->labels[i];
    }
    ds->num_classes = max + 1;
    return NC_OK;
}

static nc_status check_counts(const char *images, int64_t n_images, const char *labels, int64_t n_labels,
                              nc_error *err)
{
    if (n_images == n_labels)
        return NC_OK;
    return nc_fail(err, NC_ERR_FORMAT, "%s holds %lld images but %s holds %lld labels; they must match",
                   images, (long long)n_images, labels, (long long)n_labels);
}

/* ---------------------------------------------------------------- IDX -- */

/* An IDX file open for reading through zlib (which reads plain files too). */
typedef struct idx_file {
    gzFile gz;
    const char *path;
    int ndim;
    int64_t dims[4];
    size_t header;  /* bytes before the data */
    size_t payload; /* declared data bytes = product of dims */
} idx_file;

static void idx_close(idx_file *f)
{
    if (f->gz)
        gzclose(f->gz);
    f->gz = NULL;
}

/* zlib's message, without the "path: " that gzerror puts in front. */
static const char *zlib_reason(gzFile gz, const char *path, int *zerr)
{
    const char *msg = gzerror(gz, zerr);
    size_t n = strlen(path);
    if (strncmp(msg, path, n) == 0 && msg[n] == ':')
        msg += n + (msg[n + 1] == ' ' ? 2 : 1);
    return msg;
}

/* Reads exactly `size` bytes or fails naming the cause (truncation, zlib error). */
static nc_status gz_read_exact(gzFile gz, const char *path, void *buf, size_t size, nc_error *err)
{
    uint8_t *p = buf;
    while (size > 0) {
        unsigned ask = size > IO_CHUNK ? IO_CHUNK : (unsigned)size;
        int got = gzread(gz, p, ask);
        if (got <= 0) {
            int zerr = Z_OK;
            const char *msg = zlib_reason(gz, path, &zerr);
            if (zerr != Z_OK && zerr != Z_STREAM_END)
                return nc_fail(err, NC_ERR_FORMAT, "%s: truncated or corrupt gzip data (zlib: %s)", path, msg);
            return nc_fail(err, NC_ERR_FORMAT, "%s: file ends early", path);
        }
        p += got;
        size -= (size_t)got;
    }
    return NC_OK;
}

/* Counts the data bytes from the current position to the end of the stream
 * (stopping once past `max`: a gzip bomb is not inflated to the end), so a
 * lying header is caught before anything big is allocated. */
static nc_status gz_count_rest(gzFile gz, const char *path, size_t max, size_t *out, nc_error *err)
{
    uint8_t *scratch = malloc(IO_CHUNK);
    if (!scratch)
        return nc_fail(err, NC_ERR_MEMORY, "%s: out of memory", path);
    size_t total = 0;
    int got;
    while (total <= max && (got = gzread(gz, scratch, IO_CHUNK)) > 0)
        total += (size_t)got;
    if (total > max) {
        free(scratch);
        *out = total;
        return NC_OK;
    }
    free(scratch);
    int zerr = Z_OK;
    const char *msg = zlib_reason(gz, path, &zerr);
    if (got < 0 || (zerr != Z_OK && zerr != Z_STREAM_END))
        return nc_fail(err, NC_ERR_FORMAT, "%s: truncated or corrupt gzip data (zlib: %s)", path, msg);
    *out = total;
    return NC_OK;
}

static nc_status idx_parse_header(idx_file *f, int want_ndim, nc_error *err)
{
    uint8_t magic[4], raw[16];
    nc_status st = gz_read_exact(f->gz, f->path, magic, 4, err);
    if (st)
        return nc_fail(err, NC_ERR_FORMAT, "%s: too short for an IDX file", f->path);
    if (magic[0] || magic[1] || magic[3] != want_ndim)
        return nc_fail(err, NC_ERR_FORMAT, "%s: not an IDX file of %d dimensions (magic %02x %02x %02x %02x)",
                       f->path, want_ndim, magic[0], magic[1], magic[2], magic[3]);
    if (magic[2] != 0x08)
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: IDX element type 0x%02x is not supported; only unsigned "
                       "bytes (0x08)", f->path, magic[2]);
    if ((st = gz_read_exact(f->gz, f->path, raw, 4 * (size_t)want_ndim, err)))
        return st;
    f->ndim = want_ndim;
    f->header = 4 + 4 * (size_t)want_ndim;
    f->payload = 1;
    for (int i = 0; i < want_ndim; i++) {
        const uint8_t *b = raw + 4 * i;
        f->dims[i] = (int64_t)b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3];
        if ((f->dims[i] == 0 && i > 0) || nc_mul_size(f->payload, (size_t)f->dims[i], &f->payload))
            return nc_fail(err, NC_ERR_FORMAT, "%s: bad dimension %lld in the IDX header", f->path,
                           (long long)f->dims[i]);
    }
    return NC_OK;
}

/* Opens an IDX file, checks magic and dims, and checks that the data really
 * holds the declared count; leaves the stream positioned at the data. */
static nc_status idx_open(idx_file *f, const char *path, int want_ndim, nc_error *err)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    if (!is_file(path))
        return missing(err, path);
    f->gz = gzopen(path, "rb");
    if (!f->gz)
        return nc_fail(err, NC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t real = 0, bytes;
    nc_status st = idx_parse_header(f, want_ndim, err);
    if (!st) /* the floats the declared data becomes, against the budget */
        st = float_bytes((int64_t)(f->payload > (size_t)INT64_MAX ? INT64_MAX : f->payload), 1, path, &bytes, err);
    if (!st)
        st = gz_count_rest(f->gz, path, f->payload, &real, err);
    if (st)
        return st;
    if (real != f->payload) {
        size_t per = f->dims[0] ? f->payload / (size_t)f->dims[0] : 0;
        if (real > f->payload)
            return nc_fail(err, NC_ERR_FORMAT, "%s: header declares %lld items (%zu bytes) but the file holds more "
                           "data; the file is corrupt or the header wrong", path, (long long)f->dims[0], f->payload);
        return nc_fail(err, NC_ERR_FORMAT, "%s: header declares %lld items (%zu bytes) but the file holds "
                       "%zu bytes (%zu items); the file is truncated or corrupt", path,
                       (long long)f->dims[0], f->payload, real, per ? real / per : 0);
    }
    if (gzrewind(f->gz) != 0 || gzseek(f->gz, (z_off_t)f->header, SEEK_SET) < 0)
        return nc_fail(err, NC_ERR_IO, "%s: cannot seek back to the data", path);
    return NC_OK;
}

static nc_status idx_read_images(idx_file *f, nc_dataset *ds, nc_error *err)
{
    size_t n = (size_t)ds->count * ds->height * ds->width;
    uint8_t *raw = malloc(n ? n : 1);
    if (!raw)
        return nc_fail(err, NC_ERR_MEMORY, "%s: out of memory", f->path);
    nc_status st = gz_read_exact(f->gz, f->path, raw, n, err);
    for (size_t i = 0; !st && i < n; i++)
        ds->images[i] = raw[i];
    free(raw);
    return st;
}

static nc_status idx_read_labels(idx_file *f, nc_dataset *ds, nc_error *err)
{
    size_t n = (size_t)ds->count;
    uint8_t *raw = malloc(n ? n : 1);
    double *values = malloc((n ? n : 1) * sizeof *values);
    nc_status st = raw && values ? gz_read_exact(f->gz, f->path, raw, n, err)
                                 : nc_fail(err, NC_ERR_MEMORY, "%s: out of memory", f->path);
    for (size_t i = 0; !st && i < n; i++)
        values[i] = raw[i];
    if (!st)
        st = set_labels(ds, values, f->path, err);
    free(raw);
    free(values);
    return st;
}

static nc_status load_idx(nc_dataset *ds, const char *images, const char *labels, int64_t limit, nc_error *err)
{
    idx_file fx, fy;
    nc_status st = idx_open(&fx, images, 3, err);
    if (!st)
        st = idx_open(&fy, labels, 1, err);
    else
        memset(&fy, 0, sizeof fy);
    if (!st)
        st = check_counts(images, fx.dims[0], labels, fy.dims[0], err);
    if (!st && (fx.dims[1] > INT32_MAX || fx.dims[2] > INT32_MAX))
        st = nc_fail(err, NC_ERR_FORMAT, "%s: image size out of range", images);
    if (!st)
        st = alloc_dataset(ds, apply_limit(fx.dims[0], limit), 1, (int)fx.dims[1], (int)fx.dims[2], err);
    if (!st)
        st = idx_read_images(&fx, ds, err);
    if (!st)
        st = idx_read_labels(&fy, ds, err);
    idx_close(&fx);
    idx_close(&fy);
    snprintf(ds->format, sizeof ds->format, "idx");
    return st;
}

/* Finds "<dir>/<name>" or "<dir>/<name>.gz"; 0 when neither exists. */
static int find_plain_or_gz(char *out, size_t size, const char *dir, const char *name)
{
    snprintf(out, size, "%s/%s.gz", dir, name);
    if (is_file(out))
        return 1;
    snprintf(out, size, "%s/%s", dir, name);
    return is_file(out);
}

static nc_status load_idx_folder(nc_dataset *ds, const char *dir, nc_split split, int64_t limit, nc_error *err)
{
    const char *prefix = split == NC_SPLIT_TRAIN ? "train" : "t10k";
    char name[64], images[1200], labels[1200];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
    if (!find_plain_or_gz(images, sizeof images, dir, name))
        return nc_fail(err, NC_ERR_IO, "%s/%s[.gz]: no such file or folder; " MISSING_HINT, dir, name);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
    if (!find_plain_or_gz(labels, sizeof labels, dir, name))
        return nc_fail(err, NC_ERR_IO, "%s/%s[.gz]: no such file or folder; the labels belong next to the "
                       "images", dir, name);
    snprintf(ds->path, sizeof ds->path, "%s", images);
    return load_idx(ds, images, labels, limit, err);
}

/* Labels of an IDX images file: "images-idx3" → "labels-idx1", with or without .gz. */
static nc_status load_idx_file(nc_dataset *ds, const char *images, int64_t limit, nc_error *err)
{
    const char *at = strstr(images, "images-idx3");
    if (!at)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: cannot find the labels of an IDX file whose name lacks "
                       "\"images-idx3\"", images);
    char labels[1200];
    snprintf(labels, sizeof labels, "%.*slabels-idx1%s", (int)(at - images), images, at + 11);
    if (!is_file(labels)) { /* the other compression of the same name */
        size_t n = strlen(labels);
        if (has_suffix(labels, ".gz"))
            labels[n - 3] = '\0';
        else if (n + 4 <= sizeof labels)
            memcpy(labels + n, ".gz", 4);
    }
    if (!is_file(labels)) {
        snprintf(labels, sizeof labels, "%.*slabels-idx1%s", (int)(at - images), images, at + 11);
        return nc_fail(err, NC_ERR_IO, "%s: no such file or folder; the labels belong next to %s", labels,
                       images);
    }
    return load_idx(ds, images, labels, limit, err);
}

/* ---------------------------------------------------------------- NPY -- */

typedef struct npy_header {
    char kind;         /* 'f', 'u' or 'i' */
    int itemsize;      /* 1, 4 or 8 */
    int ndim;
    int64_t shape[NC_MAX_DIMS];
    size_t data_offset;
    size_t numel;
} npy_header;

/* Finds the value after "'key':" in a .npy header dict. */
static const char *npy_value(const char *header, const char *key)
{
    char quoted[32];
    snprintf(quoted, sizeof quoted, "'%s'", key);
    const char *p = strstr(header, quoted);
    if (!p)
        return NULL;
    p += strlen(quoted);
    while (isspace((unsigned char)*p))
        p++;
    if (*p++ != ':')
        return NULL;
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

static nc_status npy_parse_descr(npy_header *h, const char *header, const char *path, nc_error *err)
{
    const char *v = npy_value(header, "descr");
    char descr[16] = "";
    if (!v || (*v != '\'' && *v != '"') || sscanf(v + 1, "%15[^'\"]", descr) != 1)
        return nc_fail(err, NC_ERR_FORMAT, "%s: .npy header has no 'descr'", path);
    static const struct { const char *name; char kind; int size; } types[] = {
        {"f4", 'f', 4}, {"f8", 'f', 8}, {"u1", 'u', 1}, {"i4", 'i', 4}, {"i8", 'i', 8},
    };
    int little = descr[0] == '<' || descr[0] == '|' || (descr[0] == '=' && host_is_little_endian());
    for (size_t i = 0; little && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(descr + 1, types[i].name) == 0) {
            h->kind = types[i].kind;
            h->itemsize = types[i].size;
            return NC_OK;
        }
    return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: .npy element type '%s' is not supported; use little-endian "
                   "float32, float64, uint8, int32 or int64 (x.astype('<f4'))", path, descr);
}

static nc_status npy_parse_shape(npy_header *h, const char *header, const char *path, nc_error *err)
{
    const char *p = npy_value(header, "shape");
    if (!p || *p++ != '(')
        return nc_fail(err, NC_ERR_FORMAT, "%s: .npy header has no 'shape'", path);
    h->ndim = 0;
    h->numel = 1;
    for (;;) {
        while (isspace((unsigned char)*p) || *p == ',')
            p++;
        if (*p == ')')
            return NC_OK;
        char *end;
        long long d = strtoll(p, &end, 10);
        if (end == p || d < 0)
            return nc_fail(err, NC_ERR_FORMAT, "%s: bad 'shape' in the .npy header", path);
        if (h->ndim == NC_MAX_DIMS)
            return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: arrays of more than %d dimensions are not supported",
                           path, NC_MAX_DIMS);
        if (nc_mul_size(h->numel, (size_t)d, &h->numel))
            return nc_fail(err, NC_ERR_FORMAT, "%s: .npy shape overflows", path);
        h->shape[h->ndim++] = d;
        p = end;
    }
}

static nc_status npy_parse_dict(npy_header *h, const char *header, const char *path, nc_error *err)
{
    nc_status st = npy_parse_descr(h, header, path, err);
    if (st)
        return st;
    const char *fortran = npy_value(header, "fortran_order");
    if (!fortran)
        return nc_fail(err, NC_ERR_FORMAT, "%s: .npy header has no 'fortran_order'", path);
    if (strncmp(fortran, "True", 4) == 0)
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: Fortran-order arrays are not supported; save a C-order "
                       "copy (np.ascontiguousarray)", path);
    return npy_parse_shape(h, header, path, err);
}

/* Reads the magic, version and header dict; checks the real data size. */
static nc_status npy_read_header(FILE *fp, const char *path, npy_header *h, nc_error *err)
{
    uint8_t pre[12];
    if (fread(pre, 1, 10, fp) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0)
        return nc_fail(err, NC_ERR_FORMAT, "%s: not a NumPy .npy file (bad magic)", path);
    int major = pre[6];
    size_t len, pre_len = 10;
    if (major == 1)
        len = pre[8] | (size_t)pre[9] << 8;
    else if (major == 2 || major == 3) {
        if (fread(pre + 10, 1, 2, fp) != 2)
            return nc_fail(err, NC_ERR_FORMAT, "%s: truncated .npy header", path);
        len = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
        pre_len = 12;
    } else
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: .npy format version %d is not supported", path, major);
    if (len > NPY_MAX_HEADER)
        return nc_fail(err, NC_ERR_FORMAT, "%s: .npy header of %zu bytes is implausible", path, len);
    char *header = malloc(len + 1);
    if (!header)
        return nc_fail(err, NC_ERR_MEMORY, "%s: out of memory", path);
    nc_status st = fread(header, 1, len, fp) == len ? NC_OK
                   : nc_fail(err, NC_ERR_FORMAT, "%s: truncated .npy header", path);
    header[len] = '\0';
    if (!st)
        st = npy_parse_dict(h, header, path, err);
    free(header);
    h->data_offset = pre_len + len;
    return st;
}

static nc_status npy_check_size(FILE *fp, const char *path, const npy_header *h, nc_error *err)
{
    struct stat st;
    size_t want;
    if (fstat(fileno(fp), &st) != 0)
        return nc_fail(err, NC_ERR_IO, "%s: %s", path, strerror(errno));
    if (nc_mul_size(h->numel, (size_t)h->itemsize, &want))
        return nc_fail(err, NC_ERR_FORMAT, "%s: .npy shape overflows", path);
    size_t real = (size_t)st.st_size > h->data_offset ? (size_t)st.st_size - h->data_offset : 0;
    if (real != want)
        return nc_fail(err, NC_ERR_FORMAT, "%s: header declares %zu elements (%zu bytes) but the file holds "
                       "%zu bytes of data; the file is truncated or corrupt", path, h->numel, want, real);
    return NC_OK;
}

static float npy_element(const uint8_t *p, const npy_header *h)
{
    switch (h->kind) {
    case 'u': return p[0];
    case 'f':
        if (h->itemsize == 4) { float v; memcpy(&v, p, 4); return v; }
        else { double v; memcpy(&v, p, 8); return (float)v; }
    default:
        if (h->itemsize == 4) { int32_t v; memcpy(&v, p, 4); return (float)v; }
        else { int64_t v; memcpy(&v, p, 8); return (float)v; }
    }
}

/* Reads n elements (from the current position) as float, in chunks. */
static nc_status npy_read_floats(FILE *fp, const char *path, const npy_header *h, size_t n, float *out,
                                 nc_error *err)
{
    uint8_t *buf = malloc(IO_CHUNK);
    if (!buf)
        return nc_fail(err, NC_ERR_MEMORY, "%s: out of memory", path);
    size_t per_chunk = IO_CHUNK / (size_t)h->itemsize;
    nc_status st = NC_OK;
    for (size_t done = 0; !st && done < n;) {
        size_t k = n - done < per_chunk ? n - done : per_chunk;
        if (fread(buf, (size_t)h->itemsize, k, fp) != k) {
            st = nc_fail(err, NC_ERR_IO, "%s: read failed: %s", path, ferror(fp) ? strerror(errno) : "end of file");
            break;
        }
        le_to_host(buf, k, (size_t)h->itemsize);
        for (size_t i = 0; i < k; i++)
            out[done + i] = npy_element(buf + i * (size_t)h->itemsize, h);
        done += k;
    }
    free(buf);
    return st;
}

/* Reads a .npy file as float32; `rows` > 0 keeps only the first rows of axis 0.
 * *raw_u8 tells whether the data was uint8, *declared the file's length of
 * axis 0 (both may be NULL). */
static nc_status npy_load(const char *path, int64_t rows, nc_tensor **out, int *raw_u8, int64_t *declared,
                          nc_error *err)
{
    *out = NULL;
    if (!is_file(path))
        return missing(err, path);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return nc_fail(err, NC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    npy_header h;
    nc_status st = npy_read_header(fp, path, &h, err);
    if (!st)
        st = npy_check_size(fp, path, &h, err);
    if (!st && declared)
        *declared = h.ndim > 0 ? h.shape[0] : 1;
    if (!st && rows > 0 && h.ndim > 0 && rows < h.shape[0]) {
        h.numel = h.numel / (size_t)h.shape[0] * (size_t)rows;
        h.shape[0] = rows;
    }
    size_t bytes;
    if (!st)
        st = float_bytes((int64_t)h.numel, 1, path, &bytes, err);
    nc_tensor *t = st ? NULL : nc_tensor_new(h.ndim, h.shape);
    if (!st && !t)
        st = nc_fail(err, NC_ERR_MEMORY, "%s: out of memory for %zu elements", path, h.numel);
    if (!st)
        st = npy_read_floats(fp, path, &h, h.numel, t->data, err);
    fclose(fp);
    if (st) {
        nc_tensor_free(t);
        return st;
    }
    if (raw_u8)
        *raw_u8 = h.kind == 'u';
    *out = t;
    return NC_OK;
}

nc_status nc_npy_read(const char *path, nc_tensor **out, nc_error *err)
{
    return npy_load(path, 0, out, NULL, NULL, err);
}

/* The v1 header, padded with spaces so the data starts on a 64-byte boundary. */
static size_t npy_format_header(const nc_tensor *t, char *buf, size_t size)
{
    char shape[256];
    size_t n = (size_t)snprintf(shape, sizeof shape, "(");
    for (int i = 0; i < t->ndim; i++)
        n += (size_t)snprintf(shape + n, sizeof shape - n, "%lld,%s", (long long)t->shape[i],
                              i + 1 < t->ndim ? " " : "");
    if (t->ndim > 1)
        shape[--n] = '\0'; /* "(2, 3)" but "(2,)" */
    snprintf(shape + n, sizeof shape - n, ")");
    int len = snprintf(buf + 10, size - 10, "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", shape);
    size_t total = 10 + (size_t)len + 1;
    size_t padded = (total + 63) / 64 * 64;
    memset(buf + 10 + len, ' ', padded - total);
    buf[padded - 1] = '\n';
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)((padded - 10) & 0xff);
    buf[9] = (char)((padded - 10) >> 8);
    return padded;
}

static nc_status npy_write_data(FILE *fp, const char *path, const nc_tensor *t, nc_error *err)
{
    char header[512];
    size_t hlen = npy_format_header(t, header, sizeof header);
    int ok = fwrite(header, 1, hlen, fp) == hlen;
    size_t n = (size_t)nc_tensor_numel(t);
    if (host_is_little_endian())
        ok = ok && fwrite(t->data, sizeof(float), n, fp) == n;
    else
        for (size_t i = 0; ok && i < n; i++) {
            float v = t->data[i];
            le_to_host(&v, 1, sizeof v); /* the swap is its own inverse */
            ok = fwrite(&v, sizeof v, 1, fp) == 1;
        }
    if (fflush(fp) != 0)
        ok = 0;
    return ok ? NC_OK
              : nc_fail(err, NC_ERR_IO, "%s: write failed: %s; the old file (if any) is left as it was", path,
                        strerror(errno));
}

nc_status nc_npy_write(const char *path, const nc_tensor *t, nc_error *err)
{
    if (!t || !path || t->ndim < 0 || t->ndim > NC_MAX_DIMS)
        return nc_fail(err, NC_ERR_ARGUMENT, "nc_npy_write: no tensor or path");
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp); /* same folder, so the rename is atomic */
    if (fd < 0)
        return nc_fail(err, NC_ERR_IO, "%s: cannot create a temporary file: %s", path, strerror(errno));
    fchmod(fd, 0644);
    FILE *fp = fdopen(fd, "wb");
    if (!fp) {
        close(fd);
        unlink(tmp);
        return nc_fail(err, NC_ERR_IO, "%s: %s", path, strerror(errno));
    }
    nc_status st = npy_write_data(fp, path, t, err);
    if (fclose(fp) != 0 && !st)
        st = nc_fail(err, NC_ERR_IO, "%s: write failed: %s; the old file (if any) is left as it was", path,
                     strerror(errno));
    if (!st && nc_file_commit(tmp, path) != 0) /* fsync, rename, fsync the folder */
        st = nc_fail(err, NC_ERR_IO, "%s: cannot replace the file: %s; the old file (if any) is left as it was",
                     path, strerror(errno));
    if (st)
        unlink(tmp);
    return st;
}

/* Images as [n, H, W] (C = 1) or [n, C, H, W]; channels-last is not guessed. */
static nc_status image_shape(const char *path, int ndim, const int64_t *shape, int *C, int *H, int *W,
                             nc_error *err)
{
    char buf[96];
    if (ndim == 3 && shape[1] <= INT32_MAX && shape[2] <= INT32_MAX) {
        *C = 1, *H = (int)shape[1], *W = (int)shape[2];
        return NC_OK;
    }
    if (ndim == 4 && shape[1] >= 1 && shape[1] <= NC_MAX_CHANNELS && shape[2] <= INT32_MAX &&
        shape[3] <= INT32_MAX) {
        *C = (int)shape[1], *H = (int)shape[2], *W = (int)shape[3];
        return NC_OK;
    }
    nc_shape_str(ndim, shape, buf, sizeof buf);
    if (ndim == 4)
        return nc_fail(err, NC_ERR_SHAPE, "%s: images of shape %s: the channel axis must come second (N, C, H, "
                       "W) with at most %d channels; for channels-last data save np.transpose(x, (0, 3, 1, 2))",
                       path, buf, NC_MAX_CHANNELS);
    return nc_fail(err, NC_ERR_SHAPE, "%s: images of shape %s; expected [N, H, W] or [N, C, H, W]", path, buf);
}

/* Labels of x.npy: <stem>_labels.npy, <stem>.labels.npy, or x*.npy → y*.npy. */
static int npy_labels_path(const char *images, char *out, size_t size)
{
    size_t stem = strlen(images) - 4;
    snprintf(out, size, "%.*s_labels.npy", (int)stem, images);
    if (is_file(out))
        return 1;
    snprintf(out, size, "%.*s.labels.npy", (int)stem, images);
    if (is_file(out))
        return 1;
    const char *slash = strrchr(images, '/');
    size_t base = slash ? (size_t)(slash - images) + 1 : 0;
    if (images[base] != 'x' && images[base] != 'X')
        return 0;
    snprintf(out, size, "%s", images);
    out[base] = images[base] == 'x' ? 'y' : 'Y';
    return is_file(out);
}

static nc_status npy_labels(nc_dataset *ds, const char *path, int64_t n_images, int64_t limit, nc_error *err)
{
    nc_tensor *y;
    int64_t n_labels;
    nc_status st = npy_load(path, limit, &y, NULL, &n_labels, err);
    if (st)
        return st;
    if (y->ndim != 1)
        st = nc_fail(err, NC_ERR_SHAPE, "%s: labels must be a 1-D array", path);
    if (!st)
        st = check_counts(ds->path, n_images, path, n_labels, err);
    double *values = st ? NULL : malloc((size_t)(ds->count ? ds->count : 1) * sizeof *values);
    if (!st && !values)
        st = nc_fail(err, NC_ERR_MEMORY, "%s: out of memory", path);
    for (int64_t i = 0; !st && i < ds->count; i++)
        values[i] = y->data[i];
    if (!st)
        st = set_labels(ds, values, path, err);
    free(values);
    nc_tensor_free(y);
    return st;
}

static nc_status load_npy(nc_dataset *ds, const char *path, int64_t limit, int *raw_u8, nc_error *err)
{
    char labels[1200];
    snprintf(ds->format, sizeof ds->format, "npy");
    if (!npy_labels_path(path, labels, sizeof labels))
        return nc_fail(err, NC_ERR_IO, "%s: no labels found; put them in <stem>_labels.npy, <stem>.labels.npy "
                       "or, for x*.npy, y*.npy", path);
    nc_tensor *x;
    int64_t n_images;
    nc_status st = npy_load(path, limit, &x, raw_u8, &n_images, err);
    if (st)
        return st;
    int C, H, W;
    st = image_shape(path, x->ndim, x->shape, &C, &H, &W, err);
    if (!st) {
        /* take over the tensor's buffer instead of copying it */
        ds->images = x->data, x->data = NULL;
        ds->count = x->shape[0], ds->channels = C, ds->height = H, ds->width = W;
        ds->labels = malloc((size_t)(ds->count ? ds->count : 1) * sizeof(int32_t));
        if (!ds->labels)
            st = nc_fail(err, NC_ERR_MEMORY, "%s: out of memory", path);
    }
    nc_tensor_free(x);
    if (!st)
        st = npy_labels(ds, labels, n_images, limit, err);
    return st;
}

/* --------------------------------------------------------------- HDF5 -- */

/* The innermost HDF5 error description, on one line, for messages. */
static const char *h5_reason(char *buf)
{
    nc_h5_error_text(buf, 256);
    return buf[0] ? buf : "unknown HDF5 error";
}

/* Opens dataset `name` only when it is a hard link (no external or soft
 * links: they could lead to another file) stored inside this file. */
static nc_status h5_open(hid_t file, const char *path, const char *name, hid_t *out, nc_error *err)
{
    H5L_info_t info;
    if (H5Lexists(file, name, H5P_DEFAULT) <= 0)
        return nc_fail(err, NC_ERR_FORMAT, "%s: no dataset '%s'; an HDF5 dataset needs 'x' (images) and 'y' "
                       "(labels)", path, name);
    if (H5Lget_info(file, name, &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_HARD)
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: '%s' is a link, not a dataset; links (which may point to "
                       "other files) are not followed", path, name);
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0) {
        char why[256];
        return nc_fail(err, NC_ERR_FORMAT, "%s: cannot open '%s': %s", path, name, h5_reason(why));
    }
    hid_t dcpl = H5Dget_create_plist(d);
    int external = dcpl >= 0 && (H5Pget_layout(dcpl) == H5D_VIRTUAL || H5Pget_external_count(dcpl) > 0);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (external) {
        H5Dclose(d);
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: '%s' keeps its data in other files (virtual or external "
                       "storage); store it in this file", path, name);
    }
    *out = d;
    return NC_OK;
}

static nc_status h5_dims(hid_t d, const char *path, const char *name, int *ndim, int64_t *dims, nc_error *err)
{
    hid_t space = H5Dget_space(d);
    hsize_t h[H5S_MAX_RANK];
    int n = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    if (n < 0 || n > NC_MAX_DIMS || H5Sget_simple_extent_dims(space, h, NULL) < 0) {
        if (space >= 0)
            H5Sclose(space);
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: '%s' has an unsupported shape (rank %d)", path, name, n);
    }
    H5Sclose(space);
    *ndim = n;
    for (int i = 0; i < n; i++) {
        if (h[i] > (hsize_t)INT64_MAX)
            return nc_fail(err, NC_ERR_FORMAT, "%s: '%s' dimension out of range", path, name);
        dims[i] = (int64_t)h[i];
    }
    return NC_OK;
}

/* Reads the first `rows` rows of dataset d, converted by HDF5 to mem_type. */
static nc_status h5_read_rows(hid_t d, hid_t mem_type, int ndim, const int64_t *dims, int64_t rows, void *buf,
                              const char *path, const char *name, nc_error *err)
{
    hsize_t start[NC_MAX_DIMS] = {0}, count[NC_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
        count[i] = (hsize_t)dims[i];
    count[0] = (hsize_t)rows;
    hid_t file_space = H5Dget_space(d);
    hid_t mem_space = H5Screate_simple(ndim, count, NULL);
    herr_t rc = file_space >= 0 && mem_space >= 0
                    ? H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, count, NULL)
                    : -1;
    if (rc >= 0 && rows > 0)
        rc = H5Dread(d, mem_type, mem_space, file_space, H5P_DEFAULT, buf);
    if (file_space >= 0)
        H5Sclose(file_space);
    if (mem_space >= 0)
        H5Sclose(mem_space);
    char why[256];
    return rc < 0 ? nc_fail(err, NC_ERR_FORMAT, "%s: cannot read '%s': %s", path, name, h5_reason(why)) : NC_OK;
}

/* 1 for uint8 data (automatic scale 1/255); fails for non-numeric types. */
static nc_status h5_numeric(hid_t d, const char *path, const char *name, int *is_u8, nc_error *err)
{
    hid_t type = H5Dget_type(d);
    H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    int ok = nc_h5_numeric_type_ok(type);
    *is_u8 = cls == H5T_INTEGER && H5Tget_size(type) == 1 && H5Tget_sign(type) == H5T_SGN_NONE;
    if (type >= 0)
        H5Tclose(type);
    if (!ok)
        return nc_fail(err, NC_ERR_UNSUPPORTED, "%s: '%s' is not a numeric dataset (standard integers, or IEEE "
                       "floats of 32 or 64 bits); save it with x.astype('float32') or 'uint8'", path, name);
    return NC_OK;
}

/* The declared extent against the bytes the file stores (before allocating). */
static nc_status h5_stored(hid_t d, const char *path, const char *name, int ndim, const int64_t *dims, nc_error *err)
{
    int64_t numel = nc_shape_numel(ndim, dims);
    if (numel < 0)
        return nc_fail(err, NC_ERR_FORMAT, "%s: '%s' declares a size that overflows", path, name);
    nc_status st = nc_h5_check_stored(d, name, numel, err);
    if (st)
        nc_error_prefix(err, "%s", path);
    return st;
}

static nc_status h5_labels(nc_dataset *ds, hid_t dy, const char *path, int64_t n_images, nc_error *err)
{
    int ndim, is_u8;
    int64_t dims[NC_MAX_DIMS];
    nc_status st = h5_dims(dy, path, "y", &ndim, dims, err);
    if (!st && ndim != 1)
        st = nc_fail(err, NC_ERR_SHAPE, "%s: 'y' must be 1-D (one label per image)", path);
    if (!st)
        st = h5_numeric(dy, path, "y", &is_u8, err);
    if (!st)
        st = check_counts(path, n_images, "its 'y'", dims[0], err);
    if (!st)
        st = h5_stored(dy, path, "y", ndim, dims, err);
    double *values = st ? NULL : malloc((size_t)(ds->count ? ds->count : 1) * sizeof *values);
    if (!st && !values)
        st = nc_fail(err, NC_ERR_MEMORY, "%s: out of memory", path);
    if (!st)
        st = h5_read_rows(dy, H5T_NATIVE_DOUBLE, 1, dims, ds->count, values, path, "y", err);
    if (!st)
        st = set_labels(ds, values, path, err);
    free(values);
    return st;
}

static nc_status h5_images(nc_dataset *ds, hid_t dx, const char *path, int64_t limit, int64_t *n_images,
                           int *is_u8, nc_error *err)
{
    int ndim, C, H, W;
    int64_t dims[NC_MAX_DIMS];
    nc_status st = h5_dims(dx, path, "x", &ndim, dims, err);
    if (!st)
        st = image_shape(path, ndim, dims, &C, &H, &W, err);
    if (!st)
        st = h5_numeric(dx, path, "x", is_u8, err);
    if (!st)
        st = h5_stored(dx, path, "x", ndim, dims, err);
    if (!st)
        st = alloc_dataset(ds, apply_limit(dims[0], limit), C, H, W, err);
    if (!st)
        st = h5_read_rows(dx, H5T_NATIVE_FLOAT, ndim, dims, ds->count, ds->images, path, "x", err);
    *n_images = st ? 0 : dims[0];
    return st;
}

static nc_status load_hdf5(nc_dataset *ds, const char *path, int64_t limit, int *is_u8, nc_error *err)
{
    snprintf(ds->format, sizeof ds->format, "hdf5");
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* library code never prints */
    nc_status probe = nc_h5_probe_file(path, err); /* libhdf5 survives it? */
    if (probe)
        return probe;
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) {
        char why[256];
        return nc_fail(err, NC_ERR_FORMAT, "%s: cannot open as HDF5: %s", path, h5_reason(why));
    }
    hid_t dx = -1, dy = -1;
    int64_t n_images = 0;
    nc_status st = h5_open(file, path, "x", &dx, err);
    if (!st)
        st = h5_open(file, path, "y", &dy, err);
    if (!st)
        st = h5_images(ds, dx, path, limit, &n_images, is_u8, err);
    if (!st)
        st = h5_labels(ds, dy, path, n_images, err);
    if (dx >= 0)
        H5Dclose(dx);
    if (dy >= 0)
        H5Dclose(dy);
    H5Fclose(file);
    return st;
}

/* ------------------------------------------------------------ dataset -- */

typedef enum { KIND_IDX, KIND_NPY, KIND_HDF5 } file_kind;

/* By content, so a misnamed file still loads; .gz IDX files sniff as IDX. */
static file_kind sniff(const char *path)
{
    uint8_t head[8] = {0};
    FILE *fp = fopen(path, "rb");
    size_t n = fp ? fread(head, 1, sizeof head, fp) : 0;
    if (fp)
        fclose(fp);
    if (n == 8 && memcmp(head, "\x89HDF\r\n\x1a\n", 8) == 0)
        return KIND_HDF5;
    if (n >= 6 && memcmp(head, "\x93NUMPY", 6) == 0)
        return KIND_NPY;
    if (has_suffix(path, ".npy"))
        return KIND_NPY;
    if (has_suffix(path, ".h5") || has_suffix(path, ".hdf5"))
        return KIND_HDF5;
    return KIND_IDX;
}

/* "fashion-mnist", "mnist", ...: a bare name (no '/' or '.') that is not a
 * path here names a folder under /usr/share/datasets. */
static void resolve_spec(const char *spec, char *out, size_t size)
{
    if (strcmp(spec, "fashion-mnist") == 0 || strcmp(spec, "fashion_mnist") == 0)
        snprintf(out, size, "%s", NC_FASHION_MNIST_DIR);
    else if (!strpbrk(spec, "/.") && access(spec, F_OK) != 0)
        snprintf(out, size, "/usr/share/datasets/%s", spec);
    else
        snprintf(out, size, "%s", spec);
}

static nc_status load_any(nc_dataset *ds, const char *path, nc_split split, int64_t limit, int *raw_u8,
                          nc_error *err)
{
    if (is_dir(path)) {
        *raw_u8 = 1;
        return load_idx_folder(ds, path, split, limit, err);
    }
    if (!is_file(path))
        return missing(err, path);
    switch (sniff(path)) {
    case KIND_NPY: return load_npy(ds, path, limit, raw_u8, err);
    case KIND_HDF5: return load_hdf5(ds, path, limit, raw_u8, err);
    default: *raw_u8 = 1; return load_idx_file(ds, path, limit, err);
    }
}

nc_status nc_dataset_open(const char *spec, nc_split split, const nc_preprocess *pp, int64_t limit,
                          nc_dataset **out, nc_error *err)
{
    *out = NULL;
    if (!spec || !*spec)
        return nc_fail(err, NC_ERR_ARGUMENT, "no dataset given; pass --data PATH or fashion-mnist");
    if (strlen(spec) > 900) /* room for the suffixes added to find sibling files */
        return nc_fail(err, NC_ERR_ARGUMENT, "dataset path of %zu characters is too long", strlen(spec));
    nc_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory");
    resolve_spec(spec, ds->path, sizeof ds->path);
    int raw_u8 = 0;
    nc_status st = load_any(ds, ds->path, split, limit, &raw_u8, err);
    if (!st)
        st = apply_preprocess(ds, pp, raw_u8, err);
    if (st) {
        nc_dataset_free(ds);
        return st;
    }
    *out = ds;
    return NC_OK;
}

void nc_dataset_free(nc_dataset *ds)
{
    if (!ds)
        return;
    nc_dataset_stream_free(ds->stream);
    free(ds->images);
    free(ds->labels);
    free(ds);
}

void nc_dataset_batch(const nc_dataset *ds, int64_t first, int64_t n, float *images, int32_t *labels)
{
    if (!ds || first < 0 || n <= 0 || first >= ds->count)
        return;
    if (n > ds->count - first) /* never read past the end */
        n = ds->count - first;
    if (ds->stream) {
        nc_dataset_stream_batch(ds->stream, first, n, images, labels);
        return;
    }
    size_t per = (size_t)ds->channels * ds->height * ds->width;
    if (images)
        memcpy(images, ds->images + (size_t)first * per, (size_t)n * per * sizeof(float));
    if (labels)
        memcpy(labels, ds->labels + first, (size_t)n * sizeof(int32_t));
}

int nc_parse_float_list(const char *text, float *values, int max_values)
{
    if (!text)
        return -1;
    int n = 0;
    const char *p = text;
    for (;;) {
        char *end;
        errno = 0;
        float v = strtof(p, &end);
        if (end == p || errno == ERANGE || !isfinite(v) || n == max_values)
            return -1;
        values[n++] = v;
        while (isspace((unsigned char)*end))
            end++;
        if (*end == '\0')
            return n;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
}
