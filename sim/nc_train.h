/* nc_train.h — fine-tuning a converted network on the CPU (conversion.md §1.3, §4).
 *
 * Two stages use the same trainer, on the same IR the engines run:
 *   NC_TRAIN_QCFS : the QCFS-ANN (qcfs and if neurons act as
 *                   λ·clip(floor(z·L/λ + φ)/L, 0, 1)), trained with the
 *                   straight-through estimator; λ optionally trained.
 *   NC_TRAIN_BPTT : the SNN over T steps (T folded into the rows, time-major,
 *                   as the engines run it), IF neurons with a surrogate
 *                   gradient for the spike (triangle by default); θ
 *                   optionally trained; v0 = f·θ and the reset kept.
 * The loss is softmax cross-entropy of the output (in BPTT: of the output
 * averaged over the T steps, the same argmax as the sum the SNN predicts
 * with; optionally averaged over several horizons, see n_horizons).  Parameters: conv/dense weights and biases, affine scale/shift, and
 * with train_threshold the thresholds.  Weight decay applies to conv/dense
 * weights only.
 *
 * The arithmetic runs on a backend (sim/nc_train_backend.h: "cpu" or "gpu")
 * that holds the activations and a working copy of the parameters; the net
 * itself is written only when a run ends well (or by nc_trainer_sync_net).
 *
 * The trainer keeps every node's activations of a batch (and in BPTT the
 * membrane of every IF step), so memory grows with batch × T: call
 * nc_train_estimate first (nc_train does, and refuses a run over budget).
 *
 * Node support: input, conv2d (any groups), dense, avg/max/global pooling,
 * flatten, add, concat, affine, relu/clip/qcfs/if neurons, output.  In BPTT a
 * MaxPool is trained as the engine runs it: AVG as an average, PRE_SPIKE as
 * the max of running sums (sim/engine_cpu.c); GATED has no gradient and is
 * refused.  The NIR neuron models, scale and recurrent nodes are refused. */
#ifndef NC_TRAIN_H
#define NC_TRAIN_H

#include "../core/nc_dataset.h"
#include "../core/nc_net.h"
#include "nc_surrogate.h"

typedef enum nc_train_mode { NC_TRAIN_QCFS, NC_TRAIN_BPTT } nc_train_mode;
typedef enum nc_optimizer { NC_OPTIMIZER_SGD, NC_OPTIMIZER_ADAM } nc_optimizer;

typedef struct nc_train_progress {
    nc_train_mode mode;
    int epoch, epochs;            /* epoch is 1-based                            */
    int64_t batch, batches;       /* within the epoch, 1-based                    */
    double loss;                  /* mean loss of the epoch so far                */
    double train_accuracy;        /* of the epoch so far                          */
    double val_accuracy;          /* after an epoch's last batch, else −1         */
    double learning_rate;
    double seconds;               /* since the start of the run                  */
} nc_train_progress;

/* Called after every batch; returns non-zero to stop (NC_ERR_CANCELLED). */
typedef int (*nc_train_progress_fn)(void *user, const nc_train_progress *p);

