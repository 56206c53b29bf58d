/* nc_cli_loihi.c — the CLI's loihi options and printouts (nc_cli_loihi.h). */
#include "nc_cli_loihi.h"

#include <stdlib.h>
#include <string.h>

#include "nc_cli.h"
#include "nc_engine_registry.h"

const char nc_cli_loihi_help[] =
    "  Loihi engine (--engine loihi; each --loihi-X V is its --engine-opt X=V; docs/LOIHI.md):\n"
    "  --loihi-reset R        subtract (default: our QCFS neurons) | zero (Lava's stock LIF)\n"
    "  --loihi-fire C         gt (default: fire when v > threshold, the chip) | ge\n"
    "  --loihi-delay D        compensated (default: 1-step synaptic delay per layer, each layer\n"
    "                         starting when its input arrives; latency T + L - 1) | off | raw\n"
    "                         (the delay with every layer starting at step 0)\n"
    "  --loihi-spikes S       binary (default) | graded (payload = thresholds crossed)\n"
    "  --loihi-message-bits B graded payload bits, 1..24 (default 8)\n"
    "  --loihi-vth N          threshold mantissa to aim at, 1..131071 (default 4096)\n"
    "  --loihi-input-bits F   fractional bits of the input payload x*2^F, 0..16 (default 8)\n"
    "  --loihi-quiet          do not print the quantisation report and hardware checks\n";

void nc_cli_loihi_init(nc_cli_loihi *l)
{
    memset(l, 0, sizeof *l);
    l->opts = nc_loihi_options_default();
}

/* The switch as the loihi engine's registered option KEY=VALUE. */
static int set(nc_cli_loihi *l, const char *key, const char *value)
{
    char kv[96];
    nc_error err = {0};
    snprintf(kv, sizeof kv, "%s=%s", key, value);
    if (nc_engine_settings_add(&l->settings, kv, &err) != NC_OK) {
        nc_cli_error(&err);
        return -1;
    }
    l->given = 1;
    return 1;
}

int nc_cli_loihi_option(nc_cli_loihi *l, int opt, const char *arg)
{
    static const char *const resets[] = {"subtract", "zero"}, *const fires[] = {"gt", "ge"};
    static const char *const delays[] = {"compensated", "off", "raw"}, *const spikes[] = {"binary", "graded"};
    static const nc_loihi_delay delay_of[] = {NC_LOIHI_DELAY_COMPENSATED, NC_LOIHI_DELAY_OFF, NC_LOIHI_DELAY_RAW};
    int k;
    long v;
    switch (opt) {
    case NC_OPT_LOIHI_RESET:
        if ((k = nc_cli_parse_choice("--loihi-reset", arg, resets, 2)) < 0)
            return -1;
        l->opts.reset = k ? NC_RESET_ZERO : NC_RESET_SUBTRACT;
        return set(l, "reset", arg);
    case NC_OPT_LOIHI_FIRE:
        if ((k = nc_cli_parse_choice("--loihi-fire", arg, fires, 2)) < 0)
            return -1;
        l->opts.compare = k ? NC_FIRE_GE : NC_FIRE_GT;
        return set(l, "fire", arg);
    case NC_OPT_LOIHI_DELAY:
        if ((k = nc_cli_parse_choice("--loihi-delay", arg, delays, 3)) < 0)
            return -1;
        l->opts.delay = delay_of[k];
        return set(l, "delay", arg);
    case NC_OPT_LOIHI_SPIKES:
        if ((k = nc_cli_parse_choice("--loihi-spikes", arg, spikes, 2)) < 0)
            return -1;
        l->opts.graded = k;
        return set(l, "spikes", arg);
    case NC_OPT_LOIHI_MESSAGE_BITS:
        if ((v = nc_cli_parse_long("--loihi-message-bits", arg, 1, 24)) < 0)
            return -1;
        l->opts.message_bits = (int)v;
        return set(l, "message-bits", arg);
    case NC_OPT_LOIHI_VTH:
        if ((v = nc_cli_parse_long("--loihi-vth", arg, 1, NC_LOIHI_VTH_MAX)) < 0)
            return -1;
        l->opts.quant.vth_target = (int)v;
        return set(l, "vth", arg);
    case NC_OPT_LOIHI_INPUT_BITS:
        if ((v = nc_cli_parse_long("--loihi-input-bits", arg, 0, 16)) < 0)
            return -1;
        l->opts.quant.input_frac_bits = (int)v;
        return set(l, "input-bits", arg);
    case NC_OPT_LOIHI_QUIET: l->quiet = 1; return 1;
    default: return 0;
    }
}

