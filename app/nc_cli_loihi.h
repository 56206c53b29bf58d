/* nc_cli_loihi.h — the --loihi-* options of `neurocuda run` and
 * `neurocuda export-lava`, and what the CLI prints about the loihi engine
 * (quantisation report, hardware checks, overflow counts). */
#ifndef NC_CLI_LOIHI_H
#define NC_CLI_LOIHI_H

#include <getopt.h>
#include <stdio.h>

#include "nc_engine_loihi.h"
#include "nc_engine_registry.h"

/* Option codes of their own range, clear of nc_cli.h's. */
enum { NC_OPT_LOIHI_RESET = 2000, NC_OPT_LOIHI_FIRE, NC_OPT_LOIHI_DELAY, NC_OPT_LOIHI_SPIKES,
       NC_OPT_LOIHI_MESSAGE_BITS, NC_OPT_LOIHI_VTH, NC_OPT_LOIHI_INPUT_BITS, NC_OPT_LOIHI_QUIET };

#define NC_CLI_LOIHI_LONG_OPTIONS                                                                    \
    {"loihi-reset", required_argument, NULL, NC_OPT_LOIHI_RESET},                                    \
    {"loihi-fire", required_argument, NULL, NC_OPT_LOIHI_FIRE},                                      \
    {"loihi-delay", required_argument, NULL, NC_OPT_LOIHI_DELAY},                                    \
    {"loihi-spikes", required_argument, NULL, NC_OPT_LOIHI_SPIKES},                                  \
    {"loihi-message-bits", required_argument, NULL, NC_OPT_LOIHI_MESSAGE_BITS},                      \
    {"loihi-vth", required_argument, NULL, NC_OPT_LOIHI_VTH},                                        \
    {"loihi-input-bits", required_argument, NULL, NC_OPT_LOIHI_INPUT_BITS},                          \
    {"loihi-quiet", no_argument, NULL, NC_OPT_LOIHI_QUIET}

/* The help lines of those options. */
extern const char nc_cli_loihi_help[];

/* Each --loihi-X switch is the loihi engine's registered option X
 * (`neurocuda engines`): it lands in `settings` as X=VALUE, which the engine
 * is created with, and in `opts` for export-lava, which quantises without an
 * engine. */
typedef struct nc_cli_loihi {
    nc_loihi_options opts;
    nc_engine_settings settings;
    int given;  /* a --loihi-* option was given */
    int quiet;  /* --loihi-quiet: no quantisation report or hardware table */
} nc_cli_loihi;

void nc_cli_loihi_init(nc_cli_loihi *l);
/* 1 if it consumed the option, 0 if not, −1 on a bad value (printed). */
int nc_cli_loihi_option(nc_cli_loihi *l, int opt, const char *arg);

/* The --engine-opt settings `given` followed by the switches' (which win
 * over an --engine-opt of the same key): what a loihi engine is created with. */
nc_status nc_cli_loihi_settings(const nc_cli_loihi *l, const nc_engine_settings *given, nc_engine_settings *out,
                                nc_error *err);
/* Prints, unless --loihi-quiet, the quantisation report of a loaded loihi
 * engine, the hardware checks (warnings with numbers) and its settings. */
void nc_cli_loihi_print_setup(const nc_engine *e, const nc_cli_loihi *l, int T, FILE *out);
/* Prints the latency, spike and overflow counts of the runs so far. */
void nc_cli_loihi_print_stats(const nc_engine *e, int T, FILE *out);

#endif
