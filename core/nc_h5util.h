/* nc_h5util.h — small HDF5 helpers shared by the project file, recordings
 * (and anyone else writing HDF5 in core/).
 *
 * Rules these helpers enforce, so their callers need not:
 *   - HDF5 never prints: nc_h5_quiet() switches its automatic error report
 *     off, and failures become an nc_status with HDF5's own innermost reason
 *     appended to our message.
 *   - A file is built in memory (HDF5's core driver), then written to
 *     "<path>.tmp-XXXXXX" in the same folder, fsync'ed and renamed over
 *     <path> (core/nc_file.h), so a failed or interrupted save — a full disk
 *     included — never damages an existing file, and libhdf5 never sees a
 *     failing write (nc_h5_create / nc_h5_commit / nc_h5_discard).
 *   - Files are written in the HDF5 1.10 format (metadata checksums) and
 *     every array is chunked with the Fletcher-32 filter, so damage anywhere
 *     in a file is reported on reading rather than loaded as wrong numbers.
 *   - Reading follows hard links only: a soft or external link, a dataset
 *     whose raw data lies in external files, or a virtual dataset is refused
 *     (a project file must not make us open other files).
 *   - Strings are written fixed-length (UTF-8, NUL-terminated), and the
 *     readers refuse variable-length strings unless their name ends in _any:
 *     variable-length data lives in HDF5's global heap, which libhdf5 1.10
 *     reads without bounds checks (a damaged heap crashes inside H5HG_read),
 *     so our own formats never use it.  Use the _any readers (and
 *     nc_h5_write_vstring) only for foreign formats that need vlen (NIR).
 *   - Every array read is size-checked (overflow, the memory budget of
 *     nc_status.h, and the bytes the file really stores) before anything is
 *     allocated; a string dataset's declared size is checked the same way.
 *
 * Errors: writing fails with NC_ERR_IO, reading with NC_ERR_FORMAT; messages
 * name the object ("dataset 'weight': ...") but not the file: the caller
 * prefixes the file name with nc_error_prefix().
 *
 * Names: a `name` argument is a path relative to `loc`; each component is
 * checked when reading.  Node names may contain '/', which HDF5 link names
 * cannot: nc_h5_escape_name() makes a link name out of any string. */
#ifndef NC_H5UTIL_H
#define NC_H5UTIL_H

#include <hdf5.h>

#include "nc_tensor.h"

/* Largest array a read will allocate: nc_memory_budget() (nc_status.h). */

/* Switches off HDF5's automatic error printing (idempotent, cheap). */
void nc_h5_quiet(void);

/* The innermost description on HDF5's error stack ("" if none), into buf. */
const char *nc_h5_error_text(char *buf, size_t size);

/* Closes any HDF5 id (file, group, dataset, attribute, type, space, plist)
 * and sets it to H5I_INVALID_HID; an invalid id is a no-op. */
void nc_h5_close(hid_t *id);

/* Percent-escapes '/' and '%' (and a leading '.') so that any string is one
 * valid link name; "" becomes "%empty".  Returns out. */
const char *nc_h5_escape_name(const char *name, char *out, size_t size);
/* The inverse of nc_h5_escape_name. */
const char *nc_h5_unescape_name(const char *name, char *out, size_t size);

/* ---- writing a file --------------------------------------------------- */

typedef struct nc_h5_writer {
    hid_t file;         /* the open file (in memory), for writing into */
    char path[4096];    /* the final path                              */
    char tmp[4096];     /* "<path>.tmp-XXXXXX"                         */
    void *image;        /* the finished file, once closed (internal)   */
    size_t image_size;  /* bytes held by libhdf5's buffer (internal)   */
} nc_h5_writer;

/* Creates the temporary file next to `path`.  On failure nothing is left. */
nc_status nc_h5_create(nc_h5_writer *w, const char *path, nc_error *err);
/* Closes the file, fsyncs it, renames it over the final path and fsyncs the
 * folder.  On failure the temporary file is removed and the old file (if
 * any) is left as it was. */
