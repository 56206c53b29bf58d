/* nc_test_runner.h — one pipeline-runner job for a test: the runner after
 * its stages ran, or NULL with the runner's message printed as a TAP comment
 * (the caller checks for NULL).  Include after nc_test.h. */
#ifndef NC_TEST_RUNNER_H
#define NC_TEST_RUNNER_H

#include <stdio.h>

#include "../sim/nc_runner.h"

static inline nc_runner *nc_test_run_job(const nc_runner_desc *d, const char *what)
{
    nc_runner *r = NULL;
    nc_error err = {0};
    nc_status s = nc_runner_new(d, &r, &err);
    if (s == NC_OK)
        s = nc_runner_run(r, NULL, &err);
    if (s == NC_OK)
        return r;
    printf("# %s: %s\n", what, err.message);
    nc_runner_free(r);
    return NULL;
}

#endif
