/* test_faults.c — a full disk during a save leaves the old file intact.
 *
 * Every save path (project, NIR export, recording, .npy, PNG plot) writes a
 * temporary file next to the target, fsyncs it and renames it over the target
 * (core/nc_file.h).  Here the disk "fills up" through RLIMIT_FSIZE: with
 * SIGXFSZ ignored, a write past the limit fails with EFBIG, as on a full
 * disk.  Each case saves version A, then tries to save version B under the
 * limit: the save must fail with a message naming the file, A must be
 * byte-for-byte unchanged and no temporary file may be left; without the
 * limit B then saves (so the comparison could have seen a change). */
#include "nc_test.h"

#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nc_dataset.h"
#include "nc_nir.h"
#include "nc_plot.h"
#include "nc_project.h"
#include "nc_record.h"

#define LIMIT_BYTES 1024 /* far below every file written here */

static struct rlimit saved_limit;

static void disk_full(void)
{
    struct rlimit r;
    getrlimit(RLIMIT_FSIZE, &saved_limit);
    r = saved_limit;
    r.rlim_cur = LIMIT_BYTES;
    NC_CHECK(setrlimit(RLIMIT_FSIZE, &r) == 0, "setrlimit(RLIMIT_FSIZE)");
}

static void disk_free(void) { setrlimit(RLIMIT_FSIZE, &saved_limit); }

typedef struct { unsigned char *data; size_t size; } blob;

static blob read_file(const char *path)
{
    blob b;
    b.data = nc_test_read_file(path, &b.size);
    return b;
}

static int same(blob a, blob b) { return a.size == b.size && (a.size == 0 || memcmp(a.data, b.data, a.size) == 0); }

/* Files in dir whose name holds ".tmp" (a save's leftovers). */
static int leftovers(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp"))
            n++;
    if (d)
        closedir(d);
    return n;
}

/* The save of version B under the limit failed cleanly and A is intact. */
static void check_kept(const char *what, const char *path, blob a, int failed, const char *message)
{
    blob now = read_file(path);
    NC_CHECK(failed, "%s: the save under a full disk reports a failure", what);
    NC_CHECK(strstr(message, path) != NULL, "%s: the message names the file: %s", what, message);
    NC_CHECK(a.size > LIMIT_BYTES, "%s: version A (%zu bytes) is larger than the limit", what, a.size);
    NC_CHECK(same(a, now), "%s: the old file is unchanged (%zu bytes before, %zu after)", what, a.size, now.size);
    NC_CHECK(leftovers(nc_test_dir()) == 0, "%s: no temporary file is left", what);
    printf("# %s: %s\n", what, message);
    free(now.data);
}

/* Then B saves without the limit, and differs from A. */
static void check_b_saves(const char *what, const char *path, blob a, int ok)
{
    blob b = read_file(path);
    NC_CHECK(ok, "%s: version B saves once there is room", what);
    NC_CHECK(!same(a, b), "%s: version B differs from A (the test can see a change)", what);
    free(b.data);
}

static nc_net *snn(void)
{
    char p[4096];
    nc_net *net = NULL;
    nc_error err = {0};
    nc_status st = nc_nir_load(nc_test_path("tests/fixtures/nir_ours/converted_cnn.nir", p, sizeof p), NULL, &net,
                               NULL, &err);
    NC_CHECK(st == NC_OK, "load the test SNN: %s", err.message);
    return net;
}

/* Writes version 0 (A) or 1 (B) of one file; a failure's message in msg. */
typedef nc_status (*save_fn)(void *ctx, int version, const char *path, char *msg, size_t size);

/* A saves; B under a full disk fails cleanly and leaves A as it was
 * (check_kept); then B saves with room and differs from A (check_b_saves). */
static void check_full_disk(const char *what, const char *name, save_fn save, void *ctx)
{
    char path[512], msg[NC_ERROR_MESSAGE_MAX] = "";
    nc_test_file(name, path, sizeof path);
    NC_CHECK(save(ctx, 0, path, msg, sizeof msg) == NC_OK, "%s: save A: %s", what, msg);
    blob a = read_file(path);
    disk_full();
    nc_status st = save(ctx, 1, path, msg, sizeof msg);
    disk_free();
    check_kept(what, path, a, st == NC_ERR_IO, msg);
    check_b_saves(what, path, a, save(ctx, 1, path, msg, sizeof msg) == NC_OK);
    free(a.data);
}

static nc_status with_message(nc_status st, const nc_error *err, char *msg, size_t size)
{
    snprintf(msg, size, "%s", err->message);
    return st;
}

