/* test_dataset.c — datasets: the real Fashion-MNIST, IDX (gzip and plain),
 * .npy and HDF5 files written here into a temporary folder, preprocessing,
 * and the error cases (lying headers, truncated gzip, wrong paths, label
 * counts that do not match). */
#include "nc_test.h"

#include "nc_dataset.h"

#include <ftw.h>
#include <hdf5.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char tmp_dir[512];

static const char *tmp_path(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", tmp_dir, name);
    return buf;
}

/* ------------------------------------------------------ file writers -- */

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* Writes bytes plainly, or gzip-compressed when the name ends in .gz. */
static void write_bytes(const char *path, const void *data, size_t size)
{
    size_t n = strlen(path);
    if (n > 3 && strcmp(path + n - 3, ".gz") == 0) {
        gzFile gz = gzopen(path, "wb");
        gzwrite(gz, data, (unsigned)size);
        gzclose(gz);
    } else {
        FILE *fp = fopen(path, "wb");
        fwrite(data, 1, size, fp);
        fclose(fp);
    }
}

/* An IDX file of unsigned bytes whose header declares `declared` items but
 * whose data holds `n` items of `per` bytes (declared ≠ n: a lying header). */
static void write_idx(const char *path, int ndim, uint32_t declared, const uint32_t *rest, const uint8_t *data,
                      size_t data_bytes)
{
    size_t header = 4 + 4 * (size_t)ndim;
    uint8_t *buf = malloc(header + data_bytes);
    buf[0] = buf[1] = 0, buf[2] = 0x08, buf[3] = (uint8_t)ndim;
    put_be32(buf + 4, declared);
    for (int i = 1; i < ndim; i++)
        put_be32(buf + 4 + 4 * i, rest[i - 1]);
    memcpy(buf + header, data, data_bytes);
    write_bytes(path, buf, header + data_bytes);
    free(buf);
}

/* n images of 4x3 pixels, pixel (i, k) = 10·i + k; labels i % 3. */
enum { SMALL_H = 4, SMALL_W = 3 };
static void small_images(uint8_t *px, uint8_t *labels, int n)
{
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < SMALL_H * SMALL_W; k++)
            px[i * SMALL_H * SMALL_W + k] = (uint8_t)(10 * i + k);
        labels[i] = (uint8_t)(i % 3);
    }
}

/* t10k-{images,labels} in tmp_dir with the given suffix ("" or ".gz"). */
static void write_small_idx_pair(const char *prefix, const char *suffix, int n_images, int n_labels)
{
    uint8_t px[64 * SMALL_H * SMALL_W], labels[64];
    small_images(px, labels, n_images > n_labels ? n_images : n_labels);
    uint32_t hw[2] = {SMALL_H, SMALL_W};
    char name[128], path[256];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte%s", prefix, suffix);
    write_idx(tmp_path(name, path, sizeof path), 3, (uint32_t)n_images, hw, px,
              (size_t)n_images * SMALL_H * SMALL_W);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte%s", prefix, suffix);
    write_idx(tmp_path(name, path, sizeof path), 1, (uint32_t)n_labels, NULL, labels, (size_t)n_labels);
}

/* A .npy file with an explicit descr, shape string and raw data. */
static void write_npy_raw(const char *path, const char *descr, const char *fortran, const char *shape,
                          const void *data, size_t bytes)
{
    char dict[256];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, fortran,
                       shape);
    size_t total = 10 + (size_t)len + 1, padded = (total + 63) / 64 * 64;
    uint8_t *buf = calloc(1, padded + bytes);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)((padded - 10) & 0xff), buf[9] = (uint8_t)((padded - 10) >> 8);
    memcpy(buf + 10, dict, (size_t)len);
    memset(buf + 10 + len, ' ', padded - total);
    buf[padded - 1] = '\n';
    memcpy(buf + padded, data, bytes);
    write_bytes(path, buf, padded + bytes);
    free(buf);
}

