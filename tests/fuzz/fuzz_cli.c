/* fuzz_cli.c — the argument parsers of `neurocuda` (every sub-command's
 * option table, the shared data and conversion options, number parsing).
 * Input: the arguments separated by NUL bytes; the first byte picks the
 * command.  It runs in an empty temporary folder, so a model named on the
 * command line does not exist and a command ends after parsing (no file is
 * written, nothing long runs). */
#include <getopt.h>

#include "fuzz_common.h"
#include "nc_cli.h"

static const struct { const char *name; int (*run)(int, char **); } commands[] = {
    {"info", nc_cmd_info},       {"eval", nc_cmd_eval},   {"convert", nc_cmd_convert},
    {"run", nc_cmd_run},         {"sweep", nc_cmd_sweep}, {"export-nir", nc_cmd_export_nir},
    {"bench", nc_cmd_bench},     {"engines", nc_cmd_engines},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])
#define MAX_ARGS 64

static int saved_out = -1, saved_err = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_init_budget();
    if (chdir(fuzz_dir()) != 0)
        abort();
    return 0;
}

/* The commands print; keep the fuzzer's (or the TAP driver's) output clean. */
static void quiet(int on)
{
    fflush(stdout);
    fflush(stderr);
    if (on) {
        int null = open("/dev/null", O_WRONLY);
        saved_out = dup(1), saved_err = dup(2);
        dup2(null, 1), dup2(null, 2);
        close(null);
    } else {
        dup2(saved_out, 1), dup2(saved_err, 2);
        close(saved_out), close(saved_err);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    char *text = malloc(size + 1);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = (char *)commands[data[0] % N_COMMANDS].name;
    for (char *p = text; p < text + size - 1 && argc < MAX_ARGS; p += strlen(p) + 1)
        argv[argc++] = p;
    argv[argc] = NULL;
    optind = 0; /* glibc: start a new scan */
    quiet(1);
    commands[data[0] % N_COMMANDS].run(argc, argv);
    quiet(0);
    free(text);
    return 0;
}
