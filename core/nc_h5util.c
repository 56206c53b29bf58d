/* nc_h5util.c — small HDF5 helpers (see nc_h5util.h for the rules). */
#include "nc_h5util.h"

#include "nc_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void nc_h5_quiet(void)
{
    /* Library code never prints; errors come back through nc_error. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

typedef struct { char *buf; size_t size; int found; } walk_state;

static herr_t walk_first(unsigned n, const H5E_error2_t *e, void *user)
{
    walk_state *s = user;
    if (!s->found && e->desc && e->desc[0]) {
        snprintf(s->buf, s->size, "%s", e->desc);
        s->found = 1;
    }
    return 0;
}

const char *nc_h5_error_text(char *buf, size_t size)
{
    walk_state s = {buf, size, 0};
    if (size)
        buf[0] = 0;
    /* Upward = from the most specific error towards the API call. */
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_first, &s);
    /* libhdf5's I/O errors read "file write failed: time = ...\n, filename =
     * ..., errno = 27, error message = 'File too large', buf = 0x...": keep
     * "file write failed: File too large", on one line. */
    const char *msg = strstr(buf, "error message = '");
    const char *colon = strchr(buf, ':');
    if (msg && colon && colon < msg) {
        char reason[256];
        const char *start = msg + strlen("error message = '");
        const char *end = strchr(start, '\'');
        snprintf(reason, sizeof reason, "%.*s: %.*s", (int)(colon - buf), buf,
                 (int)(end ? end - start : (ptrdiff_t)strlen(start)), start);
        snprintf(buf, size, "%s", reason);
    }
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return buf;
}

void nc_h5_close(hid_t *id)
{
    if (!id || *id < 0)
        return;
    switch (H5Iget_type(*id)) {
    case H5I_FILE: H5Fclose(*id); break;
    case H5I_GROUP: H5Gclose(*id); break;
    case H5I_DATASET: H5Dclose(*id); break;
    case H5I_ATTR: H5Aclose(*id); break;
    case H5I_DATATYPE: H5Tclose(*id); break;
    case H5I_DATASPACE: H5Sclose(*id); break;
    case H5I_GENPROP_LST: H5Pclose(*id); break;
    default: break;
    }
    *id = H5I_INVALID_HID;
}

const char *nc_h5_escape_name(const char *name, char *out, size_t size)
{
    size_t o = 0;
    if (!name[0]) {
        snprintf(out, size, "%%empty");
        return out;
    }
    for (size_t i = 0; name[i] && o + 4 < size; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (ch == '/' || ch == '%' || (i == 0 && ch == '.'))
            o += (size_t)snprintf(out + o, size - o, "%%%02X", ch);
        else
            out[o++] = (char)ch;
    }
    out[o] = 0;
    return out;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

const char *nc_h5_unescape_name(const char *name, char *out, size_t size)
{
    size_t o = 0;
    if (strcmp(name, "%empty") == 0) {
        out[0] = 0;
        return out;
    }
    for (size_t i = 0; name[i] && o + 1 < size; i++) {
        int hi, lo;
        if (name[i] == '%' && (hi = hex_value(name[i + 1])) >= 0 && (lo = hex_value(name[i + 2])) >= 0) {
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = name[i];
        }
    }
    out[o] = 0;
    return out;
}

/* ---- files ---------------------------------------------------------------- */

static hid_t strong_fapl(void)
{
    /* Closing the file closes whatever an error path left open. */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0)
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    return fapl;
}

/* The core driver keeps the file in a buffer that these callbacks manage;
 * when the file is closed the buffer, now the complete file, is kept for
 * nc_h5_commit instead of being freed.  (H5Fget_file_image cannot be used:
 * in libhdf5 1.10.8 it returns a version-3 superblock whose checksum does
 * not match, which no reader opens.) */
static void *image_malloc(size_t size, H5FD_file_image_op_t op, void *user)
{
    (void)op;
    ((nc_h5_writer *)user)->image_size = size;
    return malloc(size ? size : 1);
}

static void *image_memcpy(void *dst, const void *src, size_t size, H5FD_file_image_op_t op, void *user)
{
    (void)op, (void)user;
    return memcpy(dst, src, size);
}

static void *image_realloc(void *ptr, size_t size, H5FD_file_image_op_t op, void *user)
{
    (void)op;
    void *bigger = realloc(ptr, size ? size : 1);
    if (bigger)
        ((nc_h5_writer *)user)->image_size = size;
    return bigger;
}

static herr_t image_free(void *ptr, H5FD_file_image_op_t op, void *user)
{
    nc_h5_writer *w = user;
    if (op == H5FD_FILE_IMAGE_OP_FILE_CLOSE && ptr && !w->image)
        w->image = ptr; /* the finished file: nc_h5_commit writes and frees it */
    else
        free(ptr);
    return 0;
}

static void *image_udata_copy(void *user) { return user; }
static herr_t image_udata_free(void *user) { (void)user; return 0; }

/* The bytes of the file in the image: the end-of-file address of a version
 * 2/3 superblock at offset 0 (the buffer grows in steps and may be longer). */
static size_t image_length(const unsigned char *image, size_t size)
{
    if (size < 48 || memcmp(image, "\211HDF\r\n\032\n", 8) != 0 || (image[8] != 2 && image[8] != 3) || image[9] != 8)
        return size;
    uint64_t eof = 0;
    for (int k = 7; k >= 0; k--)
        eof = (eof << 8) | image[12 + 2 * 8 + k];
    return eof > 0 && eof <= size ? (size_t)eof : size;
}

/* A creation property list whose objects carry no time stamps: the same
 * content then makes the same bytes (a project written by the CLI and by
 * the Python package, or twice, compares equal). */
static hid_t untimed(hid_t cls)
{
    hid_t p = H5Pcreate(cls);
    if (p >= 0 && H5Pset_obj_track_times(p, 0) < 0)
        nc_h5_close(&p);
    return p >= 0 ? p : H5P_DEFAULT;
}

static void close_plist(hid_t *p)
{
    if (*p != H5P_DEFAULT)
        nc_h5_close(p);
}