static void truncate_file(const char *path, long keep)
{
    NC_CHECK(truncate(path, keep) == 0, "truncate %s", path);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

/* --------------------------------------------------- Fashion-MNIST -- */

static void test_fashion_mnist_test_split(void)
{
    nc_dataset *ds = NULL;
    nc_error err = {0};
    nc_status st = nc_dataset_open("fashion-mnist", NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_OK, "%s", err.message);
    if (!ds)
        return;
    NC_CHECK(ds->count == 10000, "count %lld", (long long)ds->count);
    NC_CHECK(ds->channels == 1 && ds->height == 28 && ds->width == 28, "shape %d %d %d", ds->channels,
             ds->height, ds->width);
    NC_CHECK(ds->num_classes == 10, "num_classes %d", ds->num_classes);
    NC_CHECK(strcmp(ds->format, "idx") == 0, "format %s", ds->format);
    int hist[10] = {0};
    for (int64_t i = 0; i < ds->count; i++)
        if (ds->labels[i] >= 0 && ds->labels[i] < 10)
            hist[ds->labels[i]]++;
    for (int c = 0; c < 10; c++)
        NC_CHECK(hist[c] == 1000, "class %d has %d images", c, hist[c]);
    float lo = 1e9f, hi = -1e9f; /* uint8 data: automatic scale 1/255 */
    for (int64_t i = 0; i < ds->count * 784; i++)
        lo = fminf(lo, ds->images[i]), hi = fmaxf(hi, ds->images[i]);
    NC_CHECK(lo == 0.0f && hi == 1.0f, "pixel range [%g, %g]", (double)lo, (double)hi);
    nc_dataset_free(ds);
}

static void test_fashion_mnist_train_split(void)
{
    nc_dataset *ds = NULL;
    nc_error err = {0};
    nc_status st = nc_dataset_open(NC_FASHION_MNIST_DIR, NC_SPLIT_TRAIN, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_OK, "%s", err.message);
    if (!ds)
        return;
    NC_CHECK(ds->count == 60000, "count %lld", (long long)ds->count);
    NC_CHECK(ds->num_classes == 10, "num_classes %d", ds->num_classes);
    nc_dataset_free(ds);
}

/* The same preprocessing as tools/train_models.py (x/255 − 0.2860)/0.3530,
 * on the first 100 test images, checked against the unprocessed values. */
static void test_mean_std_and_limit(void)
{
    nc_dataset *raw = NULL, *ds = NULL;
    nc_error err = {0};
    nc_preprocess pp = {.scale = 1.0f};
    nc_status st = nc_dataset_open("fashion-mnist", NC_SPLIT_TEST, &pp, 100, &raw, &err);
    NC_CHECK(st == NC_OK, "%s", err.message);
    pp = (nc_preprocess){.n_mean = 1, .mean = {0.2860f}, .n_std = 1, .std = {0.3530f}};
    st = nc_dataset_open("fashion-mnist", NC_SPLIT_TEST, &pp, 100, &ds, &err);
    NC_CHECK(st == NC_OK, "%s", err.message);
    if (!raw || !ds)
        goto out;
    NC_CHECK(raw->count == 100 && ds->count == 100, "limit: %lld", (long long)ds->count);
    float max_err = 0;
    for (int64_t i = 0; i < 100 * 784; i++)
        max_err = fmaxf(max_err, fabsf(ds->images[i] - (raw->images[i] / 255.0f - 0.2860f) / 0.3530f));
    NC_CHECK(max_err < 1e-5f, "max error %g", (double)max_err);
    NC_CHECK(memcmp(raw->labels, ds->labels, 100 * sizeof(int32_t)) == 0, "labels differ");
    NC_CHECK(ds->labels[0] == 9 && ds->labels[1] == 2, "first labels %d %d (ankle boot, pullover)",
             ds->labels[0], ds->labels[1]);
out:
    nc_dataset_free(raw);
    nc_dataset_free(ds);
}

/* --------------------------------------------------------------- IDX -- */

static void check_small(const nc_dataset *ds, int n, float scale)
{
    uint8_t px[64 * SMALL_H * SMALL_W], labels[64];
    small_images(px, labels, n);
    NC_CHECK(ds->count == n && ds->channels == 1 && ds->height == SMALL_H && ds->width == SMALL_W,
             "shape %lld %d %d %d", (long long)ds->count, ds->channels, ds->height, ds->width);
    for (int i = 0; i < n * SMALL_H * SMALL_W && i < ds->count * SMALL_H * SMALL_W; i++)
        NC_CHECK_CLOSE(ds->images[i], px[i] * scale, 1e-6, 1e-6, "pixel %d", i);
    for (int i = 0; i < n && i < ds->count; i++)
        NC_CHECK(ds->labels[i] == labels[i], "label %d: %d", i, ds->labels[i]);
    NC_CHECK(ds->num_classes == 3, "num_classes %d", ds->num_classes);
}

static void test_idx_gzip_and_plain(void)
{
    write_small_idx_pair("t10k", ".gz", 5, 5);
    write_small_idx_pair("train", "", 7, 7);
    nc_dataset *ds = NULL;
    nc_error err = {0};
    nc_preprocess raw = {.scale = 1.0f};
    char path[256];
    /* a folder: t10k-* (gzip) for the test split, train-* (plain) for train */
    NC_CHECK(nc_dataset_open(tmp_dir, NC_SPLIT_TEST, &raw, 0, &ds, &err) == NC_OK, "%s", err.message);
    if (ds)
        check_small(ds, 5, 1.0f);
    nc_dataset_free(ds);
    NC_CHECK(nc_dataset_open(tmp_dir, NC_SPLIT_TRAIN, NULL, 0, &ds, &err) == NC_OK, "%s", err.message);
    if (ds)
        check_small(ds, 7, 1.0f / 255.0f);
    nc_dataset_free(ds);
    /* an images file: the labels are found by name */
    tmp_path("train-images-idx3-ubyte", path, sizeof path);
    NC_CHECK(nc_dataset_open(path, NC_SPLIT_TEST, &raw, 3, &ds, &err) == NC_OK, "%s", err.message);
    if (ds)
        check_small(ds, 3, 1.0f);
    nc_dataset_free(ds);
}

static void test_idx_lying_header(void)
{
    /* the header says 1000 images; the file holds 5 */
    uint8_t px[5 * SMALL_H * SMALL_W] = {0}, labels[1000] = {0};
    uint32_t hw[2] = {SMALL_H, SMALL_W};
    char images[256], lab[256];
    tmp_path("lie-images-idx3-ubyte", images, sizeof images);
    tmp_path("lie-labels-idx1-ubyte", lab, sizeof lab);
    write_idx(images, 3, 1000, hw, px, sizeof px);
    write_idx(lab, 1, 1000, NULL, labels, sizeof labels);
    nc_dataset *ds = NULL;
    nc_error err = {0};
    nc_status st = nc_dataset_open(images, NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_FORMAT && ds == NULL, "status %s", nc_status_name(st));
    NC_CHECK(strstr(err.message, images) && strstr(err.message, "1000") && strstr(err.message, "60 bytes"),
             "message: %s", err.message);
    printf("# %s\n", err.message);
}

static void test_idx_truncated_gzip(void)
{
    /* a gzip stream cut in the middle: zlib reports it, we say so */
    enum { N = 200 };
    uint8_t px[N * SMALL_H * SMALL_W], labels[N];
    for (int i = 0; i < N * SMALL_H * SMALL_W; i++)
        px[i] = (uint8_t)(i * 2654435761u >> 24); /* noise that does not compress away */
    memset(labels, 1, sizeof labels);
    uint32_t hw[2] = {SMALL_H, SMALL_W};
    char images[256], lab[256];
    tmp_path("cut-images-idx3-ubyte.gz", images, sizeof images);
    tmp_path("cut-labels-idx1-ubyte.gz", lab, sizeof lab);
    write_idx(images, 3, N, hw, px, sizeof px);
    write_idx(lab, 1, N, NULL, labels, sizeof labels);
    truncate_file(images, 600);
    nc_dataset *ds = NULL;
    nc_error err = {0};
    nc_status st = nc_dataset_open(images, NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_FORMAT && ds == NULL, "status %s", nc_status_name(st));
    NC_CHECK(strstr(err.message, images) && strstr(err.message, "gzip"), "message: %s", err.message);
    printf("# %s\n", err.message);
}

static void test_idx_label_count_mismatch(void)
{
    write_small_idx_pair("odd", "", 5, 4);
    char images[256];
    tmp_path("odd-images-idx3-ubyte", images, sizeof images);
    nc_dataset *ds = NULL;
    nc_error err = {0};
    nc_status st = nc_dataset_open(images, NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_FORMAT && ds == NULL, "status %s", nc_status_name(st));
    NC_CHECK(strstr(err.message, "5 images") && strstr(err.message, "4 labels"), "message: %s", err.message);
    printf("# %s\n", err.message);
}

static void test_idx_bad_magic(void)
{
    char path[256];
    write_small_idx_pair("junk", "", 1, 1);
    write_bytes(tmp_path("junk-images-idx3-ubyte", path, sizeof path), "this is not an IDX file at all", 30);
    nc_dataset *ds = NULL;
    nc_error err = {0};
    nc_status st = nc_dataset_open(path, NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_FORMAT && ds == NULL, "status %s: %s", nc_status_name(st), err.message);
}

static void test_wrong_path(void)
{
    nc_dataset *ds = NULL;
    nc_error err = {0};
    nc_status st = nc_dataset_open("/nonexistent/fmnist", NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_IO && ds == NULL, "status %s", nc_status_name(st));
    NC_CHECK(strstr(err.message, "/nonexistent/fmnist") && strstr(err.message, "no such file or folder") &&
                 strstr(err.message, "dataset-fashion-mnist") && strstr(err.message, "--data"),
             "message: %s", err.message);
    printf("# %s\n", err.message);
    /* a folder without IDX files */
    char empty[256];
    tmp_path("empty", empty, sizeof empty);
    mkdir(empty, 0755);
    st = nc_dataset_open(empty, NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_IO && strstr(err.message, "t10k-images-idx3-ubyte"), "%s", err.message);
}

/* --------------------------------------------------------------- NPY -- */

static void test_npy_f32_round_trip(void)
{
    char path[256];
    tmp_path("t.npy", path, sizeof path);
    nc_tensor *t = nc_tensor_new4(2, 3, 4, 5), *back = NULL;
    for (int i = 0; i < 120; i++)
        t->data[i] = (float)i * 0.25f - 7.0f;
    nc_error err = {0};
    NC_CHECK(nc_npy_write(path, t, &err) == NC_OK, "%s", err.message);
    NC_CHECK(nc_npy_read(path, &back, &err) == NC_OK, "%s", err.message);
    if (back) {
        NC_CHECK(back->ndim == 4 && back->shape[0] == 2 && back->shape[3] == 5, "shape");
        NC_CHECK(memcmp(back->data, t->data, 120 * sizeof(float)) == 0, "data differs");
    }
    nc_tensor_free(back);
    nc_tensor_free(t);
    /* 1-D: "(7,)" in the header */
    t = nc_tensor_new1(7);
    t->data[6] = 42.0f;
    NC_CHECK(nc_npy_write(path, t, &err) == NC_OK, "%s", err.message);
    NC_CHECK(nc_npy_read(path, &back, &err) == NC_OK, "%s", err.message);
    NC_CHECK(back && back->ndim == 1 && back->shape[0] == 7 && back->data[6] == 42.0f, "1-D round trip");
    nc_tensor_free(back);
    nc_tensor_free(t);
    FILE *fp = fopen(path, "rb");
    char head[129] = {0};
    NC_CHECK(fp && fread(head, 1, 128, fp) == 128, "short file");
    size_t hlen = (uint8_t)head[8] | (size_t)(uint8_t)head[9] << 8;
    NC_CHECK((10 + hlen) % 64 == 0 && 10 + hlen <= 128 && head[10 + hlen - 1] == '\n', "64-byte aligned header");
    NC_CHECK(strstr(head + 10, "'shape': (7,)") != NULL, "header: %s", head + 10);
    if (fp)
        fclose(fp);
}

static void test_npy_u8_dataset(void)
{
    /* x.npy uint8 [6, 4, 3] (C = 1) with y.npy int64 labels */
    uint8_t px[6 * SMALL_H * SMALL_W], lab8[6];
    int64_t labels[6];
    small_images(px, lab8, 6);
    for (int i = 0; i < 6; i++)
        labels[i] = lab8[i];
    char x[256], y[256];
    write_npy_raw(tmp_path("x_small.npy", x, sizeof x), "|u1", "False", "(6, 4, 3)", px, sizeof px);
    write_npy_raw(tmp_path("y_small.npy", y, sizeof y), "<i8", "False", "(6,)", labels, sizeof labels);
    nc_dataset *ds = NULL;
    nc_error err = {0};
    NC_CHECK(nc_dataset_open(x, NC_SPLIT_TEST, NULL, 0, &ds, &err) == NC_OK, "%s", err.message);
    if (ds) {
        check_small(ds, 6, 1.0f / 255.0f);
        NC_CHECK(strcmp(ds->format, "npy") == 0, "format %s", ds->format);
    }
    nc_dataset_free(ds);
    NC_CHECK(nc_dataset_open(x, NC_SPLIT_TEST, NULL, 2, &ds, &err) == NC_OK, "%s", err.message);
    NC_CHECK(ds && ds->count == 2, "limit");
    nc_dataset_free(ds);
}

static void test_npy_types(void)
{
    double f8[3] = {1.5, -2.0, 1e3};
    int32_t i4[3] = {-1, 0, 123456};
    char path[256];
    nc_tensor *t = NULL;
    nc_error err = {0};
    write_npy_raw(tmp_path("f8.npy", path, sizeof path), "<f8", "False", "(3,)", f8, sizeof f8);
    NC_CHECK(nc_npy_read(path, &t, &err) == NC_OK, "%s", err.message);
    NC_CHECK(t && t->data[0] == 1.5f && t->data[2] == 1000.0f, "float64");
    nc_tensor_free(t);
    write_npy_raw(path, "<i4", "False", "(1, 3)", i4, sizeof i4);
    NC_CHECK(nc_npy_read(path, &t, &err) == NC_OK, "%s", err.message);
    NC_CHECK(t && t->ndim == 2 && t->data[0] == -1.0f && t->data[2] == 123456.0f, "int32");
    nc_tensor_free(t);
}

static void expect_npy_error(const char *name, const char *descr, const char *fortran, const char *shape,
                             size_t bytes, nc_status want, const char *needle)
{
    char path[256];
    uint8_t data[4096] = {0};
    nc_tensor *t = NULL;
    nc_error err = {0};
    write_npy_raw(tmp_path(name, path, sizeof path), descr, fortran, shape, data, bytes);
    nc_status st = nc_npy_read(path, &t, &err);
    NC_CHECK(st == want && t == NULL, "%s: status %s: %s", name, nc_status_name(st), err.message);
    NC_CHECK(strstr(err.message, needle) != NULL, "%s: message: %s", name, err.message);
    printf("# %s\n", err.message);
}

static void test_npy_errors(void)
{
    expect_npy_error("fortran.npy", "<f4", "True", "(2, 3)", 24, NC_ERR_UNSUPPORTED, "Fortran");
    expect_npy_error("big.npy", ">f4", "False", "(2, 3)", 24, NC_ERR_UNSUPPORTED, ">f4");
    expect_npy_error("f2.npy", "<f2", "False", "(2, 3)", 12, NC_ERR_UNSUPPORTED, "<f2");
    expect_npy_error("short.npy", "<f4", "False", "(100, 3)", 24, NC_ERR_FORMAT, "1200 bytes");
    /* channels-last images are not guessed */
    char x[256], y[256];
    uint8_t px[2 * 28 * 28] = {0};
    int64_t labels[2] = {0, 1};
    write_npy_raw(tmp_path("nhwc.npy", x, sizeof x), "|u1", "False", "(2, 28, 28, 1)", px, sizeof px);
    write_npy_raw(tmp_path("nhwc_labels.npy", y, sizeof y), "<i8", "False", "(2,)", labels, sizeof labels);
    nc_dataset *ds = NULL;
    nc_error err = {0};
    nc_status st = nc_dataset_open(x, NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_SHAPE && ds == NULL && strstr(err.message, "transpose"), "%s: %s", nc_status_name(st),
             err.message);
    /* labels out of range */
    int64_t bad[2] = {0, 1000};
    write_npy_raw(tmp_path("nhwc_labels.npy", y, sizeof y), "<i8", "False", "(2,)", bad, sizeof bad);
    write_npy_raw(x, "|u1", "False", "(2, 1, 28, 28)", px, sizeof px);
    st = nc_dataset_open(x, NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_FORMAT && strstr(err.message, "1000"), "%s: %s", nc_status_name(st), err.message);
    /* label count mismatch */
    write_npy_raw(y, "<i8", "False", "(1,)", bad, sizeof bad[0]);
    st = nc_dataset_open(x, NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_FORMAT && strstr(err.message, "2 images") && strstr(err.message, "1 labels"), "%s: %s",
             nc_status_name(st), err.message);
}

/* -------------------------------------------------------------- HDF5 -- */

static void h5_write(hid_t file, const char *name, hid_t type, int rank, const hsize_t *dims, const void *data)
{
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    H5Dclose(d);
    H5Sclose(space);
}

/* x: uint8 [5, 2, 4, 3] (pixel = 10·i + k within each image), y: int64 [n_labels]. */
static void write_small_h5(const char *path, int n_labels)
{
    uint8_t px[5 * 2 * SMALL_H * SMALL_W];
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 2 * SMALL_H * SMALL_W; k++)
            px[i * 2 * SMALL_H * SMALL_W + k] = (uint8_t)(10 * i + k);
    int64_t labels[5] = {4, 0, 1, 2, 3};
    hsize_t xd[4] = {5, 2, SMALL_H, SMALL_W}, yd[1] = {(hsize_t)n_labels};
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    h5_write(file, "x", H5T_NATIVE_UINT8, 4, xd, px);
    h5_write(file, "y", H5T_NATIVE_INT64, 1, yd, labels);
    H5Fclose(file);
}

