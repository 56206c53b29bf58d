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
int nc_cmd_convert(int argc, char **argv);
int nc_cmd_run(int argc, char **argv);
int nc_cmd_sweep(int argc, char **argv);
int nc_cmd_bench(int argc, char **argv);
int nc_cmd_export_nir(int argc, char **argv);
int nc_cmd_export_lava(int argc, char **argv);

/* Loads a model by its extension (.onnx, or a converted project .ncsnn).  On
 * failure prints the one-line error and returns NULL.  When pp is not NULL
 * and the file is a project with stored preprocessing, *pp receives it and
 * *has_pp is set. */
nc_net *nc_cli_load_model(const char *path);
nc_net *nc_cli_load_model_pp(const char *path, nc_preprocess *pp, int *has_pp);
/* 1 if the net holds spiking or stateful neurons (converted IF, or the
 * neuron models of an imported NIR graph), else 0. */
int nc_cli_is_snn(const nc_net *net);
/* nc_cli_load_model, for commands that need a converted net: NULL (with a
 * message that says to convert it first) when it holds no spiking neurons. */
nc_net *nc_cli_load_snn(const char *path);
nc_net *nc_cli_load_snn_pp(const char *path, nc_preprocess *pp, int *has_pp); /* as nc_cli_load_model_pp */
/* 1 if the net holds NIR neuron models, which have no ANN or QCFS function. */
int nc_cli_has_nir_models(const nc_net *net);
/* Options of NIR import, set by --dt / --nir-reset-subtract / --nir-if-dt;
 * nc_cli_load_model prints how the file was read (and warnings) on stderr. */
struct nc_nir_load_options;
void nc_cli_set_nir_options(const struct nc_nir_load_options *opts);

/* Dataset options shared by eval, convert, run, sweep: --data, --mean, --std,
 * --scale, --limit.  nc_cli_data_option() handles one getopt result and
 * returns 1 if it consumed it, 0 if not, -1 on a bad value. */
typedef struct nc_cli_data {
    const char *spec;   /* default "fashion-mnist" */
    nc_preprocess pp;
    long limit;         /* 0 = all */
} nc_cli_data;

enum { NC_OPT_DATA = 1000, NC_OPT_MEAN, NC_OPT_STD, NC_OPT_SCALE, NC_OPT_LIMIT, NC_OPT_JSON, NC_OPT_ENGINE,
       NC_OPT_BATCH, NC_OPT_THREADS, NC_OPT_THRESHOLD, NC_OPT_PER_CHANNEL, NC_OPT_L, NC_OPT_MAXPOOL,
       NC_OPT_CALIB_IMAGES, NC_OPT_V0, NC_OPT_RESET, NC_OPT_FIRE, NC_OPT_ENCODING, NC_OPT_SEED, NC_OPT_RECORD,
       NC_OPT_PNG, NC_OPT_REPEATS, NC_OPT_WARMUP, NC_OPT_PLOTS, NC_OPT_DT, NC_OPT_APPROX, NC_OPT_ENGINE_OPT,
       NC_OPT_TARGET_T, NC_OPT_TIME_BUDGET, NC_OPT_GPUS };

/* getopt_long entries shared by the commands that read a dataset and by
 * those that convert; each command lists them in its own option table. */
#define NC_CLI_DATA_LONG_OPTIONS                                                                   \
    {"data", required_argument, NULL, NC_OPT_DATA}, {"mean", required_argument, NULL, NC_OPT_MEAN}, \
    {"std", required_argument, NULL, NC_OPT_STD}, {"scale", required_argument, NULL, NC_OPT_SCALE},  \
    {"limit", required_argument, NULL, NC_OPT_LIMIT},                                              \
    {"engine-opt", required_argument, NULL, NC_OPT_ENGINE_OPT}, {"gpus", required_argument, NULL, NC_OPT_GPUS}
#define NC_CLI_CONVERT_LONG_OPTIONS                                                                \
    {"threshold", required_argument, NULL, NC_OPT_THRESHOLD},                                      \
    {"per-channel", no_argument, NULL, NC_OPT_PER_CHANNEL}, {"L", required_argument, NULL, NC_OPT_L}, \
    {"maxpool", required_argument, NULL, NC_OPT_MAXPOOL},                                          \
    {"calib-images", required_argument, NULL, NC_OPT_CALIB_IMAGES},                                \
    {"v0", required_argument, NULL, NC_OPT_V0}, {"reset", required_argument, NULL, NC_OPT_RESET},  \
    {"fire", required_argument, NULL, NC_OPT_FIRE}

/* Conversion options shared by convert and sweep (--threshold, --per-channel,
 * --L, --maxpool, --calib-images, --v0, --reset, --fire, -T). Returns 1 if it
 * consumed the option, 0 if not, -1 on a bad value. */
struct nc_pipeline_options;
int nc_cli_convert_option(struct nc_pipeline_options *o, int opt, const char *arg);
extern const char nc_cli_convert_help[];

void nc_cli_data_init(nc_cli_data *d);
int nc_cli_data_option(nc_cli_data *d, int opt, const char *arg);
/* Opens the dataset (printing the error on failure). */
nc_dataset *nc_cli_open_data(const nc_cli_data *d, nc_split split);
/* Creates and loads an engine by name for `net` (printing errors), with the
 * --engine-opt settings of the command line; threads > 0 overrides its
 * threads setting. */
nc_engine *nc_cli_engine(const char *name, const nc_net *net, int threads);
/* The pipeline runner's description of `convert ARGS` (argv[0] = "convert")
 * for `net`, without running it: what the command would run.  0, or the
 * exit code of a bad command line (the message printed).  The description
 * points into static storage: one at a time. */
struct nc_runner_desc;
struct nc_pipeline_options;
/* The part of a runner description every command fills the same way: the
 * model, the dataset options, the engine (with --engine-opt) and the
 * conversion options. */
struct nc_runner_desc nc_cli_runner_desc(const nc_net *net, const char *model, const nc_cli_data *data,
                                         const char *engine, const struct nc_pipeline_options *opts);
/* Runs the job `d` with Ctrl-C stopping it at its next batch: *r is the
 * runner (NULL when it could not be planned; free it), for the results also
 * after a failure or a cancel. */
struct nc_runner;
struct nc_runner_observer;
nc_status nc_cli_run_job(const struct nc_runner_desc *d, const struct nc_runner_observer *obs, struct nc_runner **r,
                         nc_error *err);
int nc_cli_convert_describe(int argc, char **argv, const nc_net *net, struct nc_runner_desc *out);
/* The same for `run ARGS` (argv[0] = "run") of the spiking `net`, the test
 * split left for the runner to open (the command opens it itself first). */
int nc_cli_run_describe(int argc, char **argv, const nc_net *net, struct nc_runner_desc *out);

/* The --engine-opt KEY=VALUE settings given (nc_cli_data_option reads them). */
struct nc_engine_settings;
extern struct nc_engine_settings nc_cli_engine_settings;

/* Prints "neurocuda: <message>" on stderr; returns 1 (the exit code), or
 * 130 with an "interrupted" message when Ctrl-C cancelled the job. */
int nc_cli_error(const nc_error *err);

#endif
