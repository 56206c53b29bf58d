/* test_limits.c — declared sizes against real sizes and the memory budget,
 * overflow-proof size arithmetic, and HDF5 features that would make a reader
 * open other files (the hardening issue).  One case per gap that fuzzing or
 * the audit of the readers found; each fails on the code before its fix. */
#include "nc_test.h"

#include <limits.h>

#include <hdf5.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "nc_dataset.h"
#include "nc_h5util.h"
#include "nc_net.h"
#include "nc_nir.h"
#include "nc_onnx.h"
#include "nc_record.h"
#include "onnx.pb-c.h"

static void write_bytes(const char *path, const void *data, size_t size)
{
    FILE *fp = fopen(path, "wb");
    NC_CHECK(fp && fwrite(data, 1, size, fp) == size, "write %s", path);
    if (fp)
        fclose(fp);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

/* Opens the test split of the dataset at `path` (a hostile file: it must be
 * refused) and says how long the refusal took, in seconds. */
static double open_refused(const char *path, nc_status *st, nc_error *err)
{
    nc_dataset *ds = NULL;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    *st = nc_dataset_open(path, NC_SPLIT_TEST, NULL, 0, &ds, err);
    double took = seconds_since(&t0);
    nc_dataset_free(ds);
    return took;
}

/* ---- size arithmetic ------------------------------------------------------ */

static void test_checked_multiply(void)
{
    size_t out = 7;
    NC_CHECK(nc_mul_size(SIZE_MAX / 2 + 1, 2, &out) != 0 && out == 7, "SIZE_MAX overflow is refused, out untouched");
    NC_CHECK(nc_mul_size(0, SIZE_MAX, &out) == 0 && out == 0, "0 × anything");
    NC_CHECK(nc_add_size(SIZE_MAX, 1, &out) != 0, "add overflow");
    int64_t dims[4] = {1 << 20, 1 << 20, 1 << 20, 1 << 20};
    NC_CHECK(nc_shape_bytes(4, dims, 4, &out) != 0, "2^80 × 4 bytes overflows");
    int64_t neg[2] = {3, -1};
    NC_CHECK(nc_shape_bytes(2, neg, 4, &out) != 0, "a negative dimension is refused");
    int64_t ok[3] = {2, 3, 4};
    NC_CHECK(nc_shape_bytes(3, ok, 8, &out) == 0 && out == 192, "2·3·4·8 = 192, got %zu", out);
    NC_CHECK(nc_shape_bytes(0, NULL, 4, &out) == 0 && out == 4, "a scalar is one element");
}

/* A growing array: first size, doubling when full, untouched while there is
 * room, and a capacity that would overflow refused. */
static void test_grow(void)
{
    int cap = 0;
    int *a = nc_grow(NULL, 0, &cap, 4, sizeof *a);
    NC_CHECK(a && cap == 4, "an empty array gets `first` items (%d)", cap);
    int *same = nc_grow(a, 3, &cap, 4, sizeof *a);
    NC_CHECK(same == a && cap == 4, "no change while there is room");
    for (int i = 0; i < 4; i++)
        a[i] = i + 1;
    int *b = nc_grow(a, 4, &cap, 4, sizeof *b);
    NC_CHECK(b && cap == 8 && b[3] == 4, "a full array doubles and keeps its items (%d)", cap);
    a = b ? b : a;
    int huge = INT_MAX / 2 + 1;
    NC_CHECK(!nc_grow(a, huge, &huge, 4, sizeof *a) && huge == INT_MAX / 2 + 1, "an int overflow is refused");
    free(a);
    char **texts = NULL;
    int n = 0, room = 0, fails = 0;
    for (int i = 0; i < 40; i++)
        fails += nc_strings_add(&texts, &n, &room, i % 2 ? "odd" : "even") != 0;
    NC_CHECK(!fails && n == 40 && room >= 40 && strcmp(texts[39], "odd") == 0 && texts[0] != texts[2],
             "40 copies of strings appended (%d, room %d)", n, room);
    nc_strings_free(texts, n);
}

static void test_memory_budget_setting(void)
{
    nc_error err = {0};
    setenv("NC_MEMORY_BUDGET", "3M", 1);
    nc_set_memory_budget(0); /* read the environment again */
    NC_CHECK(nc_memory_budget() == (size_t)3 << 20, "NC_MEMORY_BUDGET=3M gives %zu", nc_memory_budget());
    NC_CHECK(nc_budget_check((size_t)4 << 20, "dataset 'x'", &err) == NC_ERR_MEMORY, "4 MiB is over a 3 MiB budget");
    NC_CHECK(strstr(err.message, "dataset 'x'") && strstr(err.message, "NC_MEMORY_BUDGET"),
             "the message names the object and the way out: %s", err.message);
    setenv("NC_MEMORY_BUDGET", "lots", 1);
    nc_set_memory_budget(0);
    NC_CHECK(nc_memory_budget() == NC_MEMORY_BUDGET_DEFAULT, "an unreadable value keeps the default");
    unsetenv("NC_MEMORY_BUDGET");
    nc_set_memory_budget(12345);
    NC_CHECK(nc_memory_budget() == 12345, "nc_set_memory_budget");
    nc_set_memory_budget(0);
    NC_CHECK(nc_memory_budget() == NC_MEMORY_BUDGET_DEFAULT, "0 restores the default");
}

/* ---- ONNX --------------------------------------------------------------- */

/* A TensorProto file declaring `dims` floats but holding 16 raw bytes. */
static void write_tensor_file(const char *path, int n, int64_t *dims)
{
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    uint8_t raw[16] = {0};
    t.n_dims = (size_t)n;
    t.dims = dims;
    t.has_data_type = 1;
    t.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t.has_raw_data = 1;
    t.raw_data.len = sizeof raw;
    t.raw_data.data = raw;
    size_t size = onnx__tensor_proto__get_packed_size(&t);
    uint8_t *buf = malloc(size);
    onnx__tensor_proto__pack(&t, buf);
    write_bytes(path, buf, size);
    free(buf);
}

static void test_onnx_tensor_declared_size(void)
{
    char path[512];
    nc_tensor *t = NULL;
    nc_error err = {0};
    /* 2^28 floats = 1 GiB declared, 16 bytes held: refused before allocating (it was allocated first) */
    int64_t big[2] = {1 << 14, 1 << 14};
    write_tensor_file(nc_test_file("big.pb", path, sizeof path), 2, big);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    nc_status st = nc_onnx_read_tensor_file(path, &t, &err);
    NC_CHECK(st == NC_ERR_FORMAT && strstr(err.message, "16 bytes of raw data"),
             "declared 1 GiB, held 16 bytes: NC_ERR_FORMAT, got %d: %s", (int)st, err.message);
    NC_CHECK(seconds_since(&t0) < 1.0, "refused at once (%.2f s)", seconds_since(&t0));
    /* more than the budget: NC_ERR_MEMORY naming the budget */
    nc_set_memory_budget((size_t)64 << 20);
    st = nc_onnx_read_tensor_file(path, &t, &err);
    nc_set_memory_budget(0);
    NC_CHECK(st == NC_ERR_MEMORY && strstr(err.message, "memory budget"), "over a 64 MiB budget: %s", err.message);
    /* 2^70 elements: the count overflows */
    int64_t huge[3] = {1 << 30, 1 << 30, 1 << 10};
    write_tensor_file(path, 3, huge);
    st = nc_onnx_read_tensor_file(path, &t, &err);
    NC_CHECK(st == NC_ERR_MEMORY && strstr(err.message, "overflows"), "2^70 elements: %s", err.message);
    NC_CHECK(t == NULL, "no tensor");
}

/* ok_external.onnx with the external offset of 'w2' replaced. */
static void write_external_model(const char *offset, char *model, size_t size)
{
    char src[4096], data_src[4096], data_dst[512];
    FILE *fp = fopen(nc_test_path("tests/fixtures/onnx_bad/ok_external.onnx", src, sizeof src), "rb");
    uint8_t buf[65536];
    size_t n = fp ? fread(buf, 1, sizeof buf, fp) : 0;
    if (fp)
        fclose(fp);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, n, buf);
    NC_CHECK(m && m->graph, "unpack ok_external.onnx");
    if (!m)
        return;
    for (size_t i = 0; i < m->graph->n_initializer; i++) {
        Onnx__TensorProto *t = m->graph->initializer[i];
        for (size_t k = 0; strcmp(t->name, "w2") == 0 && k < t->n_external_data; k++)
            if (strcmp(t->external_data[k]->key, "offset") == 0) {
                free(t->external_data[k]->value);
                t->external_data[k]->value = strdup(offset);
            }
    }
    size_t packed = onnx__model_proto__get_packed_size(m);
    uint8_t *out = malloc(packed);
    onnx__model_proto__pack(m, out);
    write_bytes(nc_test_file("ok_external.onnx", model, size), out, packed);
    free(out);
    onnx__model_proto__free_unpacked(m, NULL);
    /* the data file next to it, as the model names it */
    nc_test_path("tests/fixtures/onnx_bad/ok_external.onnx.data", data_src, sizeof data_src);
    fp = fopen(data_src, "rb");
    n = fp ? fread(buf, 1, sizeof buf, fp) : 0;
    if (fp)
        fclose(fp);
    write_bytes(nc_test_file("ok_external.onnx.data", data_dst, sizeof data_dst), buf, n);
}

