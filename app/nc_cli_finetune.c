/* nc_cli_finetune.c — fine-tuning options and progress (nc_cli_finetune.h). */
#include "nc_cli_finetune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nc_cli.h"

const char nc_cli_finetune_help[] =
    "Training-free bias calibration (after conversion):\n"
    "  --calibrate-bias T  shift each IF layer's bias by the mean gap between the ANN activation\n"
    "                      and the SNN's rate at T steps, layer by layer; undone if it lowers the\n"
    "                      SNN's accuracy on 1000 held-out training images\n"
    "  --bias-images N     training images it averages over (default 512)\n"
    "Fine-tuning (after conversion):\n"
    "  --finetune-qcfs N   N epochs on the QCFS-ANN (straight-through estimator)\n"
    "  --finetune-bptt N   N epochs of BPTT on the SNN over --train-T steps\n"
    "  --train-T N         BPTT steps (default 8)\n"
    "  --train-engine E    cpu | gpu: where the trainer runs (default: the --engine)\n"
    "  --train-horizons L  BPTT loss averaged over the outputs after each of these step\n"
    "                      counts, e.g. 4,8 (default: T only)\n"
    "  --distill A[,TAU]   distillation from the source ANN: loss = (1−A)·CE(labels) +\n"
    "                      A·TAU²·KL(ANN/TAU ‖ SNN/TAU), A in [0, 1], TAU > 0 (default 2)\n"
    "  --lr X              learning rate (default 1e-4 Adam, 1e-3 SGD), cosine-annealed\n"
    "  --optimizer O       adam (default) | sgd (momentum 0.9)\n"
    "  --weight-decay X    on conv/dense weights (default 0)\n"
    "  --surrogate S       triangle (default) | sigmoid | atan | rect; --surrogate-alpha X\n"
    "  --train-threshold   also train the thresholds (λ, θ)\n"
    "  --batch N           training batch (default 64)\n"
    "  --augment           random crops (2-pixel padding) and horizontal flips\n"
    "  --train-images N    images per epoch (default: the training split minus the held-out)\n"
    "  --val-images N      last N training images held out to keep the best epoch (default 5000)\n"
    "  --rollback          after an epoch that lowers the held-out accuracy: back to the best\n"
    "                      epoch, optimiser state cleared, learning rate halved (--no-rollback: off;\n"
    "                      on in the --target-T recipe)\n"
    "  --eval-T N          print the SNN's test accuracy after every step up to N\n"
    "                      (default 32 when fine-tuning)\n";

static int parse_long_into(const char *name, const char *arg, long min, long max, long *out)
{
    long v = nc_cli_parse_long(name, arg, min, max);
    if (v < 0)
        return -1;
    *out = v;
    return 1;
}

static int parse_positive(const char *name, const char *arg, double *out)
{
    double d;
    if (nc_cli_parse_double(name, arg, &d) != 0 || d < 0) {
        fprintf(stderr, "neurocuda: %s needs a number ≥ 0, got '%s'\n", name, arg);
        return -1;
    }
    *out = d;
    return 1;
}