nc_status nc_h5_create(nc_h5_writer *w, const char *path, nc_error *err)
{
    nc_h5_quiet();
    memset(w, 0, sizeof *w);
    w->file = H5I_INVALID_HID;
    if (snprintf(w->path, sizeof w->path, "%s", path) >= (int)sizeof w->path ||
        snprintf(w->tmp, sizeof w->tmp, "%s.tmp-XXXXXX", path) >= (int)sizeof w->tmp)
        return nc_fail(err, NC_ERR_ARGUMENT, "path too long: '%s'", path);
    int fd = mkstemp(w->tmp);
    if (fd < 0)
        return nc_fail(err, NC_ERR_IO, "cannot create a file next to '%s': %s", path, strerror(errno));
    /* Keep the permissions of the file we replace; else rw-r--r--. */
    struct stat st;
    fchmod(fd, stat(path, &st) == 0 ? (st.st_mode & 07777) : 0644);
    close(fd);
    hid_t fapl = strong_fapl();
    /* The 1.10 file format checksums every metadata object, chunk indexes
     * included, so damage is detected instead of trusted (with the 1.8
     * format a fuzz test loaded wrong weights through a damaged B-tree).
     * Readers need HDF5 ≥ 1.10 (Debian 12 has 1.10.8; h5py uses it). */
    H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_LATEST);
    /* The file is built in memory (the core driver, no backing store) and
     * written out by nc_h5_commit: libhdf5 1.10 never sees a failing write.
     * (When H5Fclose fails on a full disk it leaves a half-closed file in
     * its tables, and the library crashes when it shuts down at exit.) */
    H5FD_file_image_callbacks_t callbacks = {image_malloc, image_memcpy, image_realloc, image_free,
                                             image_udata_copy, image_udata_free, w};
    H5Pset_fapl_core(fapl, (size_t)1 << 20, 0);
    H5Pset_file_image_callbacks(fapl, &callbacks);
    hid_t fcpl = untimed(H5P_FILE_CREATE); /* the root group */
    w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, fcpl, fapl);
    close_plist(&fcpl);
    char why[256];
    nc_h5_error_text(why, sizeof why); /* before any other call clears the stack */
    nc_h5_close(&fapl);
    if (w->file < 0) {
        nc_fail(err, NC_ERR_IO, "cannot create HDF5 file '%s': %s", w->tmp, why);
        unlink(w->tmp);
        return NC_ERR_IO;
    }
    return NC_OK;
}

void nc_h5_discard(nc_h5_writer *w)
{
    nc_h5_close(&w->file);
    free(w->image);
    w->image = NULL;
    if (w->tmp[0])
        unlink(w->tmp);
    w->tmp[0] = 0;
}

/* Writes all of buf to the file at path (created by nc_h5_create). */
static int write_image(const char *path, const unsigned char *buf, size_t size)
{
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0)
        return -1;
    for (size_t done = 0; done < size;) {
        ssize_t n = write(fd, buf + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int saved = n < 0 ? errno : ENOSPC;
            close(fd);
            errno = saved;
            return -1;
        }
        done += (size_t)n;
    }
    return close(fd);
}

nc_status nc_h5_commit(nc_h5_writer *w, nc_error *err)
{
    char why[256];
    /* closing a file in memory cannot meet a full disk (see nc_h5_create) */
    herr_t closed = H5Fclose(w->file);
    w->file = H5I_INVALID_HID;
    if (closed < 0 || !w->image) {
        nc_fail(err, NC_ERR_IO, "cannot finish writing '%s': %s; the old file (if any) is left as it was", w->path,
                closed < 0 ? nc_h5_error_text(why, sizeof why) : "no file image");
        nc_h5_discard(w);
        return NC_ERR_IO;
    }
    int rc = write_image(w->tmp, w->image, image_length(w->image, w->image_size));
    free(w->image);
    w->image = NULL;
    if (rc != 0 || nc_file_commit(w->tmp, w->path) != 0) { /* fsync, rename, fsync the folder */
        nc_fail(err, NC_ERR_IO, "cannot write '%s': %s; the old file (if any) is left as it was", w->path,
                strerror(errno));
        nc_h5_discard(w);
        return NC_ERR_IO;
    }
    w->tmp[0] = 0;
    return NC_OK;
}

/* ---- reading a file in a child process first ------------------------------
 *
 * libhdf5 1.10 trusts sizes and addresses inside a file: a damaged local heap
 * makes it malloc a size from the file and memcpy into the NULL it got, a
 * damaged global heap makes it loop forever, and there are more such paths in
 * a library we cannot change.  So before a reader opens a file, a child
 * process (fork) opens it and reads every object, link, attribute and dataset
 * (but variable-length strings, whose heap the NIR reader checks itself)
 * through libhdf5, with stderr silenced and a time limit.  Only when the
 * child comes back does the reader touch the file; a child that crashed,
 * aborted or ran out of time means a damaged file, refused with a message.
 * The walk calls libhdf5 only, so a crash in our own reader code still shows
 * in the reader (and in the sanitizers). */

typedef struct probe_state {
    size_t budget;      /* largest dataset read whole, bytes */
} probe_state;

/* Reads n fixed-length strings of `type` from a dataset or an attribute
 * (is_dataset 0), when they fit in `budget` bytes. */
