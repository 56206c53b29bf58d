/* nc_cli_util.h — small helpers for the command-line tool: a JSON writer,
 * Ctrl-C handling and progress on stderr.  No pipeline logic lives here. */
#ifndef NC_CLI_UTIL_H
#define NC_CLI_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "nc_status.h"

/* A streaming JSON writer for one object printed on one line. */
typedef struct nc_json {
    FILE *out;
    int depth;
    int need_comma[32];
} nc_json;

void nc_json_begin(nc_json *j, FILE *out);        /* starts the top-level object  */
void nc_json_end(nc_json *j);                     /* closes it and prints '\n'    */
void nc_json_key(nc_json *j, const char *key);
void nc_json_string(nc_json *j, const char *key, const char *value); /* key may be NULL in arrays */
void nc_json_number(nc_json *j, const char *key, double value);      /* NaN/inf → null */
void nc_json_int(nc_json *j, const char *key, int64_t value);
void nc_json_bool(nc_json *j, const char *key, int value);
void nc_json_open(nc_json *j, const char *key, char bracket);        /* '{' or '['    */
void nc_json_close(nc_json *j, char bracket);

/* Ctrl-C.  nc_cli_handle_sigint (main, first thing): a Ctrl-C makes the
 * process print "interrupted" and leave with status 130.  nc_cli_install_sigint
 * (right before a long job that passes nc_cli_progress): from then on the
 * first Ctrl-C only sets a flag, nc_cli_progress returns non-zero, and the
 * job stops cleanly at its next batch with NC_ERR_CANCELLED (which
 * nc_cli_error reports as "interrupted", returning 130); a second Ctrl-C
 * leaves at once.  nc_cli_interrupted: 1 once Ctrl-C was pressed. */
void nc_cli_handle_sigint(void);
void nc_cli_install_sigint(void);
int nc_cli_interrupted(void);

/* Progress callback for nc_progress_fn: a single updating line on stderr when
 * stderr is a terminal, otherwise silent.  user: unused. */
int nc_cli_progress(void *user, const nc_progress *p);

/* Parses a positive integer option value; returns -1 (and prints an error
 * naming the option) when it is not one. */
long nc_cli_parse_long(const char *option, const char *text, long min, long max);
int nc_cli_parse_double(const char *option, const char *text, double *out);
/* 1 when `parsed` holds (a value parser succeeded), else −1 after printing
 * "neurocuda: OPTION must be CHOICES, got 'ARG'". */
int nc_cli_check_choice(int parsed, const char *option, const char *choices, const char *arg);
/* The index of arg among names[0 … n−1], or −1 after printing that message
 * with the names ("a, b or c"). */
int nc_cli_parse_choice(const char *option, const char *arg, const char *const *names, int n);

/* The end of a command's option loop, for an option nothing else took: -h
 * prints the usage on stdout (returns 0), anything else prints it on stderr
 * (returns 2, getopt having named the option). */
int nc_cli_usage_exit(int opt, void (*usage)(FILE *out));
/* The command's one operand, argv[optind], when it is the only one left and
 * `complete` holds (e.g. -o was given); otherwise NULL after printing
 * "neurocuda <complaint>" and (unless NULL) the usage on stderr. */
const char *nc_cli_operand(int argc, char **argv, int complete, const char *complaint, void (*usage)(FILE *out));

#endif
