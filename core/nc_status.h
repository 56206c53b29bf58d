/* nc_status.h — status codes and error messages for every fallible call.
 *
 * Convention: a fallible function returns nc_status and takes a last
 * parameter `nc_error *err` (may be NULL).  On failure it fills err->message
 * with one line that says what went wrong, where (file, node, op) and what the
 * user can do.  Library code never prints, never exits, never aborts on bad
 * input. */
#ifndef NC_STATUS_H
#define NC_STATUS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef enum nc_status {
    NC_OK = 0,
    NC_ERR_IO,          /* a file could not be opened, read or written        */
    NC_ERR_FORMAT,      /* a file is not what it claims to be (corrupt, truncated) */
    NC_ERR_UNSUPPORTED, /* valid input that this program cannot handle (yet)   */
    NC_ERR_SHAPE,       /* shapes that do not fit together                     */
    NC_ERR_MEMORY,      /* allocation failed or a size exceeds the budget      */
    NC_ERR_ARGUMENT,    /* a bad parameter from the caller or the user         */
    NC_ERR_CANCELLED,   /* the progress callback asked to stop                 */
    NC_ERR_DEVICE,      /* the GPU or another engine failed                    */
    NC_ERR_INTERNAL     /* a bug: a broken invariant                           */
} nc_status;

#define NC_ERROR_MESSAGE_MAX 1024

typedef struct nc_error {
    nc_status code;
    char message[NC_ERROR_MESSAGE_MAX];
} nc_error;

/* Fills err (when not NULL) with code and a printf-style message; returns code
 * so that callers can write `return nc_fail(err, NC_ERR_IO, "...")`.  The
 * message is kept on one line (control characters become '?'). */
nc_status nc_fail(nc_error *err, nc_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* nc_fail with the arguments as a va_list (for functions that add context
 * to a message of their caller's). */
nc_status nc_failv(nc_error *err, nc_status code, const char *fmt, va_list ap);

/* Prepends "context: " to an existing message (e.g. the file name). */
void nc_error_prefix(nc_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A short stable name of a status ("io", "format", ...), for JSON output. */
const char *nc_status_name(nc_status code);

/* Overflow-checked size arithmetic: return 0 and set *out on success, -1 on
 * overflow.  Every size computed from file contents goes through these. */
int nc_mul_size(size_t a, size_t b, size_t *out);
int nc_add_size(size_t a, size_t b, size_t *out);
/* A growing array that holds n items of `size` bytes in room for *cap: the
 * array itself while n < *cap, else the array realloc'ed to twice *cap
 * (`first` items when empty) with *cap updated.  NULL when memory runs out
 * (the array and *cap unchanged; the caller still owns it). */
void *nc_grow(void *items, int n, int *cap, int first, size_t size);
/* A growing array of strings (*count of them in room for *cap):
 * nc_strings_add appends a copy of text, nc_strings_addv of what fmt formats
 * (up to 1 023 bytes); 0, or −1 when memory runs out (nothing added).
 * nc_strings_free frees the n strings and the array (NULL: nothing). */
/* Appends what fmt formats and a newline to the text in buf (size bytes):
 * as much of it as fits before the newline; nothing once buf is full. */
void nc_append_linev(char *buf, size_t size, const char *fmt, va_list ap);
int nc_strings_addv(char ***items, int *count, int *cap, const char *fmt, va_list ap);
int nc_strings_add(char ***items, int *count, int *cap, const char *text);
void nc_strings_free(char **items, int n);
/* Bytes of an array: elem_size × the product of ndim dims, each dim checked
 * (a negative dim or an overflow returns -1).  ndim 0 = one element. */
int nc_shape_bytes(int ndim, const int64_t *dims, size_t elem_size, size_t *out);

/* The memory budget: the most bytes that one reader may allocate for what a
 * file declares (a tensor, a dataset, a string table).  Every reader checks a
 * declared size against the file's real size AND this budget before it
 * allocates.  Default 4 GiB; the environment variable NC_MEMORY_BUDGET
 * (bytes, or a number with a K, M or G suffix, read once) or
 * nc_set_memory_budget() changes it (0 restores the default). */
#define NC_MEMORY_BUDGET_DEFAULT ((size_t)4 << 30)
size_t nc_memory_budget(void);
void nc_set_memory_budget(size_t bytes);
/* NC_OK when `bytes` fits the budget; else NC_ERR_MEMORY with the message
 * "<what> needs N bytes, more than the memory budget (M bytes); ..." */
nc_status nc_budget_check(size_t bytes, const char *what, nc_error *err);

/* Progress reporting, shared by every long job.  The callback returns 0 to go
 * on, non-zero to stop the work cleanly (the job then returns NC_ERR_CANCELLED). */
typedef struct nc_progress {
    const char *stage;  /* "calibrate", "evaluate", "simulate", "train", ... */
    int64_t done;       /* units done so far (images, batches, steps)          */
    int64_t total;      /* units in all, or 0 when unknown                     */
    double value;       /* a stage-specific number (accuracy so far, loss)     */
} nc_progress;

typedef int (*nc_progress_fn)(void *user, const nc_progress *progress);

#endif
