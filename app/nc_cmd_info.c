/* nc_cmd_info.c — `neurocuda info MODEL [--json]`: nodes, shapes, parameters,
 * MACs and the conversion-support report. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "nc_cli.h"
#include "nc_nir.h"
#include "nc_onnx.h"
#include "nc_record.h"
#include "nc_project.h"

static void usage(FILE *out)
{
    fputs("Usage: neurocuda info MODEL [--json]\n"
          "\n"
          "Shows the network of MODEL (.onnx): every node with its output shape, parameters and\n"
          "multiply-accumulates per image, and the conversion report: what became of every node of the\n"
          "file (converted, folded into another node, removed, approximated, unsupported: why).\n"
          "MODEL may also be a project (.ncsnn) or a NIR graph (.nir); a recording written by\n"
          "`neurocuda run --record` is summarised (accuracy by step, spikes per layer).\n"
          "\n"
          "  --json     print one JSON object as the last line\n"
          "  --dt S     NIR: seconds per step for continuous-time neurons (default 0.001)\n"
          "  -h, --help show this help\n",
          out);
}

static void node_detail(const nc_node *n, char *buf, size_t size)
{
    buf[0] = 0;
    switch (n->kind) {
    case NC_NODE_CONV2D:
        snprintf(buf, size, "k%dx%d s%d p%d,%d,%d,%d d%d g%d%s", n->kernel[0], n->kernel[1], n->stride[0],
                 n->pad[0], n->pad[1], n->pad[2], n->pad[3], n->dilation[0], n->groups, n->bias ? "" : " no-bias");
        break;
    case NC_NODE_AVGPOOL:
    case NC_NODE_MAXPOOL:
        snprintf(buf, size, "k%dx%d s%d p%d,%d,%d,%d%s%s", n->kernel[0], n->kernel[1], n->stride[0], n->pad[0],
                 n->pad[1], n->pad[2], n->pad[3], n->ceil_mode ? " ceil" : "",
                 n->kind == NC_NODE_AVGPOOL && n->count_include_pad ? " count-pad" : "");
        break;
    case NC_NODE_NEURON:
        if (n->neuron.model == NC_NEURON_CLIP)
            snprintf(buf, size, "clip [%g, %g]", n->neuron.clip_min, n->neuron.clip_max);
        else if (n->neuron.n_threshold > 0)
            snprintf(buf, size, "%s θ[0]=%g (%d value%s) L=%d", nc_neuron_model_name(n->neuron.model),
                     n->neuron.threshold[0], n->neuron.n_threshold, n->neuron.n_threshold > 1 ? "s" : "",
                     n->neuron.levels);
        else
            snprintf(buf, size, "%s", nc_neuron_model_name(n->neuron.model));
        break;
    default: break;
    }
}

static void print_report_text(const nc_report *r)
{
    printf("\nConversion report (%d source nodes: %d converted, %d folded, %d removed, %d approximated, "
           "%d unsupported)\n",
           r->count, nc_report_count(r, NC_SUPPORT_CONVERTED), nc_report_count(r, NC_SUPPORT_FOLDED),
           nc_report_count(r, NC_SUPPORT_REMOVED), nc_report_count(r, NC_SUPPORT_APPROXIMATED),
           nc_report_count(r, NC_SUPPORT_UNSUPPORTED));
    printf("  %-28s %-20s %-13s %s\n", "source node", "op", "status", "→ node / why");
    for (int i = 0; i < r->count; i++) {
        const nc_report_entry *e = &r->entries[i];
        char what[900];
        if (e->support == NC_SUPPORT_FOLDED)
            snprintf(what, sizeof what, "folded into %s%s%s", e->target, e->reason[0] ? ": " : "", e->reason);
        else if (e->reason[0])
            snprintf(what, sizeof what, "%s%s%s", e->target, e->target[0] ? ": " : "", e->reason);
        else
            snprintf(what, sizeof what, "%s", e->target);
        printf("  %-28.28s %-20.20s %-13s %s\n", e->source_name, e->op_type, nc_support_name(e->support), what);
    }
}

static void print_net_text(const nc_net *net)
{
    char shape[96], detail[256];
    printf("Model: %s (%s)\n", net->source_path, net->source_format);
    printf("  %-4s %-28s %-15s %-18s %10s %14s  %s\n", "#", "node", "kind", "shape", "params", "MACs", "details");
    for (int i = 0; i < net->n_nodes; i++) {
        const nc_node *n = &net->nodes[i];
        node_detail(n, detail, sizeof detail);
        printf("  %-4d %-28.28s %-15s %-18s %10lld %14lld  %s\n", i, n->name, nc_node_kind_name(n->kind),
               nc_shape_str(n->ndim, n->shape, shape, sizeof shape), (long long)nc_node_params(net, i),
               (long long)nc_node_macs(net, i), detail);
    }
    printf("Total: %lld parameters, %lld MACs per image (%.3f GFLOP)\n", (long long)nc_net_params(net),
           (long long)nc_net_macs(net), 2e-9 * (double)nc_net_macs(net));
}

static void json_shape(nc_json *j, const char *key, int ndim, const int64_t *shape)
{
    nc_json_open(j, key, '[');
    for (int d = 0; d < ndim; d++)
        nc_json_int(j, NULL, shape[d]);
    nc_json_close(j, ']');
}

static void json_report(nc_json *j, const nc_report *r)
{
    nc_json_open(j, "report", '[');
    for (int i = 0; i < r->count; i++) {
        const nc_report_entry *e = &r->entries[i];
        nc_json_open(j, NULL, '{');
        nc_json_string(j, "source", e->source_name);
        nc_json_string(j, "op", e->op_type);
        nc_json_int(j, "opset", e->opset);
        nc_json_string(j, "status", nc_support_name(e->support));
        nc_json_string(j, "target", e->target);
        nc_json_string(j, "reason", e->reason);
        nc_json_close(j, '}');
    }
    nc_json_close(j, ']');
}

/* A project's stored settings and metrics (stage accuracies, fine-tuning). */
static void print_project_text(const nc_project *p)
{
    if (p->n_meta > 0) {
        printf("\nSettings:\n");
        for (int k = 0; k < p->n_meta; k++)
            printf("  %-32s %s\n", p->meta[k].key, p->meta[k].value);
    }
    if (p->n_metrics > 0) {
        printf("\nMetrics:\n");
        for (int k = 0; k < p->n_metrics; k++)
            printf("  %-32s %.6g\n", p->metrics[k].key, p->metrics[k].value);
    }
}