nc_status nc_h5_commit(nc_h5_writer *w, nc_error *err);
/* Closes and removes the temporary file (after a failed write). */
void nc_h5_discard(nc_h5_writer *w);

/* ---- opening a file for reading --------------------------------------- */

/* Opens read-only; NC_ERR_IO when the file cannot be read, NC_ERR_FORMAT
 * when it is not HDF5 or is damaged.  The message names the path.  The file
 * is first read by nc_h5_probe_file. */
nc_status nc_h5_open_read(const char *path, hid_t *file, nc_error *err);

/* Opens path (nc_h5_open_read), fills obj with load(file, obj, err) and
 * closes the file; a failure of load is prefixed "cannot load <what>
 * '<path>'". */
nc_status nc_h5_load(const char *path, nc_status (*load)(hid_t file, void *obj, nc_error *err), void *obj,
                     const char *what, nc_error *err);

/* libhdf5 1.10 crashes or loops forever on some damaged files (it trusts
 * sizes and addresses in them).  This reads every object, link, attribute
 * and dataset of the file through libhdf5 in a child process (fork; stderr
 * silenced; at most NC_H5_PROBE_TIMEOUT seconds, default 120): NC_OK when the
 * child came back, else NC_ERR_FORMAT ("damaged: libhdf5 fails on it").
 * NC_H5_SANDBOX=0 switches the child off (nc_h5_check_heaps still runs),
 * to debug libhdf5 itself. */
nc_status nc_h5_probe_file(const char *path, nc_error *err);
/* Part of nc_h5_probe_file, in this process: every local heap ("HEAP") and
 * global heap collection ("GCOL") header in the file must state a size and
 * address inside the file (libhdf5 allocates what they say unchecked). */
nc_status nc_h5_check_heaps(const char *path, nc_error *err);

/* ---- writing objects (NC_ERR_IO on failure) ---------------------------- */

nc_status nc_h5_group_create(hid_t loc, const char *name, hid_t *out, nc_error *err);

/* Arrays of ndim dims (0 = scalar) stored little-endian with the element
 * type the name says: f32, f64, i32, i64, u8. */
nc_status nc_h5_write_f32(hid_t loc, const char *name, int ndim, const int64_t *shape,
                          const float *data, nc_error *err);
nc_status nc_h5_write_f64(hid_t loc, const char *name, int ndim, const int64_t *shape,
                          const double *data, nc_error *err);
nc_status nc_h5_write_i32(hid_t loc, const char *name, int ndim, const int64_t *shape,
                          const int32_t *data, nc_error *err);
nc_status nc_h5_write_i64(hid_t loc, const char *name, int ndim, const int64_t *shape,
                          const int64_t *data, nc_error *err);
nc_status nc_h5_write_u8(hid_t loc, const char *name, int ndim, const int64_t *shape,
                         const uint8_t *data, nc_error *err);
/* A tensor (its own shape). */
nc_status nc_h5_write_tensor(hid_t loc, const char *name, const nc_tensor *t, nc_error *err);
/* Fixed-length UTF-8 strings: a scalar, or a 1-d array of n (each slot as
 * long as the longest + 1).  h5py reads them as bytes. */
nc_status nc_h5_write_string(hid_t loc, const char *name, const char *text, nc_error *err);
nc_status nc_h5_write_strings(hid_t loc, const char *name, int64_t n, const char *const *texts,
                              nc_error *err);
/* A scalar variable-length UTF-8 string (h5py reads it as str), for
 * formats that require it. */
nc_status nc_h5_write_vstring(hid_t loc, const char *name, const char *text, nc_error *err);

/* Attributes on a group or dataset `obj` (replaced when present); strings
 * are fixed-length. */
nc_status nc_h5_attr_string(hid_t obj, const char *name, const char *value, nc_error *err);
nc_status nc_h5_attr_i64(hid_t obj, const char *name, int64_t value, nc_error *err);
nc_status nc_h5_attr_f64(hid_t obj, const char *name, double value, nc_error *err);
nc_status nc_h5_attr_i32s(hid_t obj, const char *name, int n, const int32_t *values, nc_error *err);
nc_status nc_h5_attr_i64s(hid_t obj, const char *name, int n, const int64_t *values, nc_error *err);
nc_status nc_h5_attr_f32s(hid_t obj, const char *name, int n, const float *values, nc_error *err);

