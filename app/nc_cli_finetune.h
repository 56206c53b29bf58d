/* nc_cli_finetune.h — the options of `neurocuda convert` for what follows
 * a conversion: bias calibration (--calibrate-bias) and fine-tuning
 * (--finetune-qcfs, --finetune-bptt, --train-T, --lr, ...), parsed into
 * nc_pipeline_options, and the training progress printer. */
#ifndef NC_CLI_FINETUNE_H
#define NC_CLI_FINETUNE_H

#include <getopt.h>

#include "nc_pipeline.h"

enum { NC_OPT_FT_QCFS = 1100, NC_OPT_FT_BPTT, NC_OPT_TRAIN_T, NC_OPT_LR, NC_OPT_OPTIMIZER, NC_OPT_SURROGATE,
       NC_OPT_SURROGATE_ALPHA, NC_OPT_TRAIN_THRESHOLD, NC_OPT_TRAIN_BATCH, NC_OPT_WEIGHT_DECAY, NC_OPT_AUGMENT,
       NC_OPT_TRAIN_IMAGES, NC_OPT_VAL_IMAGES, NC_OPT_EVAL_T, NC_OPT_TRAIN_ENGINE, NC_OPT_HORIZONS,
       NC_OPT_DISTILL, NC_OPT_CALIBRATE_BIAS, NC_OPT_BIAS_IMAGES, NC_OPT_ROLLBACK, NC_OPT_NO_ROLLBACK };

#define NC_CLI_FINETUNE_LONG_OPTIONS                                                                    \
    {"finetune-qcfs", required_argument, NULL, NC_OPT_FT_QCFS},                                         \
    {"finetune-bptt", required_argument, NULL, NC_OPT_FT_BPTT},                                         \
    {"train-T", required_argument, NULL, NC_OPT_TRAIN_T}, {"lr", required_argument, NULL, NC_OPT_LR},   \
    {"optimizer", required_argument, NULL, NC_OPT_OPTIMIZER},                                           \
    {"surrogate", required_argument, NULL, NC_OPT_SURROGATE},                                           \
    {"surrogate-alpha", required_argument, NULL, NC_OPT_SURROGATE_ALPHA},                               \
    {"train-threshold", no_argument, NULL, NC_OPT_TRAIN_THRESHOLD},                                     \
    {"batch", required_argument, NULL, NC_OPT_TRAIN_BATCH},                                             \
    {"weight-decay", required_argument, NULL, NC_OPT_WEIGHT_DECAY},                                     \
    {"augment", no_argument, NULL, NC_OPT_AUGMENT},                                                     \
    {"train-images", required_argument, NULL, NC_OPT_TRAIN_IMAGES},                                     \
    {"val-images", required_argument, NULL, NC_OPT_VAL_IMAGES},                                         \
    {"eval-T", required_argument, NULL, NC_OPT_EVAL_T},                                                 \
    {"train-engine", required_argument, NULL, NC_OPT_TRAIN_ENGINE},                                     \
    {"train-horizons", required_argument, NULL, NC_OPT_HORIZONS},                                       \
    {"distill", required_argument, NULL, NC_OPT_DISTILL},                                               \
    {"calibrate-bias", required_argument, NULL, NC_OPT_CALIBRATE_BIAS},                                 \
    {"bias-images", required_argument, NULL, NC_OPT_BIAS_IMAGES},                                       \
    {"rollback", no_argument, NULL, NC_OPT_ROLLBACK},                                                   \
    {"no-rollback", no_argument, NULL, NC_OPT_NO_ROLLBACK}

typedef struct nc_cli_finetune {
    int val_images_set;   /* --val-images given                          */
    int eval_T;           /* --eval-T: SNN accuracy by step up to it (0 = 32 when fine-tuning, else none) */
} nc_cli_finetune;

/* Returns 1 if it consumed the option, 0 if not, -1 on a bad value. */
int nc_cli_finetune_option(nc_pipeline_options *o, nc_cli_finetune *f, int opt, const char *arg);
extern const char nc_cli_finetune_help[];

/* Training progress on stderr (a line per epoch, an updating line per batch
 * on a terminal); returns non-zero after Ctrl-C.  user: unused. */
int nc_cli_train_progress(void *user, const nc_train_progress *p);

#endif
