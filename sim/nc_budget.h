/* nc_budget.h — the time plan of a job with a time budget: how many seconds
 * a training stage may take so that the whole job, every stage after it
 * included, ends within the budget (docs/FINETUNING.md, "The time budget").
 *
 * Pure arithmetic on what the runner measured (sim/nc_runner.c describes its
 * stages and passes the clock in): no engine, no clock, so it is tested with
 * made-up timings (tests/test_budget.c).
 *
 * Work is counted in image-steps: one image through the net for one step (an
 * ANN or QCFS-ANN pass counts as one step).  Two kinds of pass cost
 * differently: plain forward passes (measurements, held-out judgements, the
 * check of bias calibration) and observed ones, where every layer's output is
 * read back (bias calibration's passes: on a GPU each layer is copied to the
 * host), so each kind has its own rate in seconds per image-step.
 *
 * The rule, before each training stage:
 *   1. rates (what the engine does under this run's load, not a guess): a
 *      later stage's plain passes run at the slowest rate of the stages of
 *      its kind (same label) that ran, else at the slowest plain rate of any
 *      stage that ran (stages of one kind do the same passes: a measurement's
 *      ANN pass and recorded steps cost more per image-step than a held-out
 *      judgement's bare steps; a stage whose plain passes are another
 *      kind's names it in plain_like); observed passes at the slowest rate
 *      of the stages that ran with them, else at the rate the caller measured
 *      on a batch.  A rate still unknown takes the other's.
 *   2. reserve: every later stage that is not training is estimated as its
 *      image-steps × those rates, and summed.
 *   3. share: what is left of the budget less the reserve is shared among
 *      this and the later training stages by their weights: this stage gets
 *      weight / (its weight + the later ones') of it.  A later training stage
 *      plans again when it starts, so time that one did not use passes on.
 *   4. over-full: when the reserve alone is more than what is left, the stage
 *      runs its first epoch only (the trainer always runs one), and the
 *      plan's reason says so. */
#ifndef NC_BUDGET_H
#define NC_BUDGET_H

/* What a training stage is given when nothing is left: less than any epoch
 * takes, so the trainer runs its first epoch and stops (it always runs one,
 * then as many as fit: nc_train_options.time_budget). */
#define NC_BUDGET_MIN_SECONDS 1e-9

typedef struct nc_budget_stage {
    const char *label;       /* named in the plan's reason ("evaluate", "calibrate-bias") */
    double train_weight;     /* > 0: a training stage, its weight in the share            */
    double plain_steps;      /* image-steps of plain forward passes                       */
    const char *plain_like;  /* the label of the stages whose plain passes these are like
                                (priced at their rate); NULL: its own label               */
    double observed_steps;   /* image-steps of observed forward passes                    */
    double seconds;          /* the seconds it took; < 0: not run yet                     */
} nc_budget_stage;

typedef struct nc_budget_plan {
    double budget;           /* seconds for the whole job                                 */
    double left;             /* seconds of it not spent when the stage starts             */
    double reserve;          /* the later non-training stages' estimate                   */
    double share;            /* this stage's part of left − reserve (0..1)                */
    double seconds;          /* what the stage may take (NC_BUDGET_MIN_SECONDS if over-full) */
    double plain_rate, observed_rate; /* seconds per image-step used (0: unknown)         */
    int later;               /* later non-training stages with work                        */
    int over_full;           /* 1: the reserve alone is more than what is left             */
    char reason[512];        /* one line: the numbers above in words                       */
} nc_budget_plan;

/* The slowest plain rate among stages[0..n) that ran with plain passes only
 * and have `label` (NULL: any label); seconds per image-step, 0: none ran. */
double nc_budget_plain_rate(const nc_budget_stage *stages, int n, const char *label);

/* The slowest observed rate among stages[0..n) that ran with observed
 * passes, their plain part counted at plain_rate; 0: none ran. */
double nc_budget_observed_rate(const nc_budget_stage *stages, int n, double plain_rate);

/* The plan of training stage `stage` of stages[0..n) (the stages before it
 * have run) for a job of `budget` seconds of which `elapsed` are spent;
 * `probed_rate` is an observed rate measured on one batch (0: none), used
 * when no stage with observed passes ran yet. */
void nc_budget_plan_training(const nc_budget_stage *stages, int n, int stage, double budget, double elapsed,
                             double probed_rate, nc_budget_plan *out);

/* The epochs a training stage runs within `seconds` (> 0) when `done` of
 * `planned` took `elapsed` seconds, the longest of them `longest_epoch`:
 * those done plus as many more of the longest as fit in what is left (a
 * machine shared with other work slows down as often as it speeds up, and
 * the first epoch also carries the set-up and the held-out pass before
 * training); never fewer than done, never more than planned. */
int nc_budget_epochs(int planned, int done, double seconds, double elapsed, double longest_epoch);

#endif
