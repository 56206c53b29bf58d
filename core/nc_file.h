/* nc_file.h — how core/ replaces a file safely.
 *
 * Every save writes a temporary file next to the target ("<path>.tmp-XXXXXX",
 * same folder, so that the rename is atomic) and then calls nc_file_commit.
 * A failed write (a full disk, EFBIG, a crash) therefore leaves the old file
 * exactly as it was; only the temporary file needs removing. */
#ifndef NC_FILE_H
#define NC_FILE_H

/* Flushes `tmp` to disk (fsync), renames it over `path`, then fsyncs the
 * folder so that the rename itself is durable.  Returns 0, or -1 with errno
 * set (nothing renamed; the caller removes tmp). */
int nc_file_commit(const char *tmp, const char *path);

#endif
