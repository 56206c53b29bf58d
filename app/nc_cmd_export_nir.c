/* nc_cmd_export_nir.c — `neurocuda export-nir SNN -o OUT.nir`: the converted
 * network as a NIR graph for other simulators and chips, and the list of what
 * they will read differently. */
#include <getopt.h>
#include <stdio.h>

#include "nc_cli.h"
#include "nc_nir.h"

static void usage(FILE *out)
{
    fputs("Usage: neurocuda export-nir SNN -o OUT.nir [--approx]\n"
          "\n"
          "Writes the spiking network in SNN (.ncsnn from `neurocuda convert`, or a .nir) as a NIR graph\n"
          "(HDF5, read by the nir package 1.0.6+ and through it by Sinabs, snnTorch, Norse, Lava, Spyx,\n"
          "SpiNNaker2...).  What NIR cannot say (reset by subtraction, v0 = θ/2, L, the MaxPool strategy,\n"
          "the accumulating output) is kept in metadata, and listed as what other tools will read\n"
          "differently.  A MaxPool has no NIR primitive: convert with --maxpool avg, or pass --approx to\n"
          "write it as an average pool.\n"
          "\n"
          "  -o, --output F   the NIR file to write (atomically)\n"
          "  --approx         allow approximations (MaxPool as average pooling), listed as differences\n",
          out);
}

int nc_cmd_export_nir(int argc, char **argv)
{
    static const struct option options[] = {{"output", required_argument, NULL, 'o'},
                                            {"approx", no_argument, NULL, NC_OPT_APPROX},
                                            {"help", no_argument, NULL, 'h'},
                                            {0}};
    const char *output = NULL;
    nc_nir_export_options opts = {0};
    int opt;
    while ((opt = getopt_long(argc, argv, "ho:", options, NULL)) != -1) {
        if (opt == 'o')
            output = optarg;
        else if (opt == NC_OPT_APPROX)
            opts.allow_approx = 1;
        else
            return nc_cli_usage_exit(opt, usage);
    }
    const char *model =
        nc_cli_operand(argc, argv, output != NULL, "export-nir: give one SNN file and -o OUT.nir", usage);
    if (!model)
        return 2;
    nc_net *net = nc_cli_load_snn(model);
    if (!net)
        return 1;
    int rc = 0;
    nc_error err = {0};
    nc_nir_notes notes = {0};
    opts.source = model;
    if (nc_nir_export(net, output, &opts, &notes, &err) != NC_OK) {
        rc = nc_cli_error(&err);
    } else {
        char text[16384];
        printf("wrote %s (NIR %s, %d nodes)\n", output, NC_NIR_VERSION, net->n_nodes);
        if (nc_nir_notes_count(&notes, NC_NIR_NOTE_DIFFERENCE) > 0)
            printf("Other tools will read this differently:\n%s",
                   nc_nir_notes_format(&notes, NC_NIR_NOTE_DIFFERENCE, text, sizeof text));
        if (nc_nir_notes_count(&notes, NC_NIR_NOTE_INFO) > 0)
            printf("Notes:\n%s", nc_nir_notes_format(&notes, NC_NIR_NOTE_INFO, text, sizeof text));
    }
    nc_nir_notes_clear(&notes);
    nc_net_free(net);
    return rc;
}
