/* nc_cmd_engines.c — `neurocuda engines [--json]`: the engine table
 * (sim/nc_engine_registry.h): each engine, whether it can run here (or why
 * not), its capabilities and its options with their defaults. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "nc_cli.h"
#include "nc_engine_registry.h"
#include "sim/nc_cpu_ops.h"

static const char *const type_names[] = {"int", "bool", "choice", "text"};

typedef struct engine_row {
    const nc_engine_info *info;
    int compiled, available;
    char detail[600];
} engine_row;

/* Compiled in when it can be created or says why not without being absent. */
static void fill_row(engine_row *row, const nc_engine_info *info)
{
    const char *const *names = nc_engine_names();
    row->info = info;
    for (int i = 0; names[i]; i++)
        row->compiled |= strcmp(names[i], info->name) == 0;
    row->available = info->available(row->detail, sizeof row->detail);
    if (row->available && info->details)
        info->details(row->detail, sizeof row->detail);
    else if (row->available)
        snprintf(row->detail, sizeof row->detail, "%s", info->description);
}

static void caps_text(unsigned caps, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s%s%s", caps & NC_CAP_SNN ? "snn " : "", caps & NC_CAP_TRAINING ? "training " : "",
             caps & NC_CAP_FIXED_POINT ? "fixed-point " : "", caps & NC_CAP_DEVICE_MEMORY ? "device-memory " : "");
    size_t n = strlen(buf);
    if (n > 0)
        buf[n - 1] = '\0';
}

static void print_options(const nc_engine_info *info)
{
    for (int k = 0; k < info->n_options; k++) {
        const nc_engine_option *o = &info->options[k];
        printf("          --engine-opt %s=%s  (%s) %s%s%s\n", o->key, o->default_value,
               o->type == NC_ENGINE_OPTION_CHOICE ? o->choices : type_names[o->type], o->help,
               o->env ? "; environment: " : "", o->env ? o->env : "");
    }
}

static void print_json_row(nc_json *j, const engine_row *r)
{
    char caps[96];
    caps_text(r->info->caps, caps, sizeof caps);
    nc_json_open(j, NULL, '{');
    nc_json_string(j, "name", r->info->name);
    nc_json_string(j, "description", r->info->description);
    nc_json_bool(j, "compiled", r->compiled);
    nc_json_bool(j, "available", r->available);
    nc_json_string(j, "details", r->detail);
    nc_json_string(j, "capabilities", caps);
    if (strcmp(r->info->name, "cpu") == 0)
        nc_json_string(j, "cpu_kernels", nc_cpu_path());
    nc_json_open(j, "options", '[');
    for (int k = 0; k < r->info->n_options; k++) {
        const nc_engine_option *o = &r->info->options[k];
        nc_json_open(j, NULL, '{');
        nc_json_string(j, "key", o->key);
        nc_json_string(j, "type", type_names[o->type]);
        nc_json_string(j, "default", o->default_value);
        if (o->choices)
            nc_json_string(j, "choices", o->choices);
        nc_json_string(j, "help", o->help);
        if (o->env)
            nc_json_string(j, "environment", o->env);
        nc_json_close(j, '}');
    }
    nc_json_close(j, ']');
    nc_json_close(j, '}');
}

int nc_cmd_engines(int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, NC_OPT_JSON}, {"help", no_argument, NULL, 'h'}, {0}};
    int json = 0, opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        if (opt == NC_OPT_JSON)
            json = 1;
        else if (opt == 'h') {
            puts("Usage: neurocuda engines [--json]\n\nLists the engines of this build, whether each can run on "
                 "this machine (the GPU's name,\nmemory and SM count, or why it is unavailable), what each can do, "
                 "and its options\n(set them with --engine-opt KEY=VALUE; an environment variable named here "
                 "overrides\nthe default).");
            return 0;
        } else
            return 2;
    }
    int n = nc_engine_count();
    engine_row rows[8] = {0};
    for (int i = 0; i < n && i < 8; i++)
        fill_row(&rows[i], nc_engine_at(i));
    printf("%-7s %-9s %-10s %s\n", "engine", "compiled", "available", "details");
    for (int i = 0; i < n && i < 8; i++) {
        char caps[96];
        caps_text(rows[i].info->caps, caps, sizeof caps);
        printf("%-7s %-9s %-10s %s\n", rows[i].info->name, rows[i].compiled ? "yes" : "no",
               rows[i].available ? "yes" : "no", rows[i].detail);
        if (rows[i].compiled)
            printf("          %s; can: %s\n", rows[i].info->description, caps);
        print_options(rows[i].info);
    }
    if (json) {
        nc_json j;
        nc_json_begin(&j, stdout);
        nc_json_open(&j, "engines", '[');
        for (int i = 0; i < n && i < 8; i++)
            print_json_row(&j, &rows[i]);
        nc_json_close(&j, ']');
        nc_json_end(&j);
    }
    return 0;
}
