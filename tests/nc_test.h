/* nc_test.h — a minimal TAP test harness (no GLib, so core/ tests run where
 * only core/ builds).  Usage:
 *
 *   static void test_something(void) { NC_CHECK(1 + 1 == 2, "arithmetic"); }
 *   int main(void) { NC_RUN(test_something); return nc_test_done(); }
 *
 * Each NC_RUN prints "ok N - name" or "not ok N - name"; NC_SKIP prints
 * "ok N - name # SKIP reason".  Failed checks print a diagnostic line with the
 * file and line.  nc_test_done() prints the plan and returns the exit code. */
#ifndef NC_TEST_H
#define NC_TEST_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((unused)) static int nc_test_number;
__attribute__((unused)) static int nc_test_failures;     /* failed tests */
__attribute__((unused)) static int nc_test_current_failed;

#define NC_CHECK(cond, ...)                                                                       \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            nc_test_current_failed = 1;                                                           \
            printf("# FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);                            \
            printf(__VA_ARGS__);                                                                  \
            printf("\n");                                                                         \
        }                                                                                         \
    } while (0)

/* Checks |a − b| ≤ atol + rtol·|b|. */
#define NC_CHECK_CLOSE(a, b, atol, rtol, ...)                                                     \
    do {                                                                                          \
        double nc_a_ = (a), nc_b_ = (b);                                                          \
        if (!(fabs(nc_a_ - nc_b_) <= (atol) + (rtol)*fabs(nc_b_))) {                              \
            nc_test_current_failed = 1;                                                           \
            printf("# FAILED %s:%d: %s = %.9g, expected %.9g: ", __FILE__, __LINE__, #a, nc_a_,   \
                   nc_b_);                                                                        \
            printf(__VA_ARGS__);                                                                  \
            printf("\n");                                                                         \
        }                                                                                         \
    } while (0)

#define NC_RUN(fn)                                                                                \
    do {                                                                                          \
        nc_test_current_failed = 0;                                                               \
        fn();                                                                                     \
        nc_test_number++;                                                                         \
        if (nc_test_current_failed)                                                               \
            nc_test_failures++;                                                                   \
        printf("%s %d - %s\n", nc_test_current_failed ? "not ok" : "ok", nc_test_number, #fn);   \
        fflush(stdout);                                                                           \
    } while (0)

/* Reports a named result computed by the caller (for data-driven tests). */
static inline void nc_test_report(const char *name, int failed, const char *skip_reason)
{
    nc_test_number++;
    if (skip_reason)
        printf("ok %d - %s # SKIP %s\n", nc_test_number, name, skip_reason);
    else {
        if (failed)
            nc_test_failures++;
        printf("%s %d - %s\n", failed ? "not ok" : "ok", nc_test_number, name);
    }
    fflush(stdout);
}

/* The bytes of a file (malloc'ed, *size of them; at least 1 byte is
 * allocated), or NULL when it cannot be opened. */
static inline unsigned char *nc_test_read_file(const char *path, size_t *size)
{
    *size = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    *size = buf && n > 0 ? fread(buf, 1, (size_t)n, fp) : 0;
    fclose(fp);
    return buf;
}

/* A new empty folder for a test's files, $TMPDIR (else /tmp)/<name>-XXXXXX,
 * in buf: 0, or −1 after printing "Bail out!" (the test then exits 1). */
static inline int nc_test_temp_dir(char *buf, size_t size, const char *name)
{
    const char *base = getenv("TMPDIR");
    snprintf(buf, size, "%s/%s-XXXXXX", base && *base ? base : "/tmp", name);
    if (mkdtemp(buf))
        return 0;
    printf("Bail out! cannot make a temporary folder %s\n", buf);
    return -1;
}

/* Removes a test's folder and everything in it. */
static inline void nc_test_remove_dir(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", dir);
}

__attribute__((unused)) static char nc_test_dir_path[512];

/* The test's own temporary folder, made on first use (under $TMPDIR, else
 * /tmp, named after the test program) and removed with everything in it by
 * nc_test_done().  When it cannot be made the test stops ("Bail out!"). */
static inline const char *nc_test_dir(void)
{
    if (!nc_test_dir_path[0] &&
        nc_test_temp_dir(nc_test_dir_path, sizeof nc_test_dir_path, program_invocation_short_name) != 0)
        exit(1);
    return nc_test_dir_path;
}

/* The path of `name` in the test's folder. */
static inline const char *nc_test_file(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", nc_test_dir(), name);
    return buf;
}

static inline int nc_test_done(void)
{
    if (nc_test_dir_path[0])
        nc_test_remove_dir(nc_test_dir_path);
    printf("1..%d\n", nc_test_number);
    return nc_test_failures ? 1 : 0;
}

/* Path of a file under the source tree (tests/fixtures/..., assets/...). */
static inline const char *nc_test_path(const char *relative, char *buf, size_t size)
{
    const char *root = getenv("NC_SOURCE_DIR");
    snprintf(buf, size, "%s/%s", root ? root : ".", relative);
    return buf;
}

#endif
