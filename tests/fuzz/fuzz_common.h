/* fuzz_common.h — what the libFuzzer harnesses of tests/fuzz/ share.
 *
 * Every harness defines LLVMFuzzerTestOneInput; the readers share
 * LLVMFuzzerInitialize (fuzz_init.c), fuzz_cli.c has its own.
 * The same file is linked two ways (tests/fuzz/meson.build):
 *   - with libFuzzer (clang, -fsanitize=fuzzer) by tools/fuzz.sh, and
 *   - with regress_main.c into a normal test that feeds it every file of the
 *     seed corpus and of tests/fuzz/regressions/<target>/ (the crashers).
 *
 * The readers take paths, so an input is written to a private temporary
 * folder first.  Inputs that stand for several files (a model and its
 * external data, IDX images and labels) hold the parts one after another,
 * separated by FUZZ_SPLIT. */
#ifndef NC_FUZZ_COMMON_H
#define NC_FUZZ_COMMON_H

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nc_status.h"

#define FUZZ_SPLIT "@@NC-SPLIT@@"

static char fuzz_dir_path[512];

/* Empties and removes the folder at exit (it holds plain files only). */
static inline void fuzz_dir_cleanup(void)
{
    DIR *d = opendir(fuzz_dir_path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[1024];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", fuzz_dir_path, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(fuzz_dir_path);
}

/* A folder of our own for the files of one input (created once). */
static inline const char *fuzz_dir(void)
{
    char *dir = fuzz_dir_path;
    const size_t size = sizeof fuzz_dir_path;
    if (!dir[0]) {
        const char *base = getenv("NC_FUZZ_TMP");
        if (!base || !*base)
            base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, size, "%s/ncfuzz-XXXXXX", base);
        if (!mkdtemp(dir)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fuzz_dir_cleanup);
    }
    return dir;
}

/* Writes data to <fuzz_dir>/<name>; the full path goes to path. */
static inline void fuzz_write(const char *name, const uint8_t *data, size_t size, char *path, size_t path_size)
{
    snprintf(path, path_size, "%s/%s", fuzz_dir(), name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror("fuzz: open");
        abort();
    }
    for (size_t done = 0; done < size;) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) {
            perror("fuzz: write");
            abort();
        }
        done += (size_t)n;
    }
    close(fd);
}

/* Removes <fuzz_dir>/<name> (after an input, so that the next starts clean). */
static inline void fuzz_remove(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    unlink(path);
}

/* Splits the input at FUZZ_SPLIT into at most max parts; returns how many
 * (1 when there is no separator).  parts point into data. */
static inline int fuzz_split(const uint8_t *data, size_t size, const uint8_t **parts, size_t *sizes, int max)
{
    const size_t sep = sizeof FUZZ_SPLIT - 1;
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; n < max - 1 && i + sep <= size; i++)
        if (memcmp(data + i, FUZZ_SPLIT, sep) == 0) {
            parts[n] = data + start;
            sizes[n++] = i - start;
            start = i + sep;
            i += sep - 1;
        }
    parts[n] = data + start;
    sizes[n++] = size - start;
    return n;
}

/* Budget for what one input may make a reader allocate: far above any seed,
 * far below libFuzzer's -malloc_limit_mb (tools/fuzz.sh), so that a reader
 * that allocates a declared size without checking it is caught.  A hang of
 * libhdf5 in the HDF5 probe child ends after NC_H5_PROBE_TIMEOUT seconds. */
#define FUZZ_MEMORY_BUDGET ((size_t)64 << 20)

static inline void fuzz_init_budget(void)
{
    nc_set_memory_budget(FUZZ_MEMORY_BUDGET);
    setenv("NC_H5_PROBE_TIMEOUT", "10", 0);
}

#endif

#ifdef NC_FUZZ_WANT_NET
#include "nc_net.h"
/* Touches what `neurocuda info` computes from a loaded net (sizes, MACs,
 * fan-out), so that a net a reader accepted cannot make them overflow. */
static inline void fuzz_use_net(const nc_net *net)
{
    volatile int64_t sink = nc_net_macs(net) + nc_net_params(net);
    for (int i = 0; i < net->n_nodes; i++) {
        sink += nc_node_numel(&net->nodes[i]) + nc_node_channels(&net->nodes[i]) + nc_net_consumers(net, i);
        sink += (int64_t)nc_node_fanout(net, i);
    }
    (void)sink;
    nc_net_free(nc_net_clone(net));
}
#endif