static void test_onnx_external_offset(void)
{
    char model[512];
    const char *offsets[] = {"18446744073709551000", "9223372036854775807", "600"};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
        nc_net *net = NULL;
        nc_error err = {0};
        write_external_model(offsets[i], model, sizeof model);
        nc_status st = nc_onnx_load(model, NULL, &net, &err);
        NC_CHECK(st == NC_ERR_FORMAT && strstr(err.message, "runs past the end") && strstr(err.message, "'w2'"),
                 "offset %s + length 384 past a 640-byte file: %s", offsets[i], err.message);
        nc_net_free(net);
    }
    write_external_model("256", model, sizeof model);
    nc_net *net = NULL;
    nc_error err = {0};
    NC_CHECK(nc_onnx_load(model, NULL, &net, &err) == NC_OK, "the real offset loads: %s", err.message);
    nc_net_free(net);
}

/* ---- HDF5 ------------------------------------------------------------------ */

static hid_t new_h5(const char *path)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
}

/* A dataset of `type` and `dims` with the given creation properties. */
static void add_dataset(hid_t file, const char *name, hid_t type, int ndim, const hsize_t *dims, hid_t dcpl,
                        const void *data)
{
    hid_t space = H5Screate_simple(ndim, dims, NULL);
    hid_t d = H5Dcreate2(file, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    NC_CHECK(d >= 0, "create dataset %s", name);
    if (data)
        H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    H5Dclose(d);
    H5Sclose(space);
}

static void test_hdf5_dataset_declared_extent(void)
{
    char path[512];
    /* a chunked x of 10^6 images whose chunks were never written: a tiny file
     * that reads as fill values; it used to be allocated (3 GiB) and read */
    hid_t f = new_h5(nc_test_file("fill.h5", path, sizeof path));
    hsize_t xd[3] = {1000000, 28, 28}, chunk[3] = {1, 28, 28}, yd[1] = {1000000};
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 3, chunk);
    add_dataset(f, "x", H5T_NATIVE_UINT8, 3, xd, dcpl, NULL);
    H5Pclose(dcpl);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, yd);
    add_dataset(f, "y", H5T_NATIVE_UINT8, 1, yd, dcpl, NULL);
    H5Pclose(dcpl);
    H5Fclose(f);
    nc_error err = {0};
    nc_status st;
    double took = open_refused(path, &st, &err);
    NC_CHECK(st == NC_ERR_FORMAT && strstr(err.message, "'x'") && strstr(err.message, "declares"),
             "unwritten chunks are refused: %d: %s", (int)st, err.message);
    NC_CHECK(took < 2.0, "at once (%.2f s)", took);
    struct stat sb;
    NC_CHECK(stat(path, &sb) == 0 && sb.st_size < 100000, "the file is small (%lld bytes)", (long long)sb.st_size);
}