nc_status nc_cli_loihi_settings(const nc_cli_loihi *l, const nc_engine_settings *given, nc_engine_settings *out,
                                nc_error *err)
{
    *out = *given;
    for (int k = 0; k < l->settings.n; k++) {
        char kv[sizeof l->settings.key[0] + sizeof l->settings.value[0] + 1];
        snprintf(kv, sizeof kv, "%s=%s", l->settings.key[k], l->settings.value[k]);
        nc_status st = nc_engine_settings_add(out, kv, err);
        if (st != NC_OK)
            return st;
    }
    return NC_OK;
}

void nc_cli_loihi_print_setup(const nc_engine *e, const nc_cli_loihi *l, int T, FILE *out)
{
    nc_error err = {0};
    const nc_loihi_net *q = nc_engine_loihi_quantised(e);
    if (!q || l->quiet)
        return;
    size_t size = 1 << 16;
    char *buf = malloc(size);
    if (!buf)
        return;
    nc_loihi_options o = nc_engine_loihi_get_options(e);
    fputs(nc_loihi_report_text(q, buf, size), out);
    nc_loihi_hw_options hw = nc_loihi_hw_options_default();
    hw.reset = o.reset;
    hw.graded = o.graded;
    nc_loihi_hw_report r;
    if (nc_loihi_hw_check(q, &hw, &r, &err) == NC_OK)
        fputs(nc_loihi_hw_text(q, &r, buf, size), out);
    else
        fprintf(out, "hardware check failed: %s\n", err.message);
    nc_loihi_hw_report_clear(&r);
    free(buf);
    static const char *const delay_names[] = {"compensated", "off", "raw"};
    fprintf(out, "Loihi run: reset %s, fire on %s, %s spikes, synaptic delay %s (%d delayed layers): latency %lld "
                 "steps for T = %d\n",
            o.reset == NC_RESET_ZERO ? "to zero" : "by subtraction", o.compare == NC_FIRE_GT ? ">" : ">=",
            o.graded ? "graded" : "binary", delay_names[o.delay], q->max_depth,
            (long long)nc_engine_loihi_latency(e, T), T);
    if (o.delay == NC_LOIHI_DELAY_RAW && T <= q->max_depth)
        fprintf(out, "warning: with the raw delay the output hears the input only after %d steps: T = %d leaves it "
                     "nothing\n", q->max_depth, T);
}

void nc_cli_loihi_print_stats(const nc_engine *e, int T, FILE *out)
{
    const nc_loihi_net *q = nc_engine_loihi_quantised(e);
    if (!q)
        return;
    fprintf(out, "Loihi counts (effective latency T + D = %lld steps per sample):\n",
            (long long)nc_engine_loihi_latency(e, T));
    fprintf(out, "  %-14s %-14s %14s %12s %12s %12s\n", "layer", "-> target", "spike msgs", "u wrapped",
            "v saturated", "input clip");
    for (int l = 0; l < q->n_layers; l++) {
        nc_loihi_layer_stats s = nc_engine_loihi_layer_stats(e, l);
        fprintf(out, "  %-14.14s %-14.14s %14lld %12lld %12lld %12lld\n", q->net->nodes[q->layers[l].node].name,
                q->net->nodes[q->layers[l].target].name, (long long)s.spikes, (long long)s.u_wraps,
                (long long)s.v_saturations, (long long)s.payload_clipped);
    }
}
