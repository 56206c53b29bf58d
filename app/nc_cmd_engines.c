/* nc_cmd_engines.c — `neurocuda engines [--json]`: the engines compiled in,
 * whether each can run here, and the GPU's properties or why it cannot. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "nc_cli.h"
#include "nc_config.h"
#include "sim/nc_cpu_ops.h"
#if NC_HAVE_CUDA
#include "gpu/nc_gpu.h"
#endif

typedef struct engine_row {
    const char *name;
    int compiled, available;
    char detail[600];
} engine_row;

static void gpu_row(engine_row *row)
{
    row->name = "gpu";
#if NC_HAVE_CUDA
    nc_gpu_info info;
    nc_gpu_query(&info);
    row->compiled = 1;
    row->available = info.available;
    if (info.available)
        snprintf(row->detail, sizeof row->detail, "%s, %.1f GiB, %d SMs, compute %d.%d", info.name,
                 (double)info.total_memory / (1 << 30), info.sm_count, info.cc_major, info.cc_minor);
    else
        snprintf(row->detail, sizeof row->detail, "%s", info.reason);
#else
    snprintf(row->detail, sizeof row->detail, "not compiled in (built without CUDA)");
#endif
}

int nc_cmd_engines(int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, NC_OPT_JSON}, {"help", no_argument, NULL, 'h'}, {0}};
    int json = 0, opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        if (opt == NC_OPT_JSON)
            json = 1;
        else if (opt == 'h') {
            puts("Usage: neurocuda engines [--json]\n\nLists the engines compiled into this build, whether each "
                 "can run on this machine,\nthe build of the CPU kernels in use (avx512, avx2 or baseline; "
                 "NC_CPU_PATH asks for one),\nand the GPU's name, memory and SM count (or why it is unavailable).");
            return 0;
        } else
            return 2;
    }
    engine_row rows[3] = {{"cpu", 1, 1, ""}};
    /* the build of the CPU kernels this machine runs (sim/nc_cpu_dispatch.c) */
    snprintf(rows[0].detail, sizeof rows[0].detail, "float32 reference (OpenBLAS); CPU kernels: %s%s%s",
             nc_cpu_path(), *nc_cpu_path_note() ? " — " : "", nc_cpu_path_note());
    gpu_row(&rows[1]);
    rows[2] = (engine_row){"loihi", 1, 1, "Loihi-2-style fixed point: bit-accurate integer IF neurons (CPU)"};
    for (int i = 0; i < 3; i++) {
        nc_engine *e = NULL;
        nc_error err = {0};
        if (nc_engine_new(rows[i].name, &e, &err) == NC_OK) {
            rows[i].compiled = 1;
            nc_engine_free(e);
        } else if (rows[i].available) {
            rows[i].available = 0;
            snprintf(rows[i].detail, sizeof rows[i].detail, "%s", err.message);
        }
    }
    printf("%-7s %-9s %-10s %s\n", "engine", "compiled", "available", "details");
    for (int i = 0; i < 3; i++)
        printf("%-7s %-9s %-10s %s\n", rows[i].name, rows[i].compiled ? "yes" : "no",
               rows[i].available ? "yes" : "no", rows[i].detail);
    if (json) {
        nc_json j;
        nc_json_begin(&j, stdout);
        nc_json_open(&j, "engines", '[');
        for (int i = 0; i < 3; i++) {
            nc_json_open(&j, NULL, '{');
            nc_json_string(&j, "name", rows[i].name);
            nc_json_bool(&j, "compiled", rows[i].compiled);
            nc_json_bool(&j, "available", rows[i].available);
            nc_json_string(&j, "details", rows[i].detail);
            if (i == 0)
                nc_json_string(&j, "cpu_kernels", nc_cpu_path());
            nc_json_close(&j, '}');
        }
        nc_json_close(&j, ']');
        nc_json_end(&j);
    }
    return 0;
}