static void test_hdf5_odd_element_type(void)
{
    char path[512];
    hid_t f = new_h5(nc_test_file("ldouble.h5", path, sizeof path));
    hsize_t xd[3] = {2, 2, 2}, yd[1] = {2};
    long double x[8] = {0};
    uint8_t y[2] = {0, 1};
    add_dataset(f, "x", H5T_NATIVE_LDOUBLE, 3, xd, H5P_DEFAULT, x);
    add_dataset(f, "y", H5T_NATIVE_UINT8, 1, yd, H5P_DEFAULT, y);
    H5Fclose(f);
    nc_dataset *ds = NULL;
    nc_error err = {0};
    nc_status st = nc_dataset_open(path, NC_SPLIT_TEST, NULL, 0, &ds, &err);
    NC_CHECK(st == NC_ERR_UNSUPPORTED && strstr(err.message, "IEEE floats"), "a 16-byte float x: %s", err.message);
    nc_dataset_free(ds);
    hid_t file;
    float *data = NULL;
    NC_CHECK(nc_h5_open_read(path, &file, &err) == NC_OK, "open: %s", err.message);
    st = nc_h5_read_f32(file, "x", 3, NULL, NULL, &data, &err);
    NC_CHECK(st == NC_ERR_FORMAT && strstr(err.message, "not numeric"), "nc_h5_read_f32 refuses it: %s", err.message);
    free(data);
    nc_h5_close(&file);
}