static void json_project(nc_json *j, const nc_project *p)
{
    nc_json_open(j, "settings", '{');
    for (int k = 0; k < p->n_meta; k++)
        nc_json_string(j, p->meta[k].key, p->meta[k].value);
    nc_json_close(j, '}');
    nc_json_open(j, "metrics", '{');
    for (int k = 0; k < p->n_metrics; k++)
        nc_json_number(j, p->metrics[k].key, p->metrics[k].value);
    nc_json_close(j, '}');
}

static void print_net_json(const char *path, const nc_net *net, const nc_report *r, const nc_error *err,
                           const nc_project *project)
{
    nc_json j;
    nc_json_begin(&j, stdout);
    nc_json_string(&j, "model", path);
    nc_json_bool(&j, "supported", net != NULL);
    if (!net)
        nc_json_string(&j, "error", err->message);
    if (net) {
        nc_json_string(&j, "format", net->source_format);
        json_shape(&j, "input_shape", net->nodes[net->input].ndim, net->nodes[net->input].shape);
        json_shape(&j, "output_shape", net->nodes[net->output].ndim, net->nodes[net->output].shape);
        nc_json_int(&j, "params", nc_net_params(net));
        nc_json_int(&j, "macs", nc_net_macs(net));
        nc_json_open(&j, "nodes", '[');
        for (int i = 0; i < net->n_nodes; i++) {
            const nc_node *n = &net->nodes[i];
            nc_json_open(&j, NULL, '{');
            nc_json_string(&j, "name", n->name);
            nc_json_string(&j, "kind", nc_node_kind_name(n->kind));
            if (n->kind == NC_NODE_NEURON)
                nc_json_string(&j, "neuron", nc_neuron_model_name(n->neuron.model));
            json_shape(&j, "shape", n->ndim, n->shape);
            nc_json_open(&j, "inputs", '[');
            for (int k = 0; k < n->n_inputs; k++)
                nc_json_string(&j, NULL, net->nodes[n->inputs[k]].name);
            nc_json_close(&j, ']');
            nc_json_int(&j, "params", nc_node_params(net, i));
            nc_json_int(&j, "macs", nc_node_macs(net, i));
            nc_json_close(&j, '}');
        }
        nc_json_close(&j, ']');
    }
    json_report(&j, r);
    if (project)
        json_project(&j, project);
    nc_json_end(&j);
}