static void test_hdf5_dataset(void)
{
    char path[256];
    write_small_h5(tmp_path("small.h5", path, sizeof path), 5);
    nc_preprocess pp = {.scale = 1.0f, .n_mean = 2, .mean = {1, 2}, .n_std = 2, .std = {2, 4}};
    nc_dataset *ds = NULL;
    nc_error err = {0};
    NC_CHECK(nc_dataset_open(path, NC_SPLIT_TEST, &pp, 0, &ds, &err) == NC_OK, "%s", err.message);
    if (!ds)
        return;
    NC_CHECK(ds->count == 5 && ds->channels == 2 && ds->height == SMALL_H && ds->width == SMALL_W, "shape");
    NC_CHECK(strcmp(ds->format, "hdf5") == 0, "format %s", ds->format);
    NC_CHECK(ds->labels[0] == 4 && ds->labels[4] == 3 && ds->num_classes == 5, "labels");
    /* image 1, channel 1, pixel 0: raw 10 + 12 = 22 → (22 − 2) / 4 = 5 */
    NC_CHECK_CLOSE(ds->images[1 * 24 + 12], 5.0, 1e-6, 1e-6, "per-channel mean/std");
    NC_CHECK_CLOSE(ds->images[1 * 24 + 0], (10 - 1) / 2.0, 1e-6, 1e-6, "channel 0");
    int32_t lab[2];
    float batch[2 * 24];
    nc_dataset_batch(ds, 3, 2, batch, lab);
    NC_CHECK(lab[0] == 2 && lab[1] == 3 && batch[0] == ds->images[3 * 24], "batch");
    nc_dataset_free(ds);
    NC_CHECK(nc_dataset_open(path, NC_SPLIT_TEST, NULL, 2, &ds, &err) == NC_OK, "%s", err.message);
    NC_CHECK(ds && ds->count == 2 && ds->images[24] == 10.0f / 255.0f, "limit, automatic scale");
    nc_dataset_free(ds);
}

