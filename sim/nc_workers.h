/* nc_workers.h — worker threads that live as long as their owner (the CPU
 * engine, the CPU trainer backend), woken per job instead of started per job
 * (pthread_create + join cost 20–40 µs, a fifth of a small net's pass).
 *
 * A job is a range of rows [0, rows) and a function that does rows [r0, r1);
 * the threads take chunks of `chunk` rows from a shared counter until none
 * are left, so that a thread that gets less of the CPU (another process on
 * the machine) does less of the work instead of holding the others up.  The
 * caller's thread takes part as slot 0; `slot` (0 … threads − 1) lets the
 * function pick a per-thread workspace.  A chunk's index is r0 / chunk:
 * per-chunk buffers (summed in chunk order) give results that do not depend
 * on which thread ran what. */
#ifndef NC_WORKERS_H
#define NC_WORKERS_H

#include <pthread.h>
#include <stdint.h>

#define NC_WORKERS_MAX 64 /* threads of one pool, the caller's included */

typedef struct nc_workers nc_workers;
typedef void (*nc_rows_fn)(void *ctx, int64_t r0, int64_t r1, int slot);

/* An empty pool (threads start on first use); NULL when out of memory. */
nc_workers *nc_workers_new(void);
/* Stops and joins the threads.  NULL is a no-op. */
void nc_workers_free(nc_workers *w);
/* Runs fn over rows [0, rows) on up to `threads` threads (fewer when threads
 * cannot be started: the caller then does their share; w may be NULL: the
 * caller alone).  Returns when every row is done. */
void nc_workers_run(nc_workers *w, int threads, int64_t rows, int64_t chunk, nc_rows_fn fn, void *ctx);
/* The end of a pool of threads that wait on `wake` under `mu` (this one, and
 * the ranks of sim/nc_ranks.c): sets *quit under mu, wakes them, joins the n
 * threads of tids, then destroys mu, wake and done. */
void nc_threads_quit(pthread_mutex_t *mu, pthread_cond_t *wake, pthread_cond_t *done, int *quit, const pthread_t *tids,
                     int n);
/* The threads to use on this machine: `wanted` if > 0, else the cores online,
 * within 1 … NC_WORKERS_MAX. */
int nc_workers_count(int wanted);

#endif
