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

static void test_project_save(void)
{
    char path[512];
    nc_error err = {0};
    nc_project *p = nc_project_new();
    nc_project_set_net(p, snn());
    nc_test_file("model.ncsnn", path, sizeof path);
    nc_project_set_metric(p, "version", 1, NULL);
    NC_CHECK(nc_project_save(p, path, &err) == NC_OK, "save A: %s", err.message);
    blob a = read_file(path);
    nc_project_set_metric(p, "version", 2, NULL);
    disk_full();
    nc_status st = nc_project_save(p, path, &err);
    disk_free();
    check_kept("project", path, a, st == NC_ERR_IO, err.message);
    check_b_saves("project", path, a, nc_project_save(p, path, &err) == NC_OK);
    free(a.data);
    nc_project_free(p);
}

static void test_nir_export(void)
{
    char path[512];
    nc_error err = {0};
    nc_net *net = snn();
    nc_test_file("model.nir", path, sizeof path);
    nc_nir_export_options a_opts = {.source = "version A"}, b_opts = {.source = "version B"};
    NC_CHECK(nc_nir_export(net, path, &a_opts, NULL, &err) == NC_OK, "export A: %s", err.message);
    blob a = read_file(path);
    disk_full();
    nc_status st = nc_nir_export(net, path, &b_opts, NULL, &err);
    disk_free();
    check_kept("NIR export", path, a, st == NC_ERR_IO, err.message);
    check_b_saves("NIR export", path, a, nc_nir_export(net, path, &b_opts, NULL, &err) == NC_OK);
    free(a.data);
    nc_net_free(net);
}

static void test_record_save(void)
{
    char path[512];
    nc_error err = {0};
    nc_net *net = snn();
    nc_record *ra = NULL, *rb = NULL;
    NC_CHECK(net && nc_record_new(net, 4, NULL, &ra, &err) == NC_OK && nc_record_new(net, 5, NULL, &rb, &err) == NC_OK,
             "records: %s", err.message);
    nc_test_file("recording.h5", path, sizeof path);
    NC_CHECK(ra && nc_record_save(ra, path, &err) == NC_OK, "save A: %s", err.message);
    blob a = read_file(path);
    disk_full();
    nc_status st = rb ? nc_record_save(rb, path, &err) : NC_ERR_INTERNAL;
    disk_free();
    check_kept("recording", path, a, st == NC_ERR_IO, err.message);
    check_b_saves("recording", path, a, rb && nc_record_save(rb, path, &err) == NC_OK);
    free(a.data);
    nc_record_free(ra);
    nc_record_free(rb);
    nc_net_free(net);
}

static void test_npy_write(void)
{
    char path[512];
    nc_error err = {0};
    nc_tensor *t = nc_tensor_new2(10, 100);
    nc_test_file("values.npy", path, sizeof path);
    for (int64_t i = 0; i < nc_tensor_numel(t); i++)
        t->data[i] = 1.0f;
    NC_CHECK(nc_npy_write(path, t, &err) == NC_OK, "write A: %s", err.message);
    blob a = read_file(path);
    for (int64_t i = 0; i < nc_tensor_numel(t); i++)
        t->data[i] = 2.0f;
    disk_full();
    nc_status st = nc_npy_write(path, t, &err);
    disk_free();
    check_kept(".npy", path, a, st == NC_ERR_IO, err.message);
    check_b_saves(".npy", path, a, nc_npy_write(path, t, &err) == NC_OK);
    free(a.data);
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

static void test_plot_save(void)
{
    char path[512], msg[1024] = "";
    uint32_t seed_a = 1, seed_b = 2;
    nc_test_file("chart.png", path, sizeof path);
    NC_CHECK(nc_plot_save(path, 160, 120, draw_noise, &seed_a, msg, sizeof msg) == 0, "save A: %s", msg);
    blob a = read_file(path);
    disk_full();
    int rc = nc_plot_save(path, 160, 120, draw_noise, &seed_b, msg, sizeof msg);
    disk_free();
    check_kept("PNG plot", path, a, rc != 0, msg);
    check_b_saves("PNG plot", path, a, nc_plot_save(path, 160, 120, draw_noise, &seed_b, msg, sizeof msg) == 0);
    free(a.data);
}

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