static nc_status save_project(void *ctx, int version, const char *path, char *msg, size_t size)
{
    nc_error err = {0};
    nc_project_set_metric(ctx, "version", version + 1, NULL);
    return with_message(nc_project_save(ctx, path, &err), &err, msg, size);
}

static void test_project_save(void)
{
    nc_project *p = nc_project_new();
    nc_project_set_net(p, snn());
    check_full_disk("project", "model.ncsnn", save_project, p);
    nc_project_free(p);
}

static nc_status export_nir(void *ctx, int version, const char *path, char *msg, size_t size)
{
    nc_error err = {0};
    nc_nir_export_options opts = {.source = version ? "version B" : "version A"};
    return with_message(nc_nir_export(ctx, path, &opts, NULL, &err), &err, msg, size);
}

static void test_nir_export(void)
{
    nc_net *net = snn();
    check_full_disk("NIR export", "model.nir", export_nir, net);
    nc_net_free(net);
}

/* ctx: the records of versions A and B (4 and 5 steps). */
static nc_status save_record(void *ctx, int version, const char *path, char *msg, size_t size)
{
    nc_record *const *records = ctx;
    nc_error err = {0};
    if (!records[version])
        return with_message(NC_ERR_INTERNAL, &err, msg, size);
    return with_message(nc_record_save(records[version], path, &err), &err, msg, size);
}

static void test_record_save(void)
{
    nc_error err = {0};
    nc_net *net = snn();
    nc_record *records[2] = {NULL, NULL};
    NC_CHECK(net && nc_record_new(net, 4, NULL, &records[0], &err) == NC_OK &&
                 nc_record_new(net, 5, NULL, &records[1], &err) == NC_OK,
             "records: %s", err.message);
    check_full_disk("recording", "recording.h5", save_record, records);
    nc_record_free(records[0]);
    nc_record_free(records[1]);
    nc_net_free(net);
}

/* Version A holds ones, B twos. */
static nc_status write_npy(void *ctx, int version, const char *path, char *msg, size_t size)
{
    nc_tensor *t = ctx;
    nc_error err = {0};
    for (int64_t i = 0; i < nc_tensor_numel(t); i++)
        t->data[i] = 1.0f + (float)version;
    return with_message(nc_npy_write(path, t, &err), &err, msg, size);
}

static void test_npy_write(void)
{
    nc_tensor *t = nc_tensor_new2(10, 100);
    check_full_disk(".npy", "values.npy", write_npy, t);
    nc_tensor_free(t);
}

/* Noise compresses badly, so the PNG is far larger than the limit. */
static void draw_noise(cairo_t *cr, double width, double height, void *user)
{
    uint32_t s = *(const uint32_t *)user;
    for (int y = 0; y < (int)height; y += 2)
        for (int x = 0; x < (int)width; x += 2) {
            s = s * 1664525u + 1013904223u;
            cairo_set_source_rgb(cr, (s >> 8 & 255) / 255.0, (s >> 16 & 255) / 255.0, (s >> 24) / 255.0);
            cairo_rectangle(cr, x, y, 2, 2);
            cairo_fill(cr);
        }
}

/* Versions A and B are noise of two seeds. */
static nc_status save_plot(void *ctx, int version, const char *path, char *msg, size_t size)
{
    (void)ctx;
    uint32_t seed = 1 + (uint32_t)version;
    return nc_plot_save(path, 160, 120, draw_noise, &seed, msg, size) == 0 ? NC_OK : NC_ERR_IO;
}

static void test_plot_save(void) { check_full_disk("PNG plot", "chart.png", save_plot, NULL); }

/* A first save that fails leaves nothing at all behind. */
static void test_new_file_not_created(void)
{
    char path[512];
    nc_error err = {0};
    nc_project *p = nc_project_new();
    nc_project_set_net(p, snn());
    nc_test_file("new.ncsnn", path, sizeof path);
    disk_full();
    nc_status st = nc_project_save(p, path, &err);
    disk_free();
    NC_CHECK(st == NC_ERR_IO, "the save fails: %s", err.message);
    NC_CHECK(access(path, F_OK) != 0, "no half-written project appears");
    NC_CHECK(leftovers(nc_test_dir()) == 0, "no temporary file is left");
    nc_project_free(p);
}

int main(void)
{
    signal(SIGXFSZ, SIG_IGN); /* a write past the limit then fails with EFBIG */
    NC_RUN(test_project_save);
    NC_RUN(test_nir_export);
    NC_RUN(test_record_save);
    NC_RUN(test_npy_write);
    NC_RUN(test_plot_save);
    NC_RUN(test_new_file_not_created);
    return nc_test_done();
}
