/* test_workers.c — the engine's worker pool (sim/nc_workers.c): every row of
 * a job is done exactly once, by the slots the job allows, and the call
 * returns only when all are done; whether the caller's wait for the
 * workers' last chunks ends while it spins (quick chunks) or after it went
 * to sleep (chunks longer than its spin), and over many jobs in a row, as a
 * forward pass runs them. */
#include "nc_test.h"

#include "../sim/nc_workers.h"

#include <stdatomic.h>
#include <time.h>

#define MAX_ROWS 4096

typedef struct count_job {
    atomic_int done[MAX_ROWS];
    atomic_int bad_slot;
    int threads;
    double busy_s; /* wall time each row keeps its thread busy */
} count_job;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void count_rows(void *ctx, int64_t r0, int64_t r1, int slot)
{
    count_job *j = ctx;
    if (slot < 0 || slot >= j->threads)
        atomic_fetch_add(&j->bad_slot, 1);
    for (int64_t r = r0; r < r1; r++) {
        double until = now_s() + j->busy_s;
        while (j->busy_s > 0 && now_s() < until)
            ;
        atomic_fetch_add(&j->done[r], 1);
    }
}

/* One job; returns the number of rows not done exactly once (and of calls
 * from a slot out of range). */
static int run_job(nc_workers *w, int threads, int64_t rows, int64_t chunk, double busy_s)
{
    static count_job j;
    for (int64_t r = 0; r < MAX_ROWS; r++)
        atomic_init(&j.done[r], 0);
    atomic_init(&j.bad_slot, 0);
    j.threads = threads;
    j.busy_s = busy_s;
    nc_workers_run(w, threads, rows, chunk, count_rows, &j);
    int bad = atomic_load(&j.bad_slot);
    for (int64_t r = 0; r < MAX_ROWS; r++) /* read after the call returned: all must be there */
        bad += atomic_load(&j.done[r]) != (r < rows);
    return bad;
}

static void test_quick_jobs(void)
{
    nc_workers *w = nc_workers_new();
    NC_CHECK(w != NULL, "a pool");
    int bad = 0;
    /* many short jobs in a row: the caller's wait mostly ends while it spins */
    for (int k = 0; k < 2000; k++)
        bad += run_job(w, 1 + k % 4, 1 + (k * 37) % MAX_ROWS, 1 + k % 64, 0.0);
    NC_CHECK(bad == 0, "%d rows done other than once (or slots out of range)", bad);
    nc_workers_free(w);
}

static void test_slow_chunks(void)
{
    nc_workers *w = nc_workers_new();
    int bad = 0;
    /* chunks of 0.2–1 ms: longer than the caller spins, so it sleeps and
     * the last worker wakes it; then quick jobs again */
    for (int k = 0; k < 20; k++) {
        bad += run_job(w, 2 + k % 3, 4 + k % 5, 1, 2e-4 * (1 + k % 5));
        bad += run_job(w, 2, 64, 4, 0.0);
    }
    NC_CHECK(bad == 0, "%d rows done other than once", bad);
    nc_workers_free(w);
}

static void test_no_pool(void)
{
    /* NULL pool, or one thread: the caller does every chunk itself */
    NC_CHECK(run_job(NULL, 4, 1000, 7, 0.0) == 0, "no pool");
    nc_workers *w = nc_workers_new();
    NC_CHECK(run_job(w, 1, 1000, 7, 0.0) == 0, "one thread");
    NC_CHECK(run_job(w, 3, 0, 7, 0.0) == 0, "no rows");
    nc_workers_free(w);
    nc_workers_free(NULL);
}

int main(void)
{
    NC_RUN(test_quick_jobs);
    NC_RUN(test_slow_chunks);
    NC_RUN(test_no_pool);
    return nc_test_done();
}