static void test_hdf5_errors(void)
{
    char path[256], other[256];
    nc_dataset *ds = NULL;
    nc_error err = {0};
    write_small_h5(tmp_path("mismatch.h5", path, sizeof path), 4);
    nc_status st = nc_dataset_open(path, NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_FORMAT && strstr(err.message, "5 images") && strstr(err.message, "4 labels"), "%s: %s",
             nc_status_name(st), err.message);
    /* x is an external link to another file: refused, not followed */
    write_small_h5(tmp_path("target.h5", other, sizeof other), 5);
    hid_t file = H5Fcreate(tmp_path("extlink.h5", path, sizeof path), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Lcreate_external(other, "x", file, "x", H5P_DEFAULT, H5P_DEFAULT);
    H5Lcreate_external(other, "y", file, "y", H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(file);
    st = nc_dataset_open(path, NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_UNSUPPORTED && strstr(err.message, "link"), "%s: %s", nc_status_name(st), err.message);
    printf("# %s\n", err.message);
    /* no 'y' */
    file = H5Fcreate(tmp_path("noy.h5", path, sizeof path), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t d[3] = {1, 2, 2};
    float v[4] = {0};
    h5_write(file, "x", H5T_NATIVE_FLOAT, 3, d, v);
    H5Fclose(file);
    st = nc_dataset_open(path, NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_FORMAT && strstr(err.message, "'y'"), "%s: %s", nc_status_name(st), err.message);
    /* a file that only claims to be HDF5 */
    write_bytes(tmp_path("fake.h5", path, sizeof path), "\x89HDF\r\n\x1a\nnot really", 18);
    st = nc_dataset_open(path, NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_FORMAT && ds == NULL, "%s: %s", nc_status_name(st), err.message);
}

/* -------------------------------------------------------- small APIs -- */

static void test_preprocess_arguments(void)
{
    char path[256];
    tmp_path("small.h5", path, sizeof path); /* 2 channels */
    nc_dataset *ds = NULL;
    nc_error err = {0};
    nc_preprocess pp = {.n_mean = 3, .mean = {0, 0, 0}};
    nc_status st = nc_dataset_open(path, NC_SPLIT_TEST, &pp, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_ARGUMENT && strstr(err.message, "3 mean values for 2 channels"), "%s", err.message);
    pp = (nc_preprocess){.n_std = 1, .std = {0}};
    st = nc_dataset_open(path, NC_SPLIT_TEST, &pp, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_ARGUMENT && strstr(err.message, "std"), "%s", err.message);
    NC_CHECK(nc_dataset_open("", NC_SPLIT_TEST, NULL, 0, &ds, &err) == NC_ERR_ARGUMENT, "empty spec");
    nc_dataset_free(NULL);
}

static void test_parse_float_list(void)
{
    float v[4];
    NC_CHECK(nc_parse_float_list("0.5", v, 4) == 1 && v[0] == 0.5f, "one value");
    NC_CHECK(nc_parse_float_list("0.485,0.456, 0.406", v, 4) == 3 && v[2] == 0.406f, "three values");
    NC_CHECK(nc_parse_float_list("1,2,3,4,5", v, 4) == -1, "too many");
    NC_CHECK(nc_parse_float_list("1,,2", v, 4) == -1, "empty item");
    NC_CHECK(nc_parse_float_list("abc", v, 4) == -1, "not a number");
    NC_CHECK(nc_parse_float_list("1x", v, 4) == -1, "trailing junk");
    NC_CHECK(nc_parse_float_list("", v, 4) == -1, "empty");
    NC_CHECK(nc_parse_float_list("nan", v, 4) == -1, "nan");
}

int main(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the test's own HDF5 calls stay quiet too */
    if (nc_test_temp_dir(tmp_dir, sizeof tmp_dir, "nc_test_dataset") != 0)
        return 1;
    if (access(NC_FASHION_MNIST_DIR, R_OK) == 0) {
        NC_RUN(test_fashion_mnist_test_split);
        NC_RUN(test_fashion_mnist_train_split);
        NC_RUN(test_mean_std_and_limit);
    } else {
        const char *why = "dataset-fashion-mnist is not installed";
        nc_test_report("test_fashion_mnist_test_split", 0, why);
        nc_test_report("test_fashion_mnist_train_split", 0, why);
        nc_test_report("test_mean_std_and_limit", 0, why);
    }
    NC_RUN(test_idx_gzip_and_plain);
    NC_RUN(test_idx_lying_header);
    NC_RUN(test_idx_truncated_gzip);
    NC_RUN(test_idx_label_count_mismatch);
    NC_RUN(test_idx_bad_magic);
    NC_RUN(test_wrong_path);
    NC_RUN(test_npy_f32_round_trip);
    NC_RUN(test_npy_u8_dataset);
    NC_RUN(test_npy_types);
    NC_RUN(test_npy_errors);
    NC_RUN(test_hdf5_dataset);
    NC_RUN(test_hdf5_errors);
    NC_RUN(test_preprocess_arguments);
    NC_RUN(test_parse_float_list);
    nftw(tmp_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    return nc_test_done();
}
