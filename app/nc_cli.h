/* nc_cli.h — the sub-commands of `neurocuda` and what they share.  Each
 * command parses its own options, calls the pipeline and prints; exit code 0
 * on success, non-zero with a one-line error on stderr otherwise. */
#ifndef NC_CLI_H
#define NC_CLI_H

#include "nc_cli_util.h"
#include "nc_dataset.h"
#include "nc_engine.h"
#include "nc_net.h"

int nc_cmd_info(int argc, char **argv);
int nc_cmd_eval(int argc, char **argv);
int nc_cmd_engines(int argc, char **argv);

/* Loads a model by its extension (.onnx; later .nir and .ncsnn).  On failure
 * prints the one-line error and returns NULL. */
nc_net *nc_cli_load_model(const char *path);

/* Dataset options shared by eval, convert, run, sweep: --data, --mean, --std,
 * --scale, --limit.  nc_cli_data_option() handles one getopt result and
 * returns 1 if it consumed it, 0 if not, -1 on a bad value. */
typedef struct nc_cli_data {
    const char *spec;   /* default "fashion-mnist" */
    nc_preprocess pp;
    long limit;         /* 0 = all */
} nc_cli_data;

enum { NC_OPT_DATA = 1000, NC_OPT_MEAN, NC_OPT_STD, NC_OPT_SCALE, NC_OPT_LIMIT, NC_OPT_JSON, NC_OPT_ENGINE,
       NC_OPT_BATCH, NC_OPT_THREADS };

void nc_cli_data_init(nc_cli_data *d);
int nc_cli_data_option(nc_cli_data *d, int opt, const char *arg);
/* Opens the dataset (printing the error on failure). */
nc_dataset *nc_cli_open_data(const nc_cli_data *d, nc_split split);
/* Creates and loads an engine by name for `net` (printing errors). */
nc_engine *nc_cli_engine(const char *name, const nc_net *net, int threads);

/* Prints "neurocuda: <message>" on stderr; returns 1 (the exit code). */
int nc_cli_error(const nc_error *err);

#endif