/* ---- reading objects (NC_ERR_FORMAT on failure) ------------------------ */

/* 1 when every component of `name` is a hard link that exists, else 0. */
int nc_h5_exists(hid_t loc, const char *name);
int nc_h5_attr_exists(hid_t obj, const char *name);

nc_status nc_h5_group_open(hid_t loc, const char *name, hid_t *out, nc_error *err);
/* Number of links in a group (for iterating "000000", "000001", ...). */
nc_status nc_h5_group_size(hid_t group, int64_t *count, nc_error *err);

/* For readers that read a dataset themselves: NC_OK when an open dataset
 * declaring numel elements really stores their bytes (contiguous or compact:
 * all of them; chunked: within what compression can explain), else
 * NC_ERR_FORMAT naming `name`.  Check the memory budget separately. */
nc_status nc_h5_check_stored(hid_t dset, const char *name, int64_t numel, nc_error *err);
/* 1 for a standard integer (8 to 64 bits, signed or not) or IEEE float
 * (32, 64 bits) type of either byte order — what the numeric readers
 * convert — else 0 (a damaged type makes libhdf5's conversions crash). */
int nc_h5_numeric_type_ok(hid_t type);

/* The shape of a dataset (at most max_ndim dims). */
nc_status nc_h5_read_shape(hid_t loc, const char *name, int max_ndim, int *ndim, int64_t *shape,
                           nc_error *err);
/* A numeric dataset converted to the element type named, into a new
 * malloc'ed array (free()); ndim/shape may be NULL when max_ndim says it all
 * is not needed — then any shape up to max_ndim is accepted. */
nc_status nc_h5_read_f32(hid_t loc, const char *name, int max_ndim, int *ndim, int64_t *shape,
                         float **data, nc_error *err);
nc_status nc_h5_read_f64(hid_t loc, const char *name, int max_ndim, int *ndim, int64_t *shape,
                         double **data, nc_error *err);
nc_status nc_h5_read_i32(hid_t loc, const char *name, int max_ndim, int *ndim, int64_t *shape,
                         int32_t **data, nc_error *err);
nc_status nc_h5_read_i64(hid_t loc, const char *name, int max_ndim, int *ndim, int64_t *shape,
                         int64_t **data, nc_error *err);
/* A float dataset of at most NC_MAX_DIMS dims as a new tensor. */
nc_status nc_h5_read_tensor(hid_t loc, const char *name, nc_tensor **out, nc_error *err);
/* A string dataset (scalar or 1-d, fixed length; _any: variable length
 * too): *n strings in a malloc'ed array of malloc'ed strings; free with
 * nc_h5_free_strings. */
nc_status nc_h5_read_strings(hid_t loc, const char *name, int64_t *n, char ***texts, nc_error *err);
nc_status nc_h5_read_strings_any(hid_t loc, const char *name, int64_t *n, char ***texts, nc_error *err);
void nc_h5_free_strings(int64_t n, char **texts);

/* Attribute readers; a string longer than size−1 bytes is an error. */
nc_status nc_h5_attr_get_string(hid_t obj, const char *name, char *buf, size_t size, nc_error *err);
nc_status nc_h5_attr_get_string_any(hid_t obj, const char *name, char *buf, size_t size, nc_error *err);
nc_status nc_h5_attr_get_i64(hid_t obj, const char *name, int64_t *value, nc_error *err);
nc_status nc_h5_attr_get_f64(hid_t obj, const char *name, double *value, nc_error *err);
/* 1-d numeric attributes of at most max values; *n gets the count. */
nc_status nc_h5_attr_get_i32s(hid_t obj, const char *name, int max, int *n, int32_t *values,
                              nc_error *err);
nc_status nc_h5_attr_get_i64s(hid_t obj, const char *name, int max, int *n, int64_t *values,
                              nc_error *err);
nc_status nc_h5_attr_get_f32s(hid_t obj, const char *name, int max, int *n, float *values,
                              nc_error *err);

#endif
