/* nc_file.c — safe replacement of files (see nc_file.h). */
#include "nc_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int fsync_path(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

int nc_file_commit(const char *tmp, const char *path)
{
    /* the data must be on disk before the rename makes it the real file */
    if (fsync_path(tmp, O_RDONLY) != 0 || rename(tmp, path) != 0)
        return -1;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    fsync_path(dirname(dir), O_RDONLY | O_DIRECTORY); /* best effort: makes the rename durable */
    return 0;
}
