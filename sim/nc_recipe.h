/* nc_recipe.h — `neurocuda convert --target-T N`: one low-latency recipe
 * chosen by written rules from the network and T (docs/FINETUNING.md, "The
 * --target-T recipe").
 *
 * nc_recipe_plan is a pure function: a summary of the ANN (what the rules
 * look at), the target T and a time budget in, the pipeline settings and
 * the runner's policies out, with one line of reasons per choice.  It knows
 * nothing of the fixture networks: only depth, residual adds, BatchNorm,
 * pooling kinds and T enter.  The runner then runs convert → QCFS → bias
 * calibration → BPTT, keeping after each stage whichever net is best
 * on held-out training images at T (nc_runner_desc.keep_best_T), and fits
 * the training epochs to the budget (nc_runner_desc.time_budget). */
#ifndef NC_RECIPE_H
#define NC_RECIPE_H

#include "nc_pipeline.h"
#include "nc_runner.h"

/* What the rules look at. */
typedef struct nc_net_summary {
    int relu_layers;     /* ReLU (or clip/QCFS) layers: the IF layers to be     */
    int weighted;        /* conv + dense layers                                  */
    int residual;        /* 1 if an add merges two paths                          */
    int batchnorm;       /* 1 if the model had BatchNorm (folded or affine)       */
    int maxpools, avgpools; /* avg pools include global ones                      */
    double macs;         /* multiply-accumulates of one image                    */
} nc_net_summary;

void nc_net_summarise(const nc_net *ann, nc_net_summary *out);

#define NC_RECIPE_DEFAULT_MINUTES 5.0
#define NC_RECIPE_MAX_QCFS_EPOCHS 4
#define NC_RECIPE_MAX_BPTT_EPOCHS 8

typedef struct nc_recipe {
    nc_pipeline_options opts;   /* conversion, bias calibration, fine-tuning      */
    int keep_best_T;            /* the runner keeps the best stage at this T      */
    int eval_T;                 /* steps measured on the test split              */
    double time_budget;         /* seconds for the whole job                      */
    char reasons[3072];         /* "setting: value — why" lines                   */
} nc_recipe;

/* The plan for `s` at T steps within `minutes` (≤ 0: the default above);
 * `base` supplies what the rules do not decide (batch, engine, dataset
 * sizes, the user's explicit options are applied by the caller after).
 * NC_ERR_ARGUMENT for T < 1. */
nc_status nc_recipe_plan(const nc_net_summary *s, int T, double minutes, const nc_pipeline_options *base,
                         nc_recipe *out, nc_error *err);

/* What every front end calls: the plan for `ann` at T within `minutes`,
 * written into the job description d (d->pipeline is the base; d->eval_T
 * is set when 0).  *out keeps the plan and its reasons. */
nc_status nc_recipe_describe(const nc_net *ann, int T, double minutes, nc_runner_desc *d, nc_recipe *out,
                             nc_error *err);

#endif
