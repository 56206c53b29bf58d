/* nc_recipe.c — the --target-T rules (nc_recipe.h, docs/FINETUNING.md).
 * Each rule is a few lines that set one group of settings and say why. */
#include "nc_recipe.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void nc_net_summarise(const nc_net *ann, nc_net_summary *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < ann->n_nodes; i++) {
        const nc_node *n = &ann->nodes[i];
        switch (n->kind) {
        case NC_NODE_NEURON: out->relu_layers++; break;
        case NC_NODE_CONV2D:
        case NC_NODE_DENSE: out->weighted++; break;
        case NC_NODE_ADD: out->residual = 1; break;
        case NC_NODE_AFFINE: out->batchnorm = 1; break; /* a BatchNorm with nothing to fold into */
        case NC_NODE_MAXPOOL: out->maxpools++; break;
        case NC_NODE_AVGPOOL:
        case NC_NODE_GLOBAL_AVGPOOL: out->avgpools++; break;
        default: break;
        }
    }
    for (int k = 0; k < ann->report.count; k++)
        if (strcmp(ann->report.entries[k].op_type, "BatchNormalization") == 0)
            out->batchnorm = 1;
    out->macs = nc_net_macs(ann);
}

static void reason(nc_recipe *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nc_append_linev(r->reasons, sizeof r->reasons, fmt, ap);
    va_end(ap);
}

/* A net is "deep" for these rules when conversion error compounds over many
 * layers or a residual sum: there the QCFS-ANN falls well below the ANN. */
static int is_deep(const nc_net_summary *s) { return s->relu_layers >= 4 || s->residual; }

static void rule_conversion(const nc_net_summary *s, int T, nc_recipe *r)
{
    nc_pipeline_options *o = &r->opts;
    o->levels = T;
    reason(r, "L = %d: the QCFS quantisation steps equal T, so the QCFS-ANN that is trained is the SNN at T", T);
    o->method = T <= 8 ? NC_CALIB_P99 : NC_CALIB_P99_9;
    reason(r, "threshold %s: %s", nc_calib_method_name(o->method),
           T <= 8 ? "at T ≤ 8 a lower threshold lets each neuron fire within the few steps (lower thresholds "
                    "gained up to 10 points at T = 8–16 in issue 17's measurement)"
                  : "at T ≥ 16 the steps resolve the activation range; p99.9 clips least");
    o->per_channel = s->residual;
    reason(r, "thresholds %s: %s", s->residual ? "per channel" : "per layer",
           s->residual ? "a residual sum mixes channels of different scales (ResNet-style: 0.34 → 0.62 at T = 8)"
                       : "no residual sum: one threshold per layer holds the channels' range");
    o->maxpool = NC_MAXPOOL_PRE_SPIKE;
    if (s->maxpools > 0)
        reason(r, "MaxPool pre-spike: exact max of the running sums, and trainable by BPTT");
    o->calibrate_bias_T = T;
    reason(r, "bias calibration for T = %d, after the QCFS stage: corrects each layer's mean rate error at T "
              "for the net QCFS left; undone when held-out accuracy falls", T);
}

static void rule_training(const nc_net_summary *s, int T, nc_recipe *r)
{
    nc_pipeline_options *o = &r->opts;
    int deep = is_deep(s);
    o->finetune_qcfs_epochs = deep || s->batchnorm ? NC_RECIPE_MAX_QCFS_EPOCHS : 2;
    reason(r, "QCFS stage: up to %d epochs: %s", o->finetune_qcfs_epochs,
           deep || s->batchnorm ? "a deep, residual or BatchNorm net loses most in the QCFS-ANN; cheap epochs "
                                  "recover it before BPTT"
                                : "a shallow net loses little in the QCFS-ANN; two epochs settle L = T");
    o->finetune_bptt_epochs = NC_RECIPE_MAX_BPTT_EPOCHS;
    o->train.T = T;
    o->train.n_horizons = 0;
    reason(r, "BPTT stage: up to %d epochs at train-T = %d (a net is best at the T it was trained for)",
           o->finetune_bptt_epochs, T);
    o->train.optimizer = NC_OPTIMIZER_ADAM;
    o->train.learning_rate = 1e-4;
    reason(r, "Adam, learning rate 1e-4, cosine: larger rates (3e-4–5e-4) broke BPTT from a converted net");
    o->train.rollback = 1;
    reason(r, "rollback: an epoch that lowers the held-out accuracy is undone and the rate halved, so that a "
              "stage that starts the wrong way goes on from its best net at a gentler rate");
    o->train.distill_alpha = 0.5;
    o->train.distill_tau = 2.0;
    reason(r, "distillation from the ANN, weight 0.5, temperature 2: the ANN is the best teacher at hand");
    r->keep_best_T = T;
    r->eval_T = T;
    reason(r, "after every stage the held-out accuracy at T = %d decides: a stage that lowers it is undone", T);
}

nc_status nc_recipe_plan(const nc_net_summary *s, int T, double minutes, const nc_pipeline_options *base,
                         nc_recipe *out, nc_error *err)
{
    memset(out, 0, sizeof *out);
    if (T < 1 || T > 4096)
        return nc_fail(err, NC_ERR_ARGUMENT, "--target-T needs a number of steps from 1 to 4096, got %d", T);
    out->opts = base ? *base : nc_pipeline_options_default();
    reason(out, "network: %d ReLU layers, %d conv/dense, %s, %s, %d MaxPool, %d AvgPool, %.3g MMAC/image",
           s->relu_layers, s->weighted, s->residual ? "residual" : "no residual",
           s->batchnorm ? "BatchNorm" : "no BatchNorm", s->maxpools, s->avgpools, s->macs / 1e6);
    rule_conversion(s, T, out);
    rule_training(s, T, out);
    double m = minutes > 0 ? minutes : NC_RECIPE_DEFAULT_MINUTES;
    out->time_budget = 60.0 * m;
    reason(out, "time budget %.1f min for the whole job: before each training stage the time of every later "
                "measurement, held-out judgement and bias calibration is estimated from the rates measured so far "
                "and reserved; the training stages share the rest (QCFS a quarter when BPTT follows, BPTT all that "
                "is left), each running its first epoch and as many more as fit; when the reserve alone does not "
                "fit, a stage runs one epoch and says so", m);
    return NC_OK;
}

nc_status nc_recipe_describe(const nc_net *ann, int T, double minutes, nc_runner_desc *d, nc_recipe *out,
                             nc_error *err)
{
    nc_net_summary s;
    nc_net_summarise(ann, &s);
    nc_status st = nc_recipe_plan(&s, T, minutes, &d->pipeline, out, err);
    if (st != NC_OK)
        return st;
    d->pipeline = out->opts;
    d->keep_best_T = out->keep_best_T;
    d->time_budget = out->time_budget;
    if (d->eval_T <= 0)
        d->eval_T = out->eval_T;
    return NC_OK;
}