/* A recording (nc_recording_load): its summary, checked on reading. */
static int print_recording(const char *path, int json)
{
    nc_recording *r = NULL;
    nc_error err = {0};
    if (nc_recording_load(path, &r, &err) != NC_OK)
        return nc_cli_error(&err);
    if (json) {
        nc_json j;
        nc_json_begin(&j, stdout);
        nc_json_string(&j, "recording", path);
        nc_json_int(&j, "T", r->T);
        nc_json_int(&j, "samples", r->samples);
        nc_json_number(&j, "accuracy", r->accuracy_by_step[r->T - 1]);
        nc_json_number(&j, "ann_accuracy", r->ann_accuracy);
        nc_json_int(&j, "spikes", r->total_spikes);
        nc_json_open(&j, "layers", '[');
        for (int i = 0; i < r->n_layers; i++) {
            nc_json_open(&j, NULL, '{');
            nc_json_string(&j, "name", r->layers[i].name);
            nc_json_int(&j, "neurons", r->layers[i].neurons);
            nc_json_int(&j, "spikes", r->layers[i].spikes);
            nc_json_number(&j, "firing_rate", r->layers[i].firing_rate);
            nc_json_int(&j, "raster_events", r->layers[i].n_events);
            nc_json_close(&j, '}');
        }
        nc_json_close(&j, ']');
        nc_json_end(&j);
    } else {
        printf("Recording: %s\n  T = %d steps, %lld samples, accuracy after T %.4f (ANN %.4f), %lld spikes\n",
               path, r->T, (long long)r->samples, r->accuracy_by_step[r->T - 1], r->ann_accuracy,
               (long long)r->total_spikes);
        printf("  %-28s %12s %14s %12s %14s\n", "layer", "neurons", "spikes", "rate", "raster events");
        for (int i = 0; i < r->n_layers; i++)
            printf("  %-28.28s %12lld %14lld %12.4f %14lld\n", r->layers[i].name, (long long)r->layers[i].neurons,
                   (long long)r->layers[i].spikes, r->layers[i].firing_rate, (long long)r->layers[i].n_events);
    }
    nc_recording_free(r);
    return 0;
}

int nc_cmd_info(int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, NC_OPT_JSON}, {"dt", required_argument, NULL, NC_OPT_DT},
        {"help", no_argument, NULL, 'h'}, {0}};
    int json = 0, opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        if (opt == NC_OPT_JSON)
            json = 1;
        else if (opt == NC_OPT_DT) {
            nc_nir_load_options nir = {0};
            if (nc_cli_parse_double("--dt", optarg, &nir.dt) != 0 || !(nir.dt > 0))
                return 2;
            nc_cli_set_nir_options(&nir);
        } else
            return nc_cli_usage_exit(opt, usage);
    }
    const char *path = nc_cli_operand(argc, argv, 1, "info: give exactly one MODEL file", usage);
    if (!path)
        return 2;
    nc_error err = {0};
    nc_net *net = NULL;
    nc_report report = {0};
    size_t len = strlen(path);
    int onnx = len >= 5 && strcmp(path + len - 5, ".onnx") == 0;
    nc_status st = NC_OK;
    if (!onnx && nc_recording_probe(path))
        return print_recording(path, json);
    if (onnx) { /* the report of an unsupported model is shown too */
        st = nc_onnx_load_with_report(path, NULL, &net, &report, &err);
    } else if (!(net = nc_cli_load_model(path))) {
        return 1; /* the loader printed the error */
    }
    /* a project file also holds settings and metrics worth showing */
    nc_project *project = NULL;
    int is_project = len >= 6 && strcmp(path + len - 6, ".ncsnn") == 0;
    if (is_project && nc_project_load(path, &project, &err) != NC_OK)
        project = NULL; /* the net loaded above; the extras are optional */
    if (json)
        print_net_json(path, net, net ? &net->report : &report, &err, project);
    else {
        if (net)
            print_net_text(net);
        const nc_report *r = net ? &net->report : &report;
        if (r->count > 0) /* nothing to show when the file could not be parsed */
            print_report_text(r);
        if (project)
            print_project_text(project);
    }
    nc_project_free(project);
    nc_report_clear(&report);
    nc_net_free(net);
    if (st != NC_OK)
        return nc_cli_error(&err);
    return 0;
}