/* The three ways an HDF5 file can make a reader open another file. */
static void make_foreign_file(const char *path, const char *kind)
{
    char other[512];
    hsize_t xd[3] = {1, 2, 2};
    float v[4] = {1, 2, 3, 4};
    uint8_t y[1] = {0};
    hid_t f = new_h5(nc_test_file("other.h5", other, sizeof other));
    add_dataset(f, "x", H5T_NATIVE_FLOAT, 3, xd, H5P_DEFAULT, v);
    H5Fclose(f);
    f = new_h5(path);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (strcmp(kind, "external link") == 0) {
        H5Lcreate_external(other, "x", f, "x", H5P_DEFAULT, H5P_DEFAULT);
    } else if (strcmp(kind, "external storage") == 0) {
        char raw[512];
        write_bytes(nc_test_file("raw.bin", raw, sizeof raw), v, sizeof v);
        H5Pset_external(dcpl, raw, 0, sizeof v);
        add_dataset(f, "x", H5T_NATIVE_FLOAT, 3, xd, dcpl, NULL);
    } else { /* virtual */
        hid_t vspace = H5Screate_simple(3, xd, NULL), src = H5Screate_simple(3, xd, NULL);
        H5Pset_virtual(dcpl, vspace, other, "x", src);
        add_dataset(f, "x", H5T_NATIVE_FLOAT, 3, xd, dcpl, NULL);
        H5Sclose(vspace);
        H5Sclose(src);
    }
    H5Pclose(dcpl);
    add_dataset(f, "y", H5T_NATIVE_UINT8, 1, (hsize_t[]){1}, H5P_DEFAULT, y);
    H5Fclose(f);
}

static void test_hdf5_foreign_storage_refused(void)
{
    const char *kinds[] = {"external link", "external storage", "virtual dataset"};
    for (size_t i = 0; i < 3; i++) {
        char path[512];
        make_foreign_file(nc_test_file("foreign.h5", path, sizeof path), kinds[i]);
        /* the dataset reader */
        nc_dataset *ds = NULL;
        nc_error err = {0};
        nc_status st = nc_dataset_open(path, NC_SPLIT_TEST, NULL, 0, &ds, &err);
        NC_CHECK(st != NC_OK && (strstr(err.message, "link") || strstr(err.message, "other files")),
                 "dataset reader, %s: refused with a reason: %s", kinds[i], err.message);
        nc_dataset_free(ds);
        /* the readers of project files, recordings and NIR (nc_h5util) */
        hid_t file;
        float *data = NULL;
        NC_CHECK(nc_h5_open_read(path, &file, &err) == NC_OK, "open: %s", err.message);
        st = nc_h5_read_f32(file, "x", 3, NULL, NULL, &data, &err);
        NC_CHECK(st == NC_ERR_FORMAT && strstr(err.message, "refused"), "nc_h5util, %s: %s", kinds[i], err.message);
        free(data);
        nc_h5_close(&file);
    }
}

/* ---- IDX -------------------------------------------------------------------- */