static void probe_read_strings(hid_t obj, int is_dataset, hid_t type, hssize_t n, size_t budget)
{
    size_t size = H5Tget_size(type), bytes;
    if (size == 0 || nc_mul_size((size_t)n, size, &bytes) != 0 || bytes > budget)
        return;
    void *buf = calloc(bytes, 1);
    hid_t mtype = H5Tcopy(H5T_C_S1);
    H5Tset_size(mtype, size);
    if (buf && is_dataset)
        H5Dread(obj, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    else if (buf)
        H5Aread(obj, mtype, buf);
    free(buf);
    H5Tclose(mtype);
}

static void probe_read_attr(hid_t attr)
{
    hid_t type = H5Aget_type(attr), space = H5Aget_space(attr);
    hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    if (n > 0 && n < (1 << 24) && nc_h5_numeric_type_ok(type)) {
        double *buf = malloc((size_t)n * sizeof(double));
        if (buf)
            H5Aread(attr, H5T_NATIVE_DOUBLE, buf);
        free(buf);
    } else if (n > 0 && n < (1 << 20) && cls == H5T_STRING && H5Tis_variable_str(type) == 0) {
        /* variable-length strings are left alone: their global heap is
         * checked by the readers that accept them (nc_nir_doc.c) */
        probe_read_strings(attr, 0, type, n, nc_memory_budget());
    }
    if (type >= 0)
        H5Tclose(type);
    if (space >= 0)
        H5Sclose(space);
}

static herr_t probe_attr(hid_t loc, const char *name, const H5A_info_t *info, void *user)
{
    (void)info, (void)user;
    hid_t attr = H5Aopen(loc, name, H5P_DEFAULT);
    if (attr >= 0) {
        probe_read_attr(attr);
        H5Aclose(attr);
    }
    return 0;
}

static void probe_read_dataset(hid_t dset, const probe_state *ps)
{
    hid_t type = H5Dget_type(dset), space = H5Dget_space(dset), dcpl = H5Dget_create_plist(dset);
    hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    H5D_layout_t layout = dcpl >= 0 ? H5Pget_layout(dcpl) : H5D_LAYOUT_ERROR;
    int foreign = dcpl < 0 || layout == H5D_VIRTUAL || H5Pget_external_count(dcpl) != 0;
    (void)H5Dget_storage_size(dset);
    size_t bytes;
    if (!foreign && n > 0 && nc_h5_numeric_type_ok(type) && /* others are refused unread */
        nc_mul_size((size_t)n, sizeof(double), &bytes) == 0 && bytes <= ps->budget) {
        double *buf = malloc(bytes);
        if (buf)
            H5Dread(dset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        free(buf);
    } else if (!foreign && n > 0 && cls == H5T_STRING && H5Tis_variable_str(type) == 0) {
        probe_read_strings(dset, 1, type, n, ps->budget); /* variable-length: see probe_read_attr */
    }
    if (type >= 0)
        H5Tclose(type);
    if (space >= 0)
        H5Sclose(space);
    if (dcpl >= 0)
        H5Pclose(dcpl);
}

static herr_t probe_object(hid_t loc, const char *name, const H5O_info_t *info, void *user)
{
    hid_t obj = H5Oopen(loc, name, H5P_DEFAULT);
    if (obj < 0)
        return 0;
    H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, probe_attr, NULL);
    if (info->type == H5O_TYPE_DATASET)
        probe_read_dataset(obj, user);
    H5Oclose(obj);
    return 0;
}

static herr_t probe_link(hid_t loc, const char *name, const H5L_info_t *info, void *user)
{
    (void)user;
    if (info->type == H5L_TYPE_SOFT || info->type == H5L_TYPE_EXTERNAL) {
        char target[1024];
        H5Lget_val(loc, name, target, sizeof target, H5P_DEFAULT);
    }
    return 0;
}

/* The child: open, walk, leave.  Never returns. */
static void probe_child(const char *path, unsigned seconds)
{
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        close(null);
    }
    /* a crash is the answer, not something to report (sanitizer or fuzzer
     * handlers inherited from the parent would) */
    const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM, SIGXFSZ};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
    alarm(seconds);
    /* libhdf5 allocates sizes it reads from the file (a local heap's, ...):
     * the child may allocate the memory budget and no more, so that such a
     * file fails here (a NULL it then copies into is a crash, the answer) */
    unsigned long long vm_data_kb = 0;
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    while (status && fgets(line, sizeof line, status))
        if (sscanf(line, "VmData: %llu kB", &vm_data_kb) == 1)
            break;
    if (status)
        fclose(status);
    if (vm_data_kb > 0) {
        struct rlimit data = {0, 0};
        getrlimit(RLIMIT_DATA, &data);
        rlim_t want = (rlim_t)vm_data_kb * 1024 + (rlim_t)nc_memory_budget() + ((rlim_t)64 << 20);
        if (data.rlim_max == RLIM_INFINITY || want < data.rlim_max) {
            data.rlim_cur = want;
            setrlimit(RLIMIT_DATA, &data);
        }
    }
    probe_state ps = {nc_memory_budget()};
    hid_t fapl = strong_fapl();
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (file >= 0) {
        H5Aiterate2(file, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, probe_attr, NULL);
        H5Lvisit(file, H5_INDEX_NAME, H5_ITER_NATIVE, probe_link, NULL);
        H5Ovisit(file, H5_INDEX_NAME, H5_ITER_NATIVE, probe_object, &ps);
        H5Fclose(file);
    }
    _exit(0);
}

/* ---- heaps whose sizes libhdf5 trusts --------------------------------------
 *
 * libhdf5 1.10 allocates a local heap's data segment ("HEAP", the names of
 * an old-style group) or a global heap collection ("GCOL") with the size the
 * file states, before checking anything: a damaged size makes it allocate
 * gigabytes, or copy into the NULL it got.  Every such header in the file
 * (found by its signature followed by its version and zero reserved bytes,
 * which data practically never spells) must state a size and address inside
 * the file. */

typedef struct h5_geometry { uint64_t base; int so, sl; } h5_geometry; /* sizes of offsets and lengths */

static uint64_t le_bytes(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; k--)
        v = (v << 8) | p[k];
    return v;
}

/* The superblock (at 0, 512, 1024, ...): where addresses count from and
 * the widths of offsets and lengths; 0 when there is none. */
static int find_superblock(int fd, uint64_t file_size, h5_geometry *g)
{
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    for (uint64_t at = 0; at + 16 <= file_size; at = at ? at * 2 : 512) {
        unsigned char head[16];
        if (pread(fd, head, sizeof head, (off_t)at) != (ssize_t)sizeof head)
            return 0;
        if (memcmp(head, sig, 8) != 0)
            continue;
        int version = head[8];
        g->base = at;
        g->so = version <= 1 ? head[13] : head[9];
        g->sl = version <= 1 ? head[14] : head[10];
        return (g->so == 2 || g->so == 4 || g->so == 8) && (g->sl == 2 || g->sl == 4 || g->sl == 8);
    }
    return 0;
}

/* Checks one header at file position `at` (its signature matched). */
static const char *heap_header_problem(const unsigned char *p, size_t avail, uint64_t at, uint64_t file_size,
                                       const h5_geometry *g)
{
    if (memcmp(p, "HEAP", 4) == 0 && avail >= 8 + 2 * (size_t)g->sl + (size_t)g->so && p[4] == 0 && !p[5] &&
        !p[6] && !p[7]) {
        uint64_t size = le_bytes(p + 8, g->sl), addr = le_bytes(p + 8 + 2 * g->sl, g->so);
        if (size > file_size || (addr != UINT64_MAX >> (64 - 8 * g->so) &&
                                 (addr > file_size || g->base + addr > file_size - size)))
            return "a local heap (group member names) states a size or address outside the file";
    }
    if (memcmp(p, "GCOL", 4) == 0 && avail >= 8 + (size_t)g->sl && p[4] == 1 && !p[5] && !p[6] && !p[7]) {
        uint64_t size = le_bytes(p + 8, g->sl);
        if (size < 8 + (uint64_t)g->sl || size > file_size - at)
            return "a global heap collection (variable-length data) states a size outside the file";
    }
    return NULL;
}

nc_status nc_h5_check_heaps(const char *path, nc_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return nc_fail(err, NC_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    }
    uint64_t file_size = (uint64_t)st.st_size;
    h5_geometry g;
    nc_status result = NC_OK;
    if (find_superblock(fd, file_size, &g)) {
        enum { CHUNK = 1 << 20, OVERLAP = 64 };
        unsigned char *buf = malloc(CHUNK + OVERLAP);
        for (uint64_t at = 0; buf && at < file_size && result == NC_OK; at += CHUNK) {
            ssize_t got = pread(fd, buf, CHUNK + OVERLAP, (off_t)at);
            if (got <= 0)
                break;
            size_t scan = (size_t)got < CHUNK ? (size_t)got : CHUNK;
            for (size_t k = 0; k + 4 <= scan && result == NC_OK; k++) {
                if ((buf[k] != 'H' || buf[k + 1] != 'E') && (buf[k] != 'G' || buf[k + 1] != 'C'))
                    continue;
                const char *problem = heap_header_problem(buf + k, (size_t)got - k, at + k, file_size, &g);
                if (problem)
                    result = nc_fail(err, NC_ERR_FORMAT, "'%s' is damaged: %s (at byte %llu)", path, problem,
                                     (unsigned long long)(at + k));
            }
        }
        free(buf);
    }
    close(fd);
    return result;
}

