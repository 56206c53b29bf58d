/* neurocuda.c — the command-line tool: one sub-command per pipeline step.
 * The commands live in nc_cmd_*.c; this file only dispatches. */
#include <stdio.h>
#include <string.h>

#include "nc_cli.h"
#include "nc_config.h"
#include "sim/nc_cpu_ops.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"info", nc_cmd_info, "show a model's nodes, shapes, MACs and conversion report"},
    {"eval", nc_cmd_eval, "test-set accuracy of the ANN"},
    {"convert", nc_cmd_convert, "calibrate and convert an ANN into an SNN project (.ncsnn)"},
    {"run", nc_cmd_run, "simulate an SNN: accuracy by timestep, firing rates, errors per layer"},
    {"sweep", nc_cmd_sweep, "compare threshold choices: accuracy-vs-T curves side by side"},
    {"export-nir", nc_cmd_export_nir, "write an SNN as a NIR graph for other simulators and chips"},
    {"export-lava", nc_cmd_export_lava, "write an SNN, quantised for Loihi 2, as a lava-dl netx HDF5 file"},
    {"bench", nc_cmd_bench, "time the ANN and the SNN on one batch (median of repeated runs)"},
    {"engines", nc_cmd_engines, "list the engines compiled in and whether they can run here"},
};

static void usage(FILE *out)
{
    fputs("Usage: neurocuda COMMAND [OPTIONS]\n\n"
          "Converts trained networks (ONNX) into spiking neural networks of integrate-and-fire\n"
          "neurons, simulates them and reports what the spikes do.\n\nCommands:\n",
          out);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fputs("\n`neurocuda COMMAND --help` describes a command's options.\n"
          "  --version [--verbose]  print the version (and the CPU kernels and GPU engine in use)\n"
          "\nEnvironment: NC_MEMORY_BUDGET (default 4G) caps what reading one file may allocate;\n"
          "Ctrl-C stops a job at its next batch (exit status 130) and writes no file.\n"
          "\nThe bundled Fashion-MNIST CNN (inputs normalised with --mean 0.2860 --std 0.3530):\n"
          "  " NC_PKGDATADIR "/models/fmnist_cnn.onnx\n",
          out);
}

int main(int argc, char **argv)
{
    nc_cli_handle_sigint(); /* Ctrl-C: exit 130 with a message; jobs then stop at a batch */
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("neurocuda %s\n", NC_VERSION);
        if (argc > 2 && strcmp(argv[2], "--verbose") == 0)
            printf("CPU kernels: %s%s%s\nGPU engine: %s\n", nc_cpu_path(), *nc_cpu_path_note() ? " — " : "",
                   nc_cpu_path_note(), NC_HAVE_CUDA ? "compiled in (see `neurocuda engines`)" : "not compiled in");
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "neurocuda: unknown command '%s'; run `neurocuda --help` for the list\n", argv[1]);
    return 2;
}