static void test_idx_gzip_bomb(void)
{
    char images[512], labels[512];
    /* declares 2 images of 28x28 (1568 bytes) but inflates to 256 MiB */
    nc_test_file("bomb-images-idx3-ubyte.gz", images, sizeof images);
    nc_test_file("bomb-labels-idx1-ubyte.gz", labels, sizeof labels);
    gzFile gz = gzopen(images, "wb9");
    uint8_t head[16] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28};
    gzwrite(gz, head, sizeof head);
    static uint8_t zeros[1 << 20];
    for (int i = 0; i < 256; i++)
        gzwrite(gz, zeros, sizeof zeros);
    gzclose(gz);
    gz = gzopen(labels, "wb");
    uint8_t lab[10] = {0, 0, 8, 1, 0, 0, 0, 2, 1, 2};
    gzwrite(gz, lab, sizeof lab);
    gzclose(gz);
    nc_error err = {0};
    nc_status st;
    double took = open_refused(images, &st, &err);
    NC_CHECK(st == NC_ERR_FORMAT && strstr(err.message, "holds more data"), "refused: %s", err.message);
    NC_CHECK(took < 0.5, "without inflating it all (%.2f s)", took);
    unlink(images);
    unlink(labels);
}

/* ---- network shapes ------------------------------------------------------------ */

static nc_net *chain(int64_t c, int64_t h, int64_t w)
{
    nc_net *net = nc_net_new();
    int i = nc_net_add_node(net, NC_NODE_INPUT, "x", 0, NULL);
    net->nodes[i].ndim = 3;
    net->nodes[i].shape[0] = c, net->nodes[i].shape[1] = h, net->nodes[i].shape[2] = w;
    int f = nc_net_add_node(net, NC_NODE_FLATTEN, "flat", 1, &i);
    nc_net_add_node(net, NC_NODE_OUTPUT, "out", 1, &f);
    return net;
}

static void test_net_shape_limits(void)
{
    nc_error err = {0};
    nc_net *net = chain(1 << 20, 1 << 20, 1 << 20); /* 2^60 values per sample */
    nc_status st = nc_net_infer_shapes(net, &err);
    NC_CHECK(st == NC_ERR_SHAPE && strstr(err.message, "larger than this program handles"), "2^60 values: %s",
             err.message);
    nc_net_free(net);
    net = chain(1, 1 << 16, 1 << 16); /* 2^32 values: over NC_MAX_NODE_NUMEL */
    st = nc_net_infer_shapes(net, &err);
    NC_CHECK(st == NC_ERR_SHAPE, "2^32 values per sample: %s", err.message);
    nc_net_free(net);
    net = chain(1, 28, 28);
    NC_CHECK(nc_net_infer_shapes(net, &err) == NC_OK, "a normal image: %s", err.message);
    nc_net_free(net);
    /* a dense layer whose weight has an empty dimension (any other then fits) */
    nc_net *d = nc_net_new();
    int x = nc_net_add_node(d, NC_NODE_INPUT, "x", 0, NULL);
    d->nodes[x].ndim = 1;
    d->nodes[x].shape[0] = 4;
    int fc = nc_net_add_node(d, NC_NODE_DENSE, "fc", 1, &x);
    d->nodes[fc].weight = nc_tensor_new2(0, 4);
    nc_net_add_node(d, NC_NODE_OUTPUT, "out", 1, &fc);
    st = nc_net_infer_shapes(d, &err);
    NC_CHECK(st == NC_ERR_SHAPE && strstr(err.message, "'fc'"), "a [0, 4] weight: %s", err.message);
    nc_net_free(d);
}

static void test_macs_saturate(void)
{
    /* shapes set by hand, past what infer allows: the cost functions must
     * saturate, not overflow (signed overflow is undefined behaviour) */
    nc_net *net = nc_net_new();
    int x = nc_net_add_node(net, NC_NODE_INPUT, "x", 0, NULL);
    int c = nc_net_add_node(net, NC_NODE_CONV2D, "conv", 1, &x);
    nc_net_add_node(net, NC_NODE_OUTPUT, "out", 1, &c);
    nc_node *n = &net->nodes[c];
    n->ndim = 3;
    n->shape[0] = n->shape[1] = n->shape[2] = (int64_t)1 << 20;
    n->weight = nc_tensor_new4(1, 1, 1, 1);
    n->weight->shape[1] = (int64_t)1 << 40; /* a lie, never read as data */
    n->kernel[0] = n->kernel[1] = 1 << 20;
    NC_CHECK(nc_node_macs(net, c) == INT64_MAX, "MACs saturate at INT64_MAX, got %lld", (long long)nc_node_macs(net, c));
    NC_CHECK(nc_net_macs(net) == INT64_MAX, "the net's MACs too");
    n->weight->shape[1] = 1;
    nc_net_free(net);
}