nc_status nc_h5_probe_file(const char *path, nc_error *err)
{
    nc_status heaps = nc_h5_check_heaps(path, err);
    if (heaps != NC_OK)
        return heaps;
    const char *off = getenv("NC_H5_SANDBOX");
    if (off && strcmp(off, "0") == 0)
        return NC_OK;
    /* no cache of files probed before: a file rewritten within one clock
     * tick keeps its size and time stamps, and must be probed again */
    const char *limit = getenv("NC_H5_PROBE_TIMEOUT");
    long seconds = limit ? strtol(limit, NULL, 10) : 0;
    if (seconds <= 0 || seconds > 86400)
        seconds = 120;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return NC_OK; /* no process to spare: read it directly, as before */
    if (pid == 0)
        probe_child(path, (unsigned)seconds);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return NC_OK;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        return nc_fail(err, NC_ERR_FORMAT,
                       "'%s' is damaged: reading it with libhdf5 did not finish in %ld s (set NC_H5_PROBE_TIMEOUT "
                       "for very large files)", path, seconds);
    return nc_fail(err, NC_ERR_FORMAT,
                   "'%s' is damaged: libhdf5 fails on it (%s %d while reading it in a separate process); "
                   "the file cannot be used", path, WIFSIGNALED(status) ? "signal" : "exit status",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

nc_status nc_h5_open_read(const char *path, hid_t *file, nc_error *err)
{
    char why[256];
    nc_h5_quiet();
    *file = H5I_INVALID_HID;
    struct stat st;
    if (stat(path, &st) != 0 || access(path, R_OK) != 0)
        return nc_fail(err, NC_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return nc_fail(err, NC_ERR_IO, "cannot open '%s': not a regular file", path);
    if (H5Fis_hdf5(path) <= 0)
        return nc_fail(err, NC_ERR_FORMAT, "'%s' is not an HDF5 file (no HDF5 signature)", path);
    nc_status probe = nc_h5_probe_file(path, err); /* libhdf5 survives it? */
    if (probe != NC_OK)
        return probe;
    hid_t fapl = strong_fapl();
    *file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    nc_h5_error_text(why, sizeof why); /* before any other call clears the stack */
    nc_h5_close(&fapl);
    if (*file < 0)
        return nc_fail(err, NC_ERR_FORMAT, "'%s' is damaged or truncated (%s)", path, why[0] ? why : "HDF5 cannot open it");
    return NC_OK;
}

nc_status nc_h5_load(const char *path, nc_status (*load)(hid_t file, void *obj, nc_error *err), void *obj,
                     const char *what, nc_error *err)
{
    hid_t file;
    nc_status st = nc_h5_open_read(path, &file, err);
    if (st != NC_OK)
        return st;
    st = load(file, obj, err);
    nc_h5_close(&file);
    if (st != NC_OK)
        nc_error_prefix(err, "cannot load %s '%s'", what, path);
    return st;
}

/* ---- writing objects -------------------------------------------------------- */

static nc_status write_fail(nc_error *err, const char *what, const char *name)
{
    char why[256];
    return nc_fail(err, NC_ERR_IO, "cannot write %s '%s': %s", what, name, nc_h5_error_text(why, sizeof why));
}

nc_status nc_h5_group_create(hid_t loc, const char *name, hid_t *out, nc_error *err)
{
    hid_t gcpl = untimed(H5P_GROUP_CREATE);
    *out = H5Gcreate2(loc, name, H5P_DEFAULT, gcpl, H5P_DEFAULT);
    close_plist(&gcpl);
    return *out < 0 ? write_fail(err, "group", name) : NC_OK;
}

static hid_t make_space(int ndim, const int64_t *shape, int64_t *numel)
{
    hsize_t dims[16];
    if (ndim < 0 || ndim > 16)
        return H5I_INVALID_HID;
    *numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return H5I_INVALID_HID;
        dims[i] = (hsize_t)shape[i];
        *numel *= shape[i];
    }
    return ndim == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(ndim, dims, NULL);
}

/* Arrays are stored chunked with the Fletcher-32 checksum filter, so that a
 * damaged weight is reported on reading instead of silently loaded.  Chunks
 * span whole rows of axis 0 and hold about 64 MiB at most. */
static hid_t checked_dcpl(hid_t file_type, int ndim, const int64_t *shape, int64_t numel)
{
    if (ndim < 1 || numel < 1)
        return untimed(H5P_DATASET_CREATE);
    hsize_t chunk[16];
    double row_bytes = (double)H5Tget_size(file_type);
    for (int i = 1; i < ndim; i++)
        row_bytes *= (double)shape[i];
    double rows = (double)(64 << 20) / row_bytes;
    chunk[0] = (hsize_t)(rows < 1 ? 1 : rows > (double)shape[0] ? (double)shape[0] : rows);
    for (int i = 1; i < ndim; i++)
        chunk[i] = (hsize_t)shape[i];
    hid_t dcpl = untimed(H5P_DATASET_CREATE);
    if (dcpl != H5P_DEFAULT && (H5Pset_chunk(dcpl, ndim, chunk) < 0 || H5Pset_fletcher32(dcpl) < 0))
        nc_h5_close(&dcpl);
    return dcpl >= 0 ? dcpl : H5P_DEFAULT;
}

static nc_status write_array(hid_t loc, const char *name, hid_t file_type, hid_t mem_type, int ndim,
                             const int64_t *shape, const void *data, nc_error *err)
{
    int64_t numel = 0;
    hid_t space = make_space(ndim, shape, &numel);
    if (space < 0)
        return nc_fail(err, NC_ERR_ARGUMENT, "dataset '%s': bad shape", name);
    hid_t dcpl = checked_dcpl(file_type, ndim, shape, numel);
    hid_t dset = H5Dcreate2(loc, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (dcpl != H5P_DEFAULT)
        nc_h5_close(&dcpl);
    nc_status st = NC_OK;
    /* A zero-size dataset has nothing to write. */
    if (dset < 0 || (numel > 0 && H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0))
        st = write_fail(err, "dataset", name);
    nc_h5_close(&dset);
    nc_h5_close(&space);
    return st;
}

nc_status nc_h5_write_f32(hid_t loc, const char *name, int ndim, const int64_t *shape, const float *data,
                          nc_error *err)
{
    return write_array(loc, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, ndim, shape, data, err);
}

nc_status nc_h5_write_f64(hid_t loc, const char *name, int ndim, const int64_t *shape, const double *data,
                          nc_error *err)
{
    return write_array(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, ndim, shape, data, err);
}

nc_status nc_h5_write_i32(hid_t loc, const char *name, int ndim, const int64_t *shape, const int32_t *data,
                          nc_error *err)
{
    return write_array(loc, name, H5T_STD_I32LE, H5T_NATIVE_INT32, ndim, shape, data, err);
}

nc_status nc_h5_write_i64(hid_t loc, const char *name, int ndim, const int64_t *shape, const int64_t *data,
                          nc_error *err)
{
    return write_array(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, ndim, shape, data, err);
}

nc_status nc_h5_write_u8(hid_t loc, const char *name, int ndim, const int64_t *shape, const uint8_t *data,
                         nc_error *err)
{
    return write_array(loc, name, H5T_STD_U8LE, H5T_NATIVE_UINT8, ndim, shape, data, err);
}

nc_status nc_h5_write_tensor(hid_t loc, const char *name, const nc_tensor *t, nc_error *err)
{
    return nc_h5_write_f32(loc, name, t->ndim, t->shape, t->data, err);
}

static hid_t string_type(size_t size)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, size);
    H5Tset_cset(type, H5T_CSET_UTF8);
    H5Tset_strpad(type, H5T_STR_NULLTERM);
    return type;
}

/* n strings packed into fixed-length slots of the longest length + 1. */
nc_status nc_h5_write_strings(hid_t loc, const char *name, int64_t n, const char *const *texts, nc_error *err)
{
    size_t width = 1, bytes;
    for (int64_t i = 0; i < n; i++)
        if (strlen(texts[i]) + 1 > width)
            width = strlen(texts[i]) + 1;
    if (nc_mul_size((size_t)n, width, &bytes) != 0)
        return nc_fail(err, NC_ERR_MEMORY, "dataset '%s': too many strings", name);
    char *packed = calloc(bytes ? bytes : 1, 1);
    if (!packed)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for dataset '%s'", name);
    for (int64_t i = 0; i < n; i++)
        memcpy(packed + (size_t)i * width, texts[i], strlen(texts[i]));
    hid_t type = string_type(width);
    nc_status st = write_array(loc, name, type, type, 1, &n, packed, err);
    nc_h5_close(&type);
    free(packed);
    return st;
}

nc_status nc_h5_write_string(hid_t loc, const char *name, const char *text, nc_error *err)
{
    text = text ? text : "";
    hid_t type = string_type(strlen(text) + 1);
    nc_status st = write_array(loc, name, type, type, 0, NULL, text, err);
    nc_h5_close(&type);
    return st;
}

nc_status nc_h5_write_vstring(hid_t loc, const char *name, const char *text, nc_error *err)
{
    const char *one[1] = {text ? text : ""};
    hid_t type = string_type(H5T_VARIABLE);
    nc_status st = write_array(loc, name, type, type, 0, NULL, one, err);
    nc_h5_close(&type);
    return st;
}

static nc_status write_attr(hid_t obj, const char *name, hid_t file_type, hid_t mem_type, int ndim,
                            int64_t n, const void *data, nc_error *err)
{
    int64_t numel;
    hid_t space = make_space(ndim, &n, &numel);
    if (space < 0)
        return nc_fail(err, NC_ERR_ARGUMENT, "attribute '%s': bad size", name);
    if (H5Aexists(obj, name) > 0)
        H5Adelete(obj, name);
    hid_t attr = H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
    nc_status st = NC_OK;
    if (attr < 0 || (numel > 0 && H5Awrite(attr, mem_type, data) < 0))
        st = write_fail(err, "attribute", name);
    nc_h5_close(&attr);
    nc_h5_close(&space);
    return st;
}

nc_status nc_h5_attr_string(hid_t obj, const char *name, const char *value, nc_error *err)
{
    value = value ? value : "";
    hid_t type = string_type(strlen(value) + 1);
    nc_status st = write_attr(obj, name, type, type, 0, 1, value, err);
    nc_h5_close(&type);
    return st;
}

nc_status nc_h5_attr_i64(hid_t obj, const char *name, int64_t value, nc_error *err)
{
    return write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, 0, 1, &value, err);
}