int nc_cli_finetune_option(nc_pipeline_options *o, nc_cli_finetune *f, int opt, const char *arg)
{
    nc_train_options *t = &o->train;
    long v = 0;
    double d = 0;
    int rc;
    switch (opt) {
    case NC_OPT_FT_QCFS:
        rc = parse_long_into("--finetune-qcfs", arg, 0, 10000, &v);
        o->finetune_qcfs_epochs = (int)v;
        return rc;
    case NC_OPT_FT_BPTT:
        rc = parse_long_into("--finetune-bptt", arg, 0, 10000, &v);
        o->finetune_bptt_epochs = (int)v;
        return rc;
    case NC_OPT_TRAIN_T:
        rc = parse_long_into("--train-T", arg, 1, 4096, &v);
        t->T = (int)v;
        return rc;
    case NC_OPT_LR:
        rc = parse_positive("--lr", arg, &d);
        t->learning_rate = d;
        return rc;
    case NC_OPT_WEIGHT_DECAY:
        rc = parse_positive("--weight-decay", arg, &d);
        t->weight_decay = d;
        return rc;
    case NC_OPT_SURROGATE_ALPHA:
        rc = parse_positive("--surrogate-alpha", arg, &d);
        t->surrogate_alpha = (float)d;
        return rc;
    case NC_OPT_OPTIMIZER:
        return nc_cli_check_choice(nc_optimizer_parse(arg, &t->optimizer) == 0, "--optimizer", "sgd or adam", arg);
    case NC_OPT_SURROGATE:
        return nc_cli_check_choice(nc_surrogate_parse(arg, &t->surrogate) == 0, "--surrogate",
                                   "triangle, sigmoid, atan or rect", arg);
    case NC_OPT_TRAIN_THRESHOLD: t->train_threshold = 1; return 1;
    case NC_OPT_ROLLBACK: t->rollback = 1; return 1;
    case NC_OPT_NO_ROLLBACK: t->rollback = 0; return 1;
    case NC_OPT_AUGMENT:
        t->crop_padding = 2;
        t->flip = 1;
        return 1;
    case NC_OPT_TRAIN_BATCH:
        rc = parse_long_into("--batch", arg, 1, 1 << 16, &v);
        t->batch_size = (int)v;
        return rc;
    case NC_OPT_TRAIN_ENGINE:
        t->engine = arg;
        return nc_cli_check_choice(!strcmp(arg, "cpu") || !strcmp(arg, "gpu"), "--train-engine", "cpu or gpu", arg);
    case NC_OPT_HORIZONS:
        if (nc_train_horizons_parse(arg, t) != 0) {
            fprintf(stderr, "neurocuda: --train-horizons needs 1 to 8 step counts like 4,8, got '%s'\n", arg);
            return -1;
        }
        return 1;
    case NC_OPT_DISTILL:
        if (nc_train_distill_parse(arg, t) != 0) {
            fprintf(stderr, "neurocuda: --distill needs a weight in [0, 1] and optionally a temperature > 0, "
                            "like 0.5 or 0.5,2; got '%s'\n", arg);
            return -1;
        }
        return 1;
    case NC_OPT_CALIBRATE_BIAS:
        rc = parse_long_into("--calibrate-bias", arg, 1, 4096, &v);
        o->calibrate_bias_T = (int)v;
        return rc;
    case NC_OPT_BIAS_IMAGES:
        rc = parse_long_into("--bias-images", arg, 1, 1L << 30, &v);
        o->bias_calib_images = v;
        return rc;
    case NC_OPT_TRAIN_IMAGES:
        rc = parse_long_into("--train-images", arg, 1, 1L << 30, &v);
        t->train_count = v;
        return rc;
    case NC_OPT_VAL_IMAGES:
        rc = parse_long_into("--val-images", arg, 0, 1L << 30, &v);
        t->val_count = v;
        f->val_images_set = 1;
        return rc;
    case NC_OPT_EVAL_T:
        rc = parse_long_into("--eval-T", arg, 1, 4096, &v);
        f->eval_T = (int)v;
        return rc;
    default: return 0;
    }
}

/* NC_TRAIN_LOG=1: every batch's line on stderr also when it is not a
 * terminal, one line each (logs that compare loss curves batch by batch,
 * tools/gpu-multi-compare.py). */
static int batch_lines(void)
{
    const char *v = getenv("NC_TRAIN_LOG");
    return v && strcmp(v, "1") == 0;
}

int nc_cli_train_progress(void *user, const nc_train_progress *p)
{
    (void)user;
    int last = p->batch == p->batches;
    if (batch_lines())
        fprintf(stderr, "%s epoch %d/%d: batch %lld/%lld, loss %.6f, accuracy %.4f\n", nc_train_mode_name(p->mode),
                p->epoch, p->epochs, (long long)p->batch, (long long)p->batches, p->loss, p->train_accuracy);
    else if (isatty(STDERR_FILENO) && !last) {
        fprintf(stderr, "\r%s epoch %d/%d: batch %lld/%lld, loss %.4f, accuracy %.4f   ", nc_train_mode_name(p->mode),
                p->epoch, p->epochs, (long long)p->batch, (long long)p->batches, p->loss, p->train_accuracy);
        fflush(stderr);
    }
    if (last) {
        if (isatty(STDERR_FILENO))
            fputs("\r", stderr);
        printf("  %s epoch %d/%d: loss %.4f, train accuracy %.4f", p->mode == NC_TRAIN_QCFS ? "QCFS" : "BPTT",
               p->epoch, p->epochs, p->loss, p->train_accuracy);
        if (p->val_accuracy >= 0)
            printf(", held-out accuracy %.4f", p->val_accuracy);
        printf(" (%.0f s)\n", p->seconds);
        fflush(stdout);
    }
    return nc_cli_interrupted();
}
