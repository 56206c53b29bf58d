/* regress_main.c — runs a fuzz harness on files, as a TAP test.
 *
 * Usage: regress_<target> FOLDER|FILE...  Every regular file of every folder
 * (sorted by name; README* and dot files skipped) is passed once to the
 * harness's LLVMFuzzerTestOneInput, exactly as libFuzzer would.  A crash,
 * a sanitizer report or a leak fails the test; "ok" means the reader
 * returned.  A missing folder counts as empty. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

typedef struct { char **paths; size_t n, cap; } file_list;

static void add(file_list *l, const char *path)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->paths = realloc(l->paths, l->cap * sizeof *l->paths);
        if (!l->paths)
            abort();
    }
    if (!(l->paths[l->n++] = strdup(path)))
        abort();
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void scan(file_list *l, const char *folder)
{
    char dir[4096]; /* absolute: a harness may change the working folder */
    struct stat fst;
    if (!realpath(folder, dir))
        return;
    if (stat(dir, &fst) == 0 && S_ISREG(fst.st_mode)) { /* a file given directly */
        add(l, dir);
        return;
    }
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t first = l->n;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[4096];
        struct stat st;
        if (e->d_name[0] == '.' || strncmp(e->d_name, "README", 6) == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            add(l, path);
    }
    closedir(d);
    qsort(l->paths + first, l->n - first, sizeof *l->paths, by_name);
}

static unsigned char *read_all(const char *path, size_t *size)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n == cap) {
            cap = cap ? 2 * cap : 65536;
            unsigned char *more = realloc(buf, cap);
            if (!more)
                abort();
            buf = more;
        }
        got = fread(buf + n, 1, cap - n, fp);
        n += got;
    } while (got > 0);
    fclose(fp);
    *size = n;
    return buf;
}

int main(int argc, char **argv)
{
    file_list files = {0};
    for (int i = 1; i < argc; i++)
        scan(&files, argv[i]);
    LLVMFuzzerInitialize(&argc, &argv);
    if (files.n == 0) {
        printf("1..0 # SKIP no input files\n");
        return 0;
    }
    printf("1..%zu\n", files.n);
    fflush(stdout);
    int failed = 0;
    for (size_t i = 0; i < files.n; i++) {
        size_t size = 0;
        unsigned char *data = read_all(files.paths[i], &size);
        if (!data) {
            printf("not ok %zu - %s: cannot be read\n", i + 1, files.paths[i]);
            failed = 1;
            continue;
        }
        LLVMFuzzerTestOneInput(data, size);
        free(data);
        printf("ok %zu - %s\n", i + 1, files.paths[i]);
        fflush(stdout);
        free(files.paths[i]);
    }
    free(files.paths);
    return failed;
}