nc_status nc_h5_attr_f64(hid_t obj, const char *name, double value, nc_error *err)
{
    return write_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 0, 1, &value, err);
}

nc_status nc_h5_attr_i32s(hid_t obj, const char *name, int n, const int32_t *values, nc_error *err)
{
    return write_attr(obj, name, H5T_STD_I32LE, H5T_NATIVE_INT32, 1, n, values, err);
}

nc_status nc_h5_attr_i64s(hid_t obj, const char *name, int n, const int64_t *values, nc_error *err)
{
    return write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, 1, n, values, err);
}

nc_status nc_h5_attr_f32s(hid_t obj, const char *name, int n, const float *values, nc_error *err)
{
    return write_attr(obj, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, n, values, err);
}

/* ---- reading objects ---------------------------------------------------------- */

static nc_status read_fail(nc_error *err, const char *what, const char *name, const char *problem)
{
    char why[256];
    nc_h5_error_text(why, sizeof why);
    return nc_fail(err, NC_ERR_FORMAT, "%s '%s': %s%s%s", what, name, problem, why[0] ? ": " : "", why);
}

/* Checks each component of `name` in turn, so that no soft or external link
 * is ever followed (checking "a/b" directly would traverse "a"). */
static int path_is_hard(hid_t loc, const char *name)
{
    char prefix[1024];
    size_t len = strlen(name);
    if (len == 0 || len >= sizeof prefix)
        return 0;
    for (size_t i = 0; i <= len; i++) {
        if (name[i] != '/' && name[i] != 0)
            continue;
        memcpy(prefix, name, i);
        prefix[i] = 0;
        H5L_info_t info;
        if (i == 0 || H5Lexists(loc, prefix, H5P_DEFAULT) <= 0 ||
            H5Lget_info(loc, prefix, &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_HARD)
            return 0;
    }
    return 1;
}

int nc_h5_exists(hid_t loc, const char *name) { return path_is_hard(loc, name); }

int nc_h5_attr_exists(hid_t obj, const char *name) { return H5Aexists(obj, name) > 0; }

static nc_status check_link(hid_t loc, const char *what, const char *name, nc_error *err)
{
    H5L_info_t info;
    if (path_is_hard(loc, name))
        return NC_OK;
    /* Say "missing" or "a link" precisely: both are common user questions. */
    if (!strchr(name, '/') && H5Lexists(loc, name, H5P_DEFAULT) > 0 &&
        H5Lget_info(loc, name, &info, H5P_DEFAULT) >= 0 && info.type != H5L_TYPE_HARD)
        return nc_fail(err, NC_ERR_FORMAT, "%s '%s' is a soft or external link, which is refused", what, name);
    return nc_fail(err, NC_ERR_FORMAT, "%s '%s' is missing", what, name);
}

nc_status nc_h5_group_open(hid_t loc, const char *name, hid_t *out, nc_error *err)
{
    *out = H5I_INVALID_HID;
    nc_status st = check_link(loc, "group", name, err);
    if (st != NC_OK)
        return st;
    *out = H5Gopen2(loc, name, H5P_DEFAULT);
    return *out < 0 ? read_fail(err, "group", name, "cannot be opened") : NC_OK;
}

nc_status nc_h5_group_size(hid_t group, int64_t *count, nc_error *err)
{
    H5G_info_t info;
    if (H5Gget_info(group, &info) < 0)
        return read_fail(err, "group", "", "cannot be listed");
    *count = (int64_t)info.nlinks;
    return NC_OK;
}

/* Opens a dataset whose raw data lives in this file only. */
static nc_status open_dataset(hid_t loc, const char *name, hid_t *dset, nc_error *err)
{
    *dset = H5I_INVALID_HID;
    nc_status st = check_link(loc, "dataset", name, err);
    if (st != NC_OK)
        return st;
    *dset = H5Dopen2(loc, name, H5P_DEFAULT);
    if (*dset < 0)
        return read_fail(err, "dataset", name, "cannot be opened");
    hid_t dcpl = H5Dget_create_plist(*dset);
    int external = dcpl < 0 ? -1 : H5Pget_external_count(dcpl);
    H5D_layout_t layout = dcpl < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(dcpl);
    nc_h5_close(&dcpl);
    if (external != 0 || layout == H5D_VIRTUAL || layout == H5D_LAYOUT_ERROR) {
        nc_h5_close(dset);
        return nc_fail(err, NC_ERR_FORMAT, "dataset '%s' stores its data in other files, which is refused", name);
    }
    return NC_OK;
}

/* Dims of a dataspace: scalar → 0 dims; null or too many dims → error. */
static nc_status space_dims(hid_t space, const char *name, int max_ndim, int *ndim, int64_t *shape,
                            int64_t *numel, nc_error *err)
{
    H5S_class_t cls = H5Sget_simple_extent_type(space);
    hsize_t dims[H5S_MAX_RANK];
    *numel = 1;
    *ndim = 0;
    if (cls == H5S_SCALAR)
        return NC_OK;
    int nd = cls == H5S_SIMPLE ? H5Sget_simple_extent_dims(space, dims, NULL) : -1;
    if (nd < 0)
        return nc_fail(err, NC_ERR_FORMAT, "'%s' has no data space", name);
    if (nd > max_ndim)
        return nc_fail(err, NC_ERR_FORMAT, "'%s' has %d dimensions, at most %d expected", name, nd, max_ndim);
    *ndim = nd;
    for (int i = 0; i < nd; i++) {
        size_t n;
        if (dims[i] > (hsize_t)INT64_MAX || nc_mul_size((size_t)*numel, (size_t)dims[i], &n) != 0 ||
            n > (size_t)INT64_MAX)
            return nc_fail(err, NC_ERR_FORMAT, "'%s' has an impossible size", name);
        shape[i] = (int64_t)dims[i];
        *numel = (int64_t)n;
    }
    return NC_OK;
}

nc_status nc_h5_read_shape(hid_t loc, const char *name, int max_ndim, int *ndim, int64_t *shape, nc_error *err)
{
    hid_t dset, space = H5I_INVALID_HID;
    int64_t numel;
    nc_status st = open_dataset(loc, name, &dset, err);
    if (st == NC_OK) {
        space = H5Dget_space(dset);
        st = space < 0 ? read_fail(err, "dataset", name, "no data space")
                       : space_dims(space, name, max_ndim, ndim, shape, &numel, err);
    }
    nc_h5_close(&space);
    nc_h5_close(&dset);
    return st;
}

nc_status nc_h5_check_stored(hid_t dset, const char *name, int64_t numel, nc_error *err)
{
    size_t file_bytes;
    hid_t ftype = H5Dget_type(dset);
    size_t fsize = ftype >= 0 ? H5Tget_size(ftype) : 0;
    nc_h5_close(&ftype);
    if (fsize == 0 || numel < 0 || nc_mul_size((size_t)numel, fsize, &file_bytes) != 0)
        return nc_fail(err, NC_ERR_FORMAT, "dataset '%s' is too large (%lld values)", name, (long long)numel);
    hid_t dcpl = H5Dget_create_plist(dset);
    H5D_layout_t layout = dcpl < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(dcpl);
    nc_h5_close(&dcpl);
    hsize_t stored = H5Dget_storage_size(dset);
    int plain = layout == H5D_CONTIGUOUS || layout == H5D_COMPACT;
    if (numel > 0 && ((plain && stored < file_bytes) ||
                      (!plain && file_bytes > (1u << 20) && (double)stored * 1100.0 < (double)file_bytes)))
        return nc_fail(err, NC_ERR_FORMAT, "dataset '%s' declares %zu bytes but the file stores %llu (truncated?)",
                       name, file_bytes, (unsigned long long)stored);
    return NC_OK;
}

int nc_h5_numeric_type_ok(hid_t type)
{
    /* exactly a standard type: libhdf5's conversions trust the bit fields of
     * a type, and a damaged float type (fields outside its size) smashes its
     * stack in H5T__bit_get_d */
    static const hid_t *const standard[] = {
        &H5T_STD_I8LE_g,  &H5T_STD_I8BE_g,  &H5T_STD_U8LE_g,  &H5T_STD_U8BE_g,  &H5T_STD_I16LE_g,
        &H5T_STD_I16BE_g, &H5T_STD_U16LE_g, &H5T_STD_U16BE_g, &H5T_STD_I32LE_g, &H5T_STD_I32BE_g,
        &H5T_STD_U32LE_g, &H5T_STD_U32BE_g, &H5T_STD_I64LE_g, &H5T_STD_I64BE_g, &H5T_STD_U64LE_g,
        &H5T_STD_U64BE_g, &H5T_IEEE_F32LE_g, &H5T_IEEE_F32BE_g, &H5T_IEEE_F64LE_g, &H5T_IEEE_F64BE_g,
    };
    H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    if (cls != H5T_INTEGER && cls != H5T_FLOAT)
        return 0;
    H5open(); /* the H5T_*_g ids exist once the library is initialised */
    for (size_t i = 0; i < sizeof standard / sizeof standard[0]; i++)
        if (H5Tequal(type, *standard[i]) > 0)
            return 1;
    return 0;
}

/* Refuses sizes the file cannot hold: a declared size far beyond the bytes
 * stored is a corrupt or hostile file, and must not make us allocate it. */
static nc_status check_storage(hid_t dset, const char *name, int64_t numel, size_t mem_elem, nc_error *err)
{
    size_t bytes;
    if (nc_mul_size((size_t)numel, mem_elem, &bytes) != 0)
        return nc_fail(err, NC_ERR_FORMAT, "dataset '%s' is too large (%lld values)", name, (long long)numel);
    nc_status st = nc_h5_check_stored(dset, name, numel, err);
    if (st != NC_OK)
        return st;
    char what[300];
    snprintf(what, sizeof what, "dataset '%s'", name);
    return nc_budget_check(bytes, what, err);
}

static nc_status read_numeric(hid_t loc, const char *name, hid_t mem_type, size_t elem, int max_ndim, int *ndim,
                              int64_t *shape, void **data, nc_error *err)
{
    hid_t dset, ftype = H5I_INVALID_HID, space = H5I_INVALID_HID;
    int nd = 0;
    int64_t dims[H5S_MAX_RANK], numel = 0;
    *data = NULL;
    nc_status st = open_dataset(loc, name, &dset, err);
    if (st == NC_OK) {
        ftype = H5Dget_type(dset);
        if (!nc_h5_numeric_type_ok(ftype))
            st = nc_fail(err, NC_ERR_FORMAT, "dataset '%s' is not numeric (standard integers, or IEEE floats of 32 or 64 bits)", name);
    }
    if (st == NC_OK) {
        space = H5Dget_space(dset);
        st = space < 0 ? read_fail(err, "dataset", name, "no data space")
                       : space_dims(space, name, max_ndim, &nd, dims, &numel, err);
    }
    if (st == NC_OK)
        st = check_storage(dset, name, numel, elem, err);
    if (st == NC_OK && !(*data = malloc(numel > 0 ? (size_t)numel * elem : 1)))
        st = nc_fail(err, NC_ERR_MEMORY, "out of memory for dataset '%s'", name);
    if (st == NC_OK && numel > 0 && H5Dread(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, *data) < 0)
        st = read_fail(err, "dataset", name, "cannot be read");
    if (st != NC_OK) {
        free(*data);
        *data = NULL;
    } else {
        if (ndim)
            *ndim = nd;
        if (shape)
            memcpy(shape, dims, (size_t)nd * sizeof(int64_t));
    }
    nc_h5_close(&ftype);
    nc_h5_close(&space);
    nc_h5_close(&dset);
    return st;
}

nc_status nc_h5_read_f32(hid_t loc, const char *name, int max_ndim, int *ndim, int64_t *shape, float **data,
                         nc_error *err)
{
    return read_numeric(loc, name, H5T_NATIVE_FLOAT, sizeof(float), max_ndim, ndim, shape, (void **)data, err);
}

nc_status nc_h5_read_f64(hid_t loc, const char *name, int max_ndim, int *ndim, int64_t *shape, double **data,
                         nc_error *err)
{
    return read_numeric(loc, name, H5T_NATIVE_DOUBLE, sizeof(double), max_ndim, ndim, shape, (void **)data, err);
}

nc_status nc_h5_read_i32(hid_t loc, const char *name, int max_ndim, int *ndim, int64_t *shape, int32_t **data,
                         nc_error *err)
{
    return read_numeric(loc, name, H5T_NATIVE_INT32, sizeof(int32_t), max_ndim, ndim, shape, (void **)data, err);
}

nc_status nc_h5_read_i64(hid_t loc, const char *name, int max_ndim, int *ndim, int64_t *shape, int64_t **data,
                         nc_error *err)
{
    return read_numeric(loc, name, H5T_NATIVE_INT64, sizeof(int64_t), max_ndim, ndim, shape, (void **)data, err);
}

nc_status nc_h5_read_tensor(hid_t loc, const char *name, nc_tensor **out, nc_error *err)
{
    int ndim;
    int64_t shape[NC_MAX_DIMS];
    float *data;
    *out = NULL;
    nc_status st = nc_h5_read_f32(loc, name, NC_MAX_DIMS, &ndim, shape, &data, err);
    if (st != NC_OK)
        return st;
    nc_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        free(data);
        return nc_fail(err, NC_ERR_MEMORY, "out of memory for dataset '%s'", name);
    }
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
    t->data = data;
    *out = t;
    return NC_OK;
}

