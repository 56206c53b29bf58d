/* nc_cli_util.c — JSON output, Ctrl-C and progress for the CLI. */
#include "nc_cli_util.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void separator(nc_json *j)
{
    if (j->need_comma[j->depth])
        fputc(',', j->out);
    j->need_comma[j->depth] = 1;
}

static void write_escaped(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", out);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

void nc_json_key(nc_json *j, const char *key)
{
    separator(j);
    if (key) {
        write_escaped(j->out, key);
        fputc(':', j->out);
    }
}

void nc_json_begin(nc_json *j, FILE *out)
{
    memset(j, 0, sizeof *j);
    j->out = out;
    fputc('{', out);
}

void nc_json_end(nc_json *j)
{
    fputs("}\n", j->out);
    fflush(j->out);
}

void nc_json_string(nc_json *j, const char *key, const char *value)
{
    nc_json_key(j, key);
    write_escaped(j->out, value ? value : "");
}

void nc_json_number(nc_json *j, const char *key, double value)
{
    nc_json_key(j, key);
    if (isfinite(value))
        fprintf(j->out, "%.10g", value);
    else
        fputs("null", j->out);
}

void nc_json_int(nc_json *j, const char *key, int64_t value)
{
    nc_json_key(j, key);
    fprintf(j->out, "%lld", (long long)value);
}

void nc_json_bool(nc_json *j, const char *key, int value)
{
    nc_json_key(j, key);
    fputs(value ? "true" : "false", j->out);
}

void nc_json_open(nc_json *j, const char *key, char bracket)
{
    nc_json_key(j, key);
    fputc(bracket, j->out);
    if (j->depth < 31)
        j->depth++;
    j->need_comma[j->depth] = 0;
}

void nc_json_close(nc_json *j, char bracket)
{
    fputc(bracket, j->out);
    if (j->depth > 0)
        j->depth--;
}

static volatile sig_atomic_t interrupted, polling;

/* While a job polls nc_cli_progress, the first Ctrl-C only sets the flag so
 * that the job stops cleanly at its next batch; otherwise (loading, set-up,
 * or a second Ctrl-C) the process leaves at once with status 130, writing
 * nothing (every save goes to a temporary file first: the old file stays). */
static void on_sigint(int sig)
{
    (void)sig;
    if (interrupted || !polling) {
        static const char msg[] = "\nneurocuda: interrupted (Ctrl-C); stopped at once, no file was changed\n";
        ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)ignored;
        _exit(130);
    }
    interrupted = 1;
}

static void install_handler(void)
{
    static int installed;
    if (installed)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    installed = 1;
}

void nc_cli_handle_sigint(void) { install_handler(); }

void nc_cli_install_sigint(void)
{
    install_handler();
    polling = 1;
}

int nc_cli_interrupted(void) { return interrupted != 0; }

int nc_cli_progress(void *user, const nc_progress *p)
{
    (void)user;
    if (isatty(STDERR_FILENO)) {
        if (p->total > 0)
            fprintf(stderr, "\r%s: %lld/%lld", p->stage, (long long)p->done, (long long)p->total);
        else
            fprintf(stderr, "\r%s: %lld", p->stage, (long long)p->done);
        if (p->done >= p->total && p->total > 0)
            fputs("          \r", stderr);
        fflush(stderr);
    }
    return interrupted != 0;
}

long nc_cli_parse_long(const char *option, const char *text, long min, long max)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text ? text : "", &end, 10);
    if (!text || !*text || *end || errno || v < min || v > max) {
        fprintf(stderr, "neurocuda: %s needs an integer from %ld to %ld, got '%s'\n", option, min, max,
                text ? text : "");
        return -1;
    }
    return v;
}

int nc_cli_parse_double(const char *option, const char *text, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text ? text : "", &end);
    if (!text || !*text || *end || errno || !isfinite(v)) {
        fprintf(stderr, "neurocuda: %s needs a number, got '%s'\n", option, text ? text : "");
        return -1;
    }
    *out = v;
    return 0;
}

int nc_cli_usage_exit(int opt, void (*usage)(FILE *out))
{
    usage(opt == 'h' ? stdout : stderr);
    return opt == 'h' ? 0 : 2;
}

const char *nc_cli_operand(int argc, char **argv, int complete, const char *complaint, void (*usage)(FILE *out))
{
    if (optind == argc - 1 && complete)
        return argv[optind];
    fprintf(stderr, "neurocuda %s\n", complaint);
    if (usage)
        usage(stderr);
    return NULL;
}

int nc_cli_check_choice(int parsed, const char *option, const char *choices, const char *arg)
{
    if (parsed)
        return 1;
    fprintf(stderr, "neurocuda: %s must be %s, got '%s'\n", option, choices, arg);
    return -1;
}

int nc_cli_parse_choice(const char *option, const char *arg, const char *const *names, int n)
{
    char choices[256] = "";
    for (int k = 0; k < n; k++) {
        if (strcmp(arg, names[k]) == 0)
            return k;
        snprintf(choices + strlen(choices), sizeof choices - strlen(choices), "%s%s",
                 k ? (k == n - 1 ? " or " : ", ") : "", names[k]);
    }
    return nc_cli_check_choice(0, option, choices, arg);
}
