/* nc_workers.c — see nc_workers.h. */
#include "nc_workers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* One job: its rows, handed out in chunks from `next`. */
typedef struct job_queue {
    nc_rows_fn fn;
    void *ctx;
    int64_t rows, chunk;
    atomic_llong next;
} job_queue;

/* Worker k (1 … n) takes part in a job when k < the job's thread count; it
 * spins a little after a job, as the next one usually follows within
 * microseconds (the next layer), then sleeps.  The caller, once its own
 * chunks are done, spins too while the workers finish theirs before it
 * sleeps: on a VM, waking a thread that sleeps costs tens of microseconds
 * (its virtual CPU halts), more than a small layer's whole job. */
struct nc_workers {
    pthread_t tid[NC_WORKERS_MAX];
    int n;                  /* workers started                          */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    job_queue *q;           /* the current job                          */
    int threads;            /* its thread count (the caller is slot 0)  */
    atomic_uint generation; /* +1 per job                               */
    atomic_int busy;        /* workers still draining the current job   */
    int caller_spin;        /* the caller's current spin budget (caller_spin) */
    int quit;
};

typedef struct worker_arg {
    nc_workers *pool;
    int slot;
} worker_arg;

/* Spin iterations before a worker sleeps (each a CPU pause, ~10–40 ns). */
#define NC_WORKER_SPIN 4000
/* Pauses (~25 ns each on the dev VM's AMD CPU) the caller spends at most
 * waiting for the workers' last chunks before it sleeps: about one chunk of
 * a small layer. */
#define NC_CALLER_SPIN 2000
#define NC_CALLER_SPIN_MIN 32
#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* The caller waits for the workers' last chunks by spinning, so that its
 * CPU does not halt and need waking.  The budget adapts: halved when the
 * workers did not finish within it (on a loaded machine a worker may wait
 * milliseconds for a CPU, perhaps the caller's: spinning then only delays
 * it), doubled again when they did. */
static void caller_spin(nc_workers *p)
{
    int k = 0;
    while (k < p->caller_spin && atomic_load(&p->busy) > 0) {
        cpu_relax();
        k++;
    }
    if (k == p->caller_spin)
        p->caller_spin = p->caller_spin / 2 > NC_CALLER_SPIN_MIN ? p->caller_spin / 2 : NC_CALLER_SPIN_MIN;
    else if (p->caller_spin < NC_CALLER_SPIN)
        p->caller_spin = 2 * p->caller_spin < NC_CALLER_SPIN ? 2 * p->caller_spin : NC_CALLER_SPIN;
}

static void job_drain(job_queue *q, int slot)
{
    for (;;) {
        int64_t r0 = (int64_t)atomic_fetch_add(&q->next, (long long)q->chunk);
        if (r0 >= q->rows)
            return;
        q->fn(q->ctx, r0, r0 + q->chunk < q->rows ? r0 + q->chunk : q->rows, slot);
    }
}

static void *worker_main(void *arg)
{
    worker_arg a = *(worker_arg *)arg;
    free(arg);
    nc_workers *p = a.pool;
    unsigned seen = 0;
    for (;;) {
        for (int k = 0; k < NC_WORKER_SPIN && atomic_load(&p->generation) == seen; k++)
            cpu_relax();
        pthread_mutex_lock(&p->mu);
        while (!p->quit && atomic_load(&p->generation) == seen)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = atomic_load(&p->generation);
        job_queue *q = p->q;
        int mine = a.slot < p->threads;
        pthread_mutex_unlock(&p->mu);
        if (!mine)
            continue;
        job_drain(q, a.slot);
        if (atomic_fetch_sub(&p->busy, 1) == 1) { /* the last one: the caller may sleep on `done` */
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

nc_workers *nc_workers_new(void)
{
    nc_workers *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->busy, 0);
    p->caller_spin = NC_CALLER_SPIN;
    return p;
}

void nc_threads_quit(pthread_mutex_t *mu, pthread_cond_t *wake, pthread_cond_t *done, int *quit, const pthread_t *tids,
                     int n)
{
    pthread_mutex_lock(mu);
    *quit = 1;
    pthread_cond_broadcast(wake);
    pthread_mutex_unlock(mu);
    for (int k = 0; k < n; k++)
        pthread_join(tids[k], NULL);
    pthread_mutex_destroy(mu);
    pthread_cond_destroy(wake);
    pthread_cond_destroy(done);
}

void nc_workers_free(nc_workers *p)
{
    if (!p)
        return;
    nc_threads_quit(&p->mu, &p->wake, &p->done, &p->quit, p->tid, p->n);
    free(p);
}

/* Starts workers until there are `want` (or as many as start). */
static void workers_grow(nc_workers *p, int want)
{
    while (p->n < want && p->n < NC_WORKERS_MAX - 1) {
        worker_arg *a = malloc(sizeof *a);
        if (!a)
            return;
        *a = (worker_arg){p, p->n + 1};
        if (pthread_create(&p->tid[p->n], NULL, worker_main, a) != 0) {
            free(a);
            return;
        }
        p->n++;
    }
}

void nc_workers_run(nc_workers *p, int threads, int64_t rows, int64_t chunk, nc_rows_fn fn, void *ctx)
{
    if (rows <= 0)
        return;
    if (chunk < 1)
        chunk = 1;
    if (p && threads > 1)
        workers_grow(p, threads - 1);
    if (p && threads > p->n + 1)
        threads = p->n + 1;
    if (!p || threads <= 1 || rows <= chunk) {
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) /* the same chunks, on this thread */
            fn(ctx, r0, r0 + chunk < rows ? r0 + chunk : rows, 0);
        return;
    }
    job_queue q = {.fn = fn, .ctx = ctx, .rows = rows, .chunk = chunk};
    atomic_init(&q.next, 0);
    pthread_mutex_lock(&p->mu);
    p->q = &q;
    p->threads = threads;
    atomic_store(&p->busy, threads - 1);
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    job_drain(&q, 0);
    caller_spin(p);
    pthread_mutex_lock(&p->mu); /* a worker that ends now signals after this thread waits */
    while (atomic_load(&p->busy) > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

int nc_workers_count(int wanted)
{
    long n = wanted > 0 ? wanted : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > NC_WORKERS_MAX ? NC_WORKERS_MAX : (int)n;
}