void nc_h5_free_strings(int64_t n, char **texts)
{
    if (!texts)
        return;
    for (int64_t i = 0; i < n; i++)
        free(texts[i]);
    free(texts);
}

/* Copies strings out of an HDF5 read buffer: variable-length (char* each)
 * or fixed-length (fsize bytes each, maybe without a terminator). */
static char **copy_strings(const void *buf, int64_t n, int is_vlen, size_t fsize)
{
    char **out = calloc(n > 0 ? (size_t)n : 1, sizeof(char *));
    for (int64_t i = 0; out && i < n; i++) {
        const char *s = is_vlen ? ((char *const *)buf)[i] : (const char *)buf + (size_t)i * fsize;
        size_t len = is_vlen ? (s ? strlen(s) : 0) : strnlen(s, fsize);
        if (!(out[i] = malloc(len + 1))) {
            nc_h5_free_strings(i, out);
            return NULL;
        }
        if (len)
            memcpy(out[i], s, len);
        out[i][len] = 0;
    }
    return out;
}

/* Reads n strings from a dataset (is_attr = 0) or an attribute. */
static nc_status read_string_object(hid_t obj, int is_attr, const char *name, hid_t ftype, hid_t space,
                                    int64_t n, int allow_vlen, char ***texts, nc_error *err)
{
    if (H5Tget_class(ftype) != H5T_STRING)
        return nc_fail(err, NC_ERR_FORMAT, "'%s' is not a string", name);
    int is_vlen = H5Tis_variable_str(ftype) > 0;
    if (is_vlen && !allow_vlen) /* see nc_h5util.h: the global heap is not read safely */
        return nc_fail(err, NC_ERR_FORMAT, "'%s' is a variable-length string, which this file type never holds", name);
    size_t fsize = is_vlen ? sizeof(char *) : H5Tget_size(ftype);
    size_t bytes;
    if (fsize == 0 || nc_mul_size((size_t)n, fsize, &bytes) != 0)
        return nc_fail(err, NC_ERR_FORMAT, "'%s' is too large", name);
    if (bytes > nc_memory_budget())
        return nc_budget_check(bytes, name, err);
    hid_t mtype = H5Tcopy(H5T_C_S1);
    H5Tset_size(mtype, is_vlen ? H5T_VARIABLE : fsize);
    H5Tset_cset(mtype, H5Tget_cset(ftype));
    void *buf = calloc(bytes ? bytes : 1, 1);
    nc_status st = NC_OK;
    herr_t rc = -1;
    if (!buf)
        st = nc_fail(err, NC_ERR_MEMORY, "out of memory for '%s'", name);
    else if ((rc = is_attr ? H5Aread(obj, mtype, buf) : H5Dread(obj, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf)) < 0)
        st = read_fail(err, is_attr ? "attribute" : "dataset", name, "cannot be read");
    else if (!(*texts = copy_strings(buf, n, is_vlen, fsize)))
        st = nc_fail(err, NC_ERR_MEMORY, "out of memory for '%s'", name);
    if (is_vlen && rc >= 0)
        H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, buf);
    free(buf);
    nc_h5_close(&mtype);
    return st;
}