static void test_fanout_linear(void)
{
    /* 60 adds, each reading the one before twice: following every path
     * meant 2^60 steps */
    nc_net *net = nc_net_new();
    int prev = nc_net_add_node(net, NC_NODE_INPUT, "x", 0, NULL);
    net->nodes[prev].ndim = 1;
    net->nodes[prev].shape[0] = 4;
    for (int i = 0; i < 60; i++) {
        char name[32];
        snprintf(name, sizeof name, "add%d", i);
        int in[2] = {prev, prev};
        prev = nc_net_add_node(net, NC_NODE_ADD, name, 2, in);
    }
    int fc = nc_net_add_node(net, NC_NODE_DENSE, "fc", 1, &prev);
    net->nodes[fc].weight = nc_tensor_new2(3, 4);
    nc_net_add_node(net, NC_NODE_OUTPUT, "out", 1, &fc);
    nc_error err = {0};
    NC_CHECK(nc_net_infer_shapes(net, &err) == NC_OK, "infer: %s", err.message);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double fan = nc_node_fanout(net, 0);
    NC_CHECK(seconds_since(&t0) < 0.5, "fan-out in linear time (%.2f s)", seconds_since(&t0));
    NC_CHECK(fan > 0, "fan-out %g", fan);
    nc_net_free(net);
}

/* ---- recordings ---------------------------------------------------------------- */

static void test_recording_reader(void)
{
    char path[512], nir[4096];
    nc_net *net = NULL;
    nc_error err = {0};
    NC_CHECK(nc_nir_load(nc_test_path("tests/fixtures/nir_ours/converted_cnn.nir", nir, sizeof nir), NULL, &net, NULL,
                         &err) == NC_OK,
             "SNN: %s", err.message);
    nc_record *rec = NULL;
    NC_CHECK(net && nc_record_new(net, 6, NULL, &rec, &err) == NC_OK, "record: %s", err.message);
    nc_test_file("rec.h5", path, sizeof path);
    NC_CHECK(rec && nc_record_save(rec, path, &err) == NC_OK, "save: %s", err.message);
    nc_recording *r = NULL;
    NC_CHECK(nc_recording_probe(path) == 1, "probe says recording");
    NC_CHECK(nc_recording_load(path, &r, &err) == NC_OK, "load: %s", err.message);
    NC_CHECK(r && r->T == 6 && r->samples == 0 && r->n_layers == nc_record_layer_count(rec), "T, samples, layers");
    nc_recording_free(r);
    /* damage one attribute at a time */
    struct { const char *attr; int64_t value; nc_status want; const char *says; } cases[] = {
        {"version", 2, NC_ERR_UNSUPPORTED, "version 2"},
        {"T", 0, NC_ERR_FORMAT, "'T'"},
        {"T", 2000000, NC_ERR_FORMAT, "'T'"},
        {"samples", -5, NC_ERR_FORMAT, "'samples'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        NC_CHECK(nc_record_save(rec, path, &err) == NC_OK, "save: %s", err.message);
        hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
        H5Adelete(f, cases[i].attr);
        nc_h5_attr_i64(f, cases[i].attr, cases[i].value, NULL);
        H5Fclose(f);
        r = NULL;
        nc_status st = nc_recording_load(path, &r, &err);
        NC_CHECK(st == cases[i].want && strstr(err.message, cases[i].says) && strstr(err.message, path),
                 "%s = %lld: %s", cases[i].attr, (long long)cases[i].value, err.message);
        NC_CHECK(r == NULL, "nothing returned");
    }
    nc_record_free(rec);
    nc_net_free(net);
    NC_CHECK(nc_recording_probe("/nonexistent.h5") == 0, "probe of a missing file");
}

int main(void)
{
    NC_RUN(test_checked_multiply);
    NC_RUN(test_grow);
    NC_RUN(test_memory_budget_setting);
    NC_RUN(test_onnx_tensor_declared_size);
    NC_RUN(test_onnx_external_offset);
    NC_RUN(test_hdf5_dataset_declared_extent);
    NC_RUN(test_hdf5_odd_element_type);
    NC_RUN(test_hdf5_foreign_storage_refused);
    NC_RUN(test_idx_gzip_bomb);
    NC_RUN(test_net_shape_limits);
    NC_RUN(test_macs_saturate);
    NC_RUN(test_fanout_linear);
    NC_RUN(test_recording_reader);
    return nc_test_done();
}
