/* nc_test_cpu_path.h — for the tests of the CPU kernels, which meson runs
 * once per build of them (NC_CPU_PATH=avx512|avx2|baseline): says which build
 * runs, and skips the whole program when this CPU cannot run the one asked
 * for (so a machine without AVX-512 reports a skip, not a pass). */
#ifndef NC_TEST_CPU_PATH_H
#define NC_TEST_CPU_PATH_H

#include "nc_test.h"

#include "../sim/nc_cpu_ops.h"

/* Says which build runs; when this CPU cannot run the one asked for, ends
 * the program after printing the TAP plan of a skipped program. */
static inline void nc_test_cpu_path_or_skip(void)
{
    const char *wanted = getenv("NC_CPU_PATH");
    if (wanted && *wanted && !nc_cpu_path_supported(wanted)) {
        printf("1..0 # SKIP this CPU cannot run the %s build of the kernels\n", wanted);
        exit(0);
    }
    printf("# CPU kernels: %s%s%s\n", nc_cpu_path(), *nc_cpu_path_note() ? " — " : "", nc_cpu_path_note());
}

/* The build asked for is the build that runs. */
static inline void test_cpu_path_taken(void)
{
    const char *wanted = getenv("NC_CPU_PATH");
    if (wanted && *wanted)
        NC_CHECK(strcmp(nc_cpu_path(), wanted) == 0, "NC_CPU_PATH=%s but %s runs", wanted, nc_cpu_path());
    NC_CHECK(nc_cpu_path_supported(nc_cpu_path()), "the build in use is one this CPU runs");
    NC_CHECK(nc_cpu_path_supported("baseline"), "baseline runs everywhere");
}

#endif