static nc_status read_strings(hid_t loc, const char *name, int allow_vlen, int64_t *n, char ***texts,
                              nc_error *err)
{
    hid_t dset, ftype = H5I_INVALID_HID, space = H5I_INVALID_HID;
    int nd;
    int64_t dims[1], numel = 0;
    *texts = NULL;
    *n = 0;
    nc_status st = open_dataset(loc, name, &dset, err);
    if (st == NC_OK) {
        ftype = H5Dget_type(dset);
        space = H5Dget_space(dset);
        st = ftype < 0 || space < 0 ? read_fail(err, "dataset", name, "no type or data space")
                                    : space_dims(space, name, 1, &nd, dims, &numel, err);
    }
    if (st == NC_OK && numel > 0) /* the declared count against the bytes stored and the budget */
        st = check_storage(dset, name, numel, H5Tget_size(ftype) ? H5Tget_size(ftype) : 1, err);
    if (st == NC_OK && numel == 0 && !(*texts = calloc(1, sizeof(char *))))
        st = nc_fail(err, NC_ERR_MEMORY, "out of memory for '%s'", name);
    else if (st == NC_OK && numel > 0)
        st = read_string_object(dset, 0, name, ftype, space, numel, allow_vlen, texts, err);
    if (st == NC_OK)
        *n = numel;
    nc_h5_close(&ftype);
    nc_h5_close(&space);
    nc_h5_close(&dset);
    return st;
}

