/* nc_cmd_export_lava.c — `neurocuda export-lava SNN -o OUT.net`: the
 * converted network, quantised as the loihi engine runs it, as a lava-dl netx
 * HDF5 file, and the list of what netx runs differently. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "nc_cli.h"
#include "nc_cli_loihi.h"

static void usage(FILE *out)
{
    fputs("Usage: neurocuda export-lava SNN -o OUT.net [-T N] [--loihi-reset subtract|zero] [--loihi-vth N]\n"
          "                             [--loihi-input-bits F]\n"
          "\n"
          "Quantises the spiking network in SNN (.ncsnn from `neurocuda convert`) as the loihi engine runs\n"
          "it (8-bit weights, 17-bit thresholds, 13-bit biases; `neurocuda run SNN --engine loihi` shows\n"
          "the errors) and writes it in lava-dl's netx HDF5 layout: /layer/0 the input, then one conv or\n"
          "dense layer per synaptic layer with CUBA neurons set up as IF (iDecay 4096, vDecay 0), and\n"
          "/simulation.  Average pools before a layer are folded into its weights.  netx cannot express\n"
          "reset by subtraction (Lava's LIF resets to zero), v(0), the analog input, or a MaxPool: the\n"
          "output lists each difference.\n"
          "\n"
          "  -o, --output F        the netx file to write (atomically: temporary file, then rename)\n"
          "  -T N                  steps per sample, written as /simulation/tSample = T + delay (default 32)\n"
          "  --loihi-reset R       the reset the network is meant to run with: subtract (default) | zero\n"
          "  --loihi-vth N         threshold mantissa to aim at (default 4096)\n"
          "  --loihi-input-bits F  fractional bits of the input payload (default 8)\n",
          out);
}

int nc_cmd_export_lava(int argc, char **argv)
{
    static const struct option options[] = {{"output", required_argument, NULL, 'o'},
                                            NC_CLI_LOIHI_LONG_OPTIONS,
                                            {"help", no_argument, NULL, 'h'},
                                            {0}};
    const char *output = NULL;
    nc_cli_loihi l;
    nc_cli_loihi_init(&l);
    int T = 32, opt;
    long v;
    while ((opt = getopt_long(argc, argv, "ho:T:", options, NULL)) != -1) {
        int used = nc_cli_loihi_option(&l, opt, optarg);
        if (used < 0)
            return 2;
        if (used)
            continue;
        if (opt == 'o') {
            output = optarg;
        } else if (opt == 'T') {
            if ((v = nc_cli_parse_long("-T", optarg, 1, 1000000)) < 0)
                return 2;
            T = (int)v;
        } else
            return nc_cli_usage_exit(opt, usage);
    }
    const char *model =
        nc_cli_operand(argc, argv, output != NULL, "export-lava: give one SNN file and -o OUT.net", usage);
    if (!model)
        return 2;
    nc_net *net = nc_cli_load_snn(model);
    if (!net)
        return 1;
    nc_error err = {0};
    nc_loihi_net *q = NULL;
    nc_loihi_notes notes = {0};
    int rc = 0;
    if (nc_loihi_quantise(net, &l.opts.quant, &q, &err) != NC_OK) {
        nc_error_prefix(&err, "%s", model);
        rc = nc_cli_error(&err);
    } else {
        nc_loihi_netx_options xo = {l.opts.reset, T};
        if (nc_loihi_export_netx(q, output, &xo, &notes, &err) != NC_OK) {
            rc = nc_cli_error(&err);
        } else {
            size_t size = 1 << 16;
            char *buf = malloc(size);
            printf("wrote %s (lava-dl netx HDF5: input + %d synaptic layers, CUBA neurons as IF, %d-step "
                   "synaptic delay to the output)\n", output, q->n_layers, q->max_depth);
            if (buf)
                fputs(nc_loihi_report_text(q, buf, size), stdout);
            free(buf);
            printf("netx will run this differently:\n");
            for (int i = 0; i < notes.count; i++)
                printf("  - %s\n", notes.lines[i]);
        }
    }
    nc_loihi_notes_clear(&notes);
    nc_loihi_net_free(q);
    nc_net_free(net);
    return rc;
}