typedef struct nc_train_options {
    nc_train_mode mode;
    int epochs;                   /* default 1                                   */
    int batch_size;               /* default 64                                  */
    int T;                        /* BPTT steps, default 8                        */
    nc_optimizer optimizer;       /* default Adam                                */
    double learning_rate;         /* default 1e-4 (Adam), 1e-3 (SGD) if 0        */
    double momentum;              /* SGD, default 0.9                            */
    double weight_decay;          /* default 5e-4 (SGD), 0 (Adam) — see defaults  */
    double beta1, beta2, epsilon; /* Adam: 0.9, 0.999, 1e-8                      */
    int cosine;                   /* cosine annealing to 0 over the run (default 1) */
    nc_surrogate surrogate;       /* BPTT, default triangle                      */
    float surrogate_alpha;        /* 0 = the surrogate's default                 */
    int train_threshold;          /* also train λ (QCFS) or θ (BPTT)             */
    /* BPTT: the loss is the mean of the cross-entropies of the output averaged
     * over the first k steps, for each k listed (each 1..T): e.g. {4, 8} with
     * T = 8 trains the SNN to be right after 4 steps AND after 8.  None
     * (n_horizons = 0): k = T only. */
    int n_horizons;
    int horizons[8];
    int crop_padding;             /* random crop after zero padding; 0 = off     */
    float crop_fill;              /* the value of padded pixels (a black pixel after preprocessing) */
    int flip;                     /* random horizontal flips                     */
    uint64_t seed;                /* shuffling and augmentation                  */
    int64_t train_count;          /* images used per epoch (0 = all of `train` minus the held-out) */
    int64_t val_count;            /* the LAST val_count images of `train` are held out
                                   * to pick the best epoch (0 = none: keep the last) */
    double memory_budget;         /* bytes; 0 = 60 % of physical memory (cpu) or
                                   * 90 % of the device's free memory (gpu)      */
    const char *engine;           /* where the arithmetic runs: "cpu" (NULL) or
                                   * "gpu" (sim/nc_train_backend.h)             */
    /* Distillation: the teacher's logits on the same (augmented) batch are
     * soft targets next to the labels, nc_distill_xent with weight
     * distill_alpha (0 = off: the plain cross-entropy, bit for bit) and
     * temperature distill_tau (≤ 0: NC_TRAIN_DEFAULT_TAU).  The teacher is
     * the source ANN (ReLU/clip neurons), run by a second trainer on the same
     * backend in QCFS mode, never trained; it must outlive the run. */
    const nc_net *teacher;
    double distill_alpha;
    double distill_tau;
    /* Seconds the run may take (0 = no limit): after each epoch, the run
     * stops early when one more epoch as long as the longest so far would
     * pass it (nc_budget_epochs); the cosine schedule is re-planned over the
     * epochs that fit.  The first epoch always runs. */
    double time_budget;
    /* After an epoch whose held-out accuracy is below the best so far: back
     * to the best epoch's parameters, the optimiser's state cleared, and the
     * learning rate halved for the rest of the run (an epoch that went the
     * wrong way is not built upon).  Needs val_count > 0; default 0. */
    int rollback;
    /* Data parallel (sim/nc_train_dp.h): the ranks (devices) that share every
     * batch; ≤ 1: one.  nc_train splits each batch over them. */
    int ranks;
    nc_train_progress_fn progress;
    void *progress_user;
} nc_train_options;

#define NC_TRAIN_DEFAULT_TAU 2.0

nc_train_options nc_train_options_default(nc_train_mode mode);

typedef struct nc_train_result {
    int epochs_run;
    int best_epoch;               /* whose parameters the net holds at the end (0 = before training) */
    double best_val_accuracy;     /* −1 without a held-out set                  */
    double val_accuracy_before;   /* held-out accuracy before training (−1)      */
    double final_loss;
    double seconds;
    double memory_bytes;          /* the estimate the run was checked against    */
    int rollbacks;                /* epochs undone (options.rollback)            */
} nc_train_result;

/* Bytes a run of `net` with these options needs (activations, membranes,
 * gradients, optimiser state, workspaces).  Fails when a node cannot be
 * trained, naming it. */
nc_status nc_train_estimate(const nc_net *net, const nc_train_options *o, double *bytes,
                            nc_error *err);

/* Fine-tunes `net` in place on `train` (the TRAIN split).  On success the
 * net holds the best epoch's parameters (by held-out accuracy) or the last.
 * On cancel or error the net holds the parameters it had BEFORE the call
 * (nothing half-trained is left behind). */
nc_status nc_train(nc_net *net, const nc_dataset *train, const nc_train_options *o,
                   nc_train_result *result, nc_error *err);

/* ---- one step at a time, for tests and custom loops ----------------------
 * A trainer bound to `net` (which it modifies in place on each step). */
typedef struct nc_trainer nc_trainer;

nc_status nc_trainer_new(nc_net *net, const nc_train_options *o, int max_batch, nc_trainer **out,
                         nc_error *err);
void nc_trainer_free(nc_trainer *tr); /* NULL is a no-op */
/* The same on a backend the caller made (sim/nc_train_backend.h) instead of
 * one named by o->engine; the trainer neither owns nor frees it, and it must
 * outlive the trainer. */