nc_status nc_h5_read_strings(hid_t loc, const char *name, int64_t *n, char ***texts, nc_error *err)
{
    return read_strings(loc, name, 0, n, texts, err);
}

nc_status nc_h5_read_strings_any(hid_t loc, const char *name, int64_t *n, char ***texts, nc_error *err)
{
    return read_strings(loc, name, 1, n, texts, err);
}

/* Opens attribute `name` with its type and element count (≤ max). */
static nc_status open_attr(hid_t obj, const char *name, int64_t max, hid_t *attr, hid_t *ftype, hid_t *space,
                           int64_t *numel, nc_error *err)
{
    int nd;
    int64_t dims[1];
    *ftype = *space = H5I_INVALID_HID;
    if (H5Aexists(obj, name) <= 0)
        return nc_fail(err, NC_ERR_FORMAT, "attribute '%s' is missing", name);
    *attr = H5Aopen(obj, name, H5P_DEFAULT);
    if (*attr < 0)
        return read_fail(err, "attribute", name, "cannot be opened");
    *ftype = H5Aget_type(*attr);
    *space = H5Aget_space(*attr);
    nc_status st = *ftype < 0 || *space < 0 ? read_fail(err, "attribute", name, "no type or data space")
                                            : space_dims(*space, name, 1, &nd, dims, numel, err);
    if (st == NC_OK && *numel > max)
        st = nc_fail(err, NC_ERR_FORMAT, "attribute '%s' has %lld values, at most %lld expected", name,
                     (long long)*numel, (long long)max);
    if (st != NC_OK) {
        nc_h5_close(ftype);
        nc_h5_close(space);
        nc_h5_close(attr);
    }
    return st;
}

static nc_status attr_get_string(hid_t obj, const char *name, int allow_vlen, char *buf, size_t size,
                                 nc_error *err)
{
    hid_t attr, ftype, space;
    int64_t numel;
    char **texts = NULL;
    nc_status st = open_attr(obj, name, 1, &attr, &ftype, &space, &numel, err);
    if (st != NC_OK)
        return st;
    if (numel != 1)
        st = nc_fail(err, NC_ERR_FORMAT, "attribute '%s' is empty", name);
    if (st == NC_OK)
        st = read_string_object(attr, 1, name, ftype, space, 1, allow_vlen, &texts, err);
    if (st == NC_OK && strlen(texts[0]) >= size)
        st = nc_fail(err, NC_ERR_FORMAT, "attribute '%s' is longer than %zu bytes", name, size - 1);
    if (st == NC_OK)
        memcpy(buf, texts[0], strlen(texts[0]) + 1);
    nc_h5_free_strings(1, texts);
    nc_h5_close(&ftype);
    nc_h5_close(&space);
    nc_h5_close(&attr);
    return st;
}

nc_status nc_h5_attr_get_string(hid_t obj, const char *name, char *buf, size_t size, nc_error *err)
{
    return attr_get_string(obj, name, 0, buf, size, err);
}

nc_status nc_h5_attr_get_string_any(hid_t obj, const char *name, char *buf, size_t size, nc_error *err)
{
    return attr_get_string(obj, name, 1, buf, size, err);
}

/* Reads a numeric attribute of 1..max values, converted to mem_type. */
static nc_status attr_numeric(hid_t obj, const char *name, hid_t mem_type, int max, int *n, void *values,
                              nc_error *err)
{
    hid_t attr, ftype, space;
    int64_t numel;
    nc_status st = open_attr(obj, name, max, &attr, &ftype, &space, &numel, err);
    if (st != NC_OK)
        return st;
    if (!nc_h5_numeric_type_ok(ftype))
        st = nc_fail(err, NC_ERR_FORMAT, "attribute '%s' is not numeric (standard integers, or IEEE floats of 32 or 64 bits)", name);
    else if (numel > 0 && H5Aread(attr, mem_type, values) < 0)
        st = read_fail(err, "attribute", name, "cannot be read");
    if (st == NC_OK && n)
        *n = (int)numel;
    nc_h5_close(&ftype);
    nc_h5_close(&space);
    nc_h5_close(&attr);
    return st;
}

nc_status nc_h5_attr_get_i64(hid_t obj, const char *name, int64_t *value, nc_error *err)
{
    int n = 0;
    nc_status st = attr_numeric(obj, name, H5T_NATIVE_INT64, 1, &n, value, err);
    return st == NC_OK && n != 1 ? nc_fail(err, NC_ERR_FORMAT, "attribute '%s' is empty", name) : st;
}

nc_status nc_h5_attr_get_f64(hid_t obj, const char *name, double *value, nc_error *err)
{
    int n = 0;
    nc_status st = attr_numeric(obj, name, H5T_NATIVE_DOUBLE, 1, &n, value, err);
    return st == NC_OK && n != 1 ? nc_fail(err, NC_ERR_FORMAT, "attribute '%s' is empty", name) : st;
}

nc_status nc_h5_attr_get_i32s(hid_t obj, const char *name, int max, int *n, int32_t *values, nc_error *err)
{
    return attr_numeric(obj, name, H5T_NATIVE_INT32, max, n, values, err);
}

nc_status nc_h5_attr_get_i64s(hid_t obj, const char *name, int max, int *n, int64_t *values, nc_error *err)
{
    return attr_numeric(obj, name, H5T_NATIVE_INT64, max, n, values, err);
}

nc_status nc_h5_attr_get_f32s(hid_t obj, const char *name, int max, int *n, float *values, nc_error *err)
{
    return attr_numeric(obj, name, H5T_NATIVE_FLOAT, max, n, values, err);
}
