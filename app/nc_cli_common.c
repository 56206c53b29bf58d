/* nc_cli_common.c — what the sub-commands share: loading models and data,
 * creating engines, reporting errors. */
#include "nc_cli.h"

#include <stdio.h>
#include <string.h>

#include "nc_onnx.h"

int nc_cli_error(const nc_error *err)
{
    fprintf(stderr, "neurocuda: %s\n", err->message);
    return 1;
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

nc_net *nc_cli_load_model(const char *path)
{
    nc_error err = {0};
    nc_net *net = NULL;
    nc_status st;
    if (has_suffix(path, ".onnx"))
        st = nc_onnx_load(path, NULL, &net, &err);
    else
        st = nc_fail(&err, NC_ERR_UNSUPPORTED,
                     "%s: unknown model format; give an ONNX model (.onnx)", path);
    if (st != NC_OK) {
        nc_cli_error(&err);
        return NULL;
    }
    return net;
}

void nc_cli_data_init(nc_cli_data *d)
{
    memset(d, 0, sizeof *d);
    d->spec = "fashion-mnist";
}

static int parse_list(const char *option, const char *arg, float *values, int *count)
{
    int n = nc_parse_float_list(arg, values, NC_MAX_CHANNELS);
    if (n < 1) {
        fprintf(stderr, "neurocuda: %s needs numbers separated by commas (at most %d), got '%s'\n", option,
                NC_MAX_CHANNELS, arg);
        return -1;
    }
    *count = n;
    return 1;
}

int nc_cli_data_option(nc_cli_data *d, int opt, const char *arg)
{
    double v;
    switch (opt) {
    case NC_OPT_DATA: d->spec = arg; return 1;
    case NC_OPT_MEAN: return parse_list("--mean", arg, d->pp.mean, &d->pp.n_mean);
    case NC_OPT_STD:
        if (parse_list("--std", arg, d->pp.std, &d->pp.n_std) < 0)
            return -1;
        for (int i = 0; i < d->pp.n_std; i++)
            if (!(d->pp.std[i] > 0)) {
                fprintf(stderr, "neurocuda: --std values must be positive, got '%s'\n", arg);
                return -1;
            }
        return 1;
    case NC_OPT_SCALE:
        if (nc_cli_parse_double("--scale", arg, &v) != 0 || !(v > 0))
            return -1;
        d->pp.scale = (float)v;
        return 1;
    case NC_OPT_LIMIT:
        d->limit = nc_cli_parse_long("--limit", arg, 1, 1L << 40);
        return d->limit < 0 ? -1 : 1;
    default: return 0;
    }
}

nc_dataset *nc_cli_open_data(const nc_cli_data *d, nc_split split)
{
    nc_error err = {0};
    nc_dataset *ds = NULL;
    if (nc_dataset_open(d->spec, split, &d->pp, d->limit, &ds, &err) != NC_OK) {
        nc_cli_error(&err);
        return NULL;
    }
    return ds;
}

nc_engine *nc_cli_engine(const char *name, const nc_net *net, int threads)
{
    nc_error err = {0};
    nc_engine *e = NULL;
    if (nc_engine_new(name, &e, &err) != NC_OK) {
        nc_cli_error(&err);
        return NULL;
    }
    e->threads = threads;
    if (nc_engine_check(e, net, &err) != NC_OK || nc_engine_load(e, net, &err) != NC_OK) {
        nc_cli_error(&err);
        nc_engine_free(e);
        return NULL;
    }
    return e;
}