struct nc_train_backend;
nc_status nc_trainer_new_on(nc_net *net, const nc_train_options *o, int max_batch, struct nc_train_backend *backend,
                            nc_trainer **out, nc_error *err);

/* Forward + backward of one batch: images [n, shape of the input node],
 * labels [n].  Leaves the gradients in the trainer (see nc_trainer_param)
 * without changing the net; *loss = mean cross-entropy, *correct = images
 * predicted right (either may be NULL). */
nc_status nc_trainer_gradients(nc_trainer *tr, const float *images, const int32_t *labels, int n,
                               double *loss, int64_t *correct, nc_error *err);
/* Applies one optimiser step with the last gradients at learning rate lr. */
void nc_trainer_apply(nc_trainer *tr, double lr);
/* Writes the trainer's working parameters into the net; fails when the
 * backend recorded an error. */
nc_status nc_trainer_sync_net(nc_trainer *tr, nc_error *err);
/* How the backend ran the steps, for `bench --train`: on the GPU, which
 * batch sizes replay as a recorded graph (sim/nc_train_backend.h, step_begin);
 * "" where the backend says nothing.  NUL-terminated, truncated to size. */
void nc_trainer_describe(const nc_trainer *tr, char *buf, size_t size);
/* Predictions only (no gradients kept): logits [n, classes] (the mean over
 * T in BPTT). */
nc_status nc_trainer_logits(nc_trainer *tr, const float *images, int n, float *logits,
                            nc_error *err);

/* Data parallel (sim/nc_train_dp.h): this trainer is rank `rank` of a run
 * whose gradients are summed through `comm` (borrowed) — each node's
 * parameter gradients join a bucket when its backward pass is done, and a
 * bucket of bucket_floats floats (0: NC_TRAIN_BUCKET_FLOATS) is summed while
 * the backward pass goes on.  After nc_trainer_gradients every rank holds
 * the sum.  A rank may then be given n = 0 images (it sums zeros). */
struct nc_allreduce;
#define NC_TRAIN_BUCKET_FLOATS (25 << 18) /* 25 MiB of floats, PyTorch DDP's bucket */
void nc_trainer_set_reducer(nc_trainer *tr, struct nc_allreduce *comm, int rank, int64_t bucket_floats);
/* The weight of this trainer's mean loss in the batch's mean (its images /
 * the batch's images): the loss gradient is scaled by it, so that the sum
 * over the ranks is the whole batch's gradient.  1 by default. */
void nc_trainer_set_share(nc_trainer *tr, double share);

/* The trainable parameters, in node order: for each trained node its weight,
 * then bias (then for neurons the threshold).  Returns the count; with
 * k < count fills what the k-th is. */
typedef struct nc_train_param {
    int node;
    const char *what;   /* "weight", "bias", "threshold"                 */
    const float *value; /* host copies of the working values and of the   */
    const float *grad;  /* last gradients, valid until the next call      */
    int64_t count;
} nc_train_param;
int nc_trainer_param_count(const nc_trainer *tr);
void nc_trainer_param(const nc_trainer *tr, int k, nc_train_param *out);
/* Sets parameter k to values[k] (host, nc_train_param.count floats each) for
 * every k, and clears the optimiser's moments and step count: the trainer
 * goes on as one made afresh with those values. */
void nc_trainer_reset(nc_trainer *tr, const float *const *values);

const char *nc_train_mode_name(nc_train_mode m);   /* "qcfs", "bptt" */
const char *nc_optimizer_name(nc_optimizer o);     /* "sgd", "adam"  */
int nc_optimizer_parse(const char *text, nc_optimizer *out); /* 0 ok, -1 bad */
/* "4,8" → o->horizons {4, 8}, o->n_horizons 2: 1 to 8 whole step counts in
 * 1 … 4096; 0 ok, -1 bad (o unchanged). */
int nc_train_horizons_parse(const char *text, nc_train_options *o);
/* "0.5" or "0.5,4" → distill_alpha (in [0, 1]) and distill_tau (> 0, kept
 * when not given); 0 ok, -1 bad (o unchanged). */
int nc_train_distill_parse(const char *text, nc_train_options *o);

#endif
