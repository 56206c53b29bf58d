/* test_budget.c — the time plan of a job with a time budget (sim/nc_budget.h),
 * with made-up stage timings and a fake clock (the elapsed seconds passed in):
 *   - a later evaluation reserves time in proportion to its images × steps,
 *     at the rate the earlier measurements ran;
 *   - a training stage followed by another gets its weight's share, the last
 *     one all that is left;
 *   - an over-full plan gives the first epoch only and says so;
 *   - the rates: each kind of stage at its own, else the slowest plain one;
 *     observed passes at their own rate (measured, else probed), training
 *     ignored;
 *   - the epochs a stage runs: as many more of its longest as fit. */
#include "nc_test.h"

#include <math.h>

#include "../sim/nc_budget.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * (1 + fabs(b)); }

static nc_budget_stage ran_plain(const char *label, double steps, double seconds)
{
    return (nc_budget_stage){.label = label, .plain_steps = steps, .seconds = seconds};
}

static nc_budget_stage later_plain(const char *label, double steps)
{
    return (nc_budget_stage){.label = label, .plain_steps = steps, .seconds = -1};
}

static nc_budget_stage training(double weight, double seconds)
{
    return (nc_budget_stage){.label = "finetune", .train_weight = weight, .seconds = seconds};
}

/* 1 000 test images at T = 4 took 2 s: a later evaluation of 10 000 images
 * reserves ten times that, one of 5 000 five times. */
static void test_reserve_in_proportion_to_images(void)
{
    for (int images = 5000; images <= 10000; images += 5000) {
        nc_budget_stage s[3] = {ran_plain("evaluate", 1000.0 * 4, 2.0), training(3, -1),
                                later_plain("evaluate", images * 4.0)};
        nc_budget_plan p;
        nc_budget_plan_training(s, 3, 1, 100, 10, 0, &p);
        double want = 2.0 * images / 1000;
        NC_CHECK(near(p.plain_rate, 5e-4), "the rate of the evaluation that ran: %g s per image-step", p.plain_rate);
        NC_CHECK(near(p.reserve, want) && p.later == 1, "%d images: %.2f s reserved (want %.2f)", images, p.reserve,
                 want);
        NC_CHECK(near(p.left, 90) && near(p.seconds, 90 - want) && near(p.share, 1) && !p.over_full,
                 "the last training stage gets the rest: %.2f s", p.seconds);
        NC_CHECK(strstr(p.reason, "reserved for the 1 stage after it (evaluate") && strstr(p.reason, "evaluate"),
                 "the reason names the reserve: %s", p.reason);
    }
}

/* convert's evaluation → QCFS → evaluate → BPTT → evaluate: QCFS (weight 1)
 * gets a quarter of what the reserve leaves, BPTT (weight 3) later all the
 * rest, QCFS's unused time included. */
static void test_training_after_training_shares(void)
{
    nc_budget_stage s[5] = {ran_plain("evaluate", 4000, 2.0), training(1, -1), later_plain("evaluate", 4000),
                            training(3, -1), later_plain("evaluate", 4000)};
    nc_budget_plan p;
    nc_budget_plan_training(s, 5, 1, 100, 20, 0, &p);
    NC_CHECK(near(p.reserve, 4) && p.later == 2, "two evaluations of 2 s reserved: %.2f s", p.reserve);
    NC_CHECK(near(p.share, 0.25) && near(p.seconds, 0.25 * (80 - 4)), "QCFS: a quarter of 76 s, got %.2f s",
             p.seconds);
    NC_CHECK(strstr(p.reason, "up to 19.0 s, 25 % of the 76.0 s free") != NULL, "the share is explained: %s", p.reason);
    /* QCFS took 10 s of its 19, the evaluation after it 3 s (slower: the rate follows) */
    s[1].seconds = 10, s[2].seconds = 3;
    nc_budget_plan_training(s, 5, 3, 100, 35, 0, &p);
    NC_CHECK(near(p.plain_rate, 3.0 / 4000), "the slowest evaluation's rate: %g", p.plain_rate);
    NC_CHECK(near(p.reserve, 3) && near(p.share, 1) && near(p.seconds, 65 - 3),
             "BPTT: all of the 65 s left less 3 s, got %.2f s", p.seconds);
    NC_CHECK(strstr(p.reason, "all of the 62.0 s free") != NULL, "%s", p.reason);
}

/* The later stages alone need more than what is left: one epoch, said so. */
static void test_over_full_runs_one_epoch(void)
{
    nc_budget_stage s[4] = {ran_plain("evaluate", 4000, 30.0), training(3, -1), later_plain("evaluate", 40000),
                            later_plain("select", 4000)};
    nc_budget_plan p;
    nc_budget_plan_training(s, 4, 1, 120, 40, 0, &p);
    NC_CHECK(p.over_full && near(p.reserve, 330), "330 s reserved of 80 s left: over-full (%.1f)", p.reserve);
    NC_CHECK(p.seconds == NC_BUDGET_MIN_SECONDS, "the minimum: the trainer's first epoch (%g s)", p.seconds);
    NC_CHECK(strstr(p.reason, "over-full") && strstr(p.reason, "need about 330.0 s") &&
                 strstr(p.reason, "first epoch only") && strstr(p.reason, "select"),
             "the reason says so: %s", p.reason);
    /* past the budget already: the same */
    nc_budget_plan_training(s, 4, 1, 120, 150, 0, &p);
    NC_CHECK(p.over_full && p.seconds == NC_BUDGET_MIN_SECONDS && p.left < 0, "spent: over-full");
}

/* The plain rate is the slowest that ran; training stages do not count;
 * bias calibration's observed passes use the probed rate before one ran,
 * its own once it ran, never less than the plain rate. */
static void test_rates(void)
{
    nc_budget_stage s[4] = {ran_plain("evaluate", 4000, 2.0), ran_plain("select", 1000, 1.0), training(1, 500),
                            training(3, -1)};
    NC_CHECK(near(nc_budget_plain_rate(s, 3, NULL), 1e-3), "the slowest: the select's 1e-3 s per image-step");
    NC_CHECK(near(nc_budget_plain_rate(s, 1, NULL), 5e-4), "only the stages given");
    NC_CHECK(near(nc_budget_plain_rate(s, 3, "evaluate"), 5e-4) && nc_budget_plain_rate(s, 3, "finetune") == 0,
             "by label: the evaluation's own rate; training has none");
    nc_budget_stage later[7] = {s[0], s[1], s[2], s[3],
                                {.label = "calibrate-bias", .plain_steps = 2000, .observed_steps = 10000, .seconds = -1},
                                later_plain("evaluate", 4000), later_plain("save", 100)};
    nc_budget_plan p;
    nc_budget_plan_training(later, 7, 3, 1000, 100, 2e-3, &p);
    NC_CHECK(near(p.observed_rate, 2e-3), "the probed rate for observed passes");
    /* an evaluation at the evaluations' rate; bias calibration's checks and a
     * kind that never ran at the slowest plain rate */
    NC_CHECK(near(p.reserve, (2000 * 1e-3 + 10000 * 2e-3) + 4000 * 5e-4 + 100 * 1e-3),
             "bias calibration 22 s + evaluate 2 s + save 0.1 s: %.2f", p.reserve);
    NC_CHECK(strstr(p.reason, "calibrate-bias 22.0 s, evaluate 2.0 s, save 0.1 s") != NULL, "each estimate: %s",
             p.reason);
    /* its checks like a held-out judgement: at the select's rate (1e-3 s) */
    later[4].plain_like = "select", later[0].seconds = 1.0;
    nc_budget_plan_training(later, 7, 3, 1000, 100, 1e-4, &p);
    NC_CHECK(near(p.observed_rate, 1e-4), "a probed rate is a measurement: kept even below a plain rate");
    NC_CHECK(near(p.reserve, (2000 * 1e-3 + 10000 * 1e-4) + 4000 * 2.5e-4 + 100 * 1e-3),
             "checks at the select's rate, the evaluation at its own: %.2f", p.reserve);
    later[1].seconds = 0.25; /* the select now the fastest: the checks follow it, a save the slowest */
    nc_budget_plan_training(later, 7, 3, 1000, 100, 1e-4, &p);
    NC_CHECK(near(p.reserve, (2000 * 2.5e-4 + 10000 * 1e-4) + 4000 * 2.5e-4 + 100 * 2.5e-4), "%.3f", p.reserve);
    /* a bias calibration that ran: its own rate, its plain part taken off */
    nc_budget_stage bias_ran = {.label = "calibrate-bias", .plain_steps = 2000, .observed_steps = 10000, .seconds = 30};
    NC_CHECK(near(nc_budget_observed_rate(&bias_ran, 1, 1e-3), 2.8e-3), "(30 − 2) s / 10 000 image-steps");
    nc_budget_stage after_bias[4] = {s[0], bias_ran, training(3, -1),
                                     {.label = "calibrate-bias", .observed_steps = 1000, .seconds = -1}};
    nc_budget_plan_training(after_bias, 4, 2, 1000, 100, 9e-3, &p);
    NC_CHECK(near(p.observed_rate, (30 - 2000 * 5e-4) / 10000), "the measured observed rate wins over a probe: %g",
             p.observed_rate);
}

/* Nothing measured: no estimate, and the reason says why; a probed observed
 * rate alone also prices plain passes (they are never dearer). */
static void test_nothing_measured(void)
{
    nc_budget_stage s[2] = {training(1, -1), later_plain("evaluate", 4000)};
    nc_budget_plan p;
    nc_budget_plan_training(s, 2, 0, 60, 1, 0, &p);
    NC_CHECK(near(p.reserve, 0) && near(p.seconds, 59) && strstr(p.reason, "not estimated"),
             "nothing measured: %s", p.reason);
    nc_budget_plan_training(s, 2, 0, 60, 1, 1e-3, &p);
    NC_CHECK(near(p.plain_rate, 1e-3) && near(p.reserve, 4), "the probed rate prices the evaluation: %.2f s",
             p.reserve);
    nc_budget_stage alone[1] = {training(3, -1)};
    nc_budget_plan_training(alone, 1, 0, 60, 5, 0, &p);
    NC_CHECK(near(p.seconds, 55) && p.later == 0 && strstr(p.reason, "nothing after it"), "%s", p.reason);
}

/* Epochs: as many more of the longest so far as fit in what is left. */
static void test_epochs_that_fit(void)
{
    NC_CHECK(nc_budget_epochs(8, 2, 30, 13, 8) == 4, "17 s left, epochs of up to 8 s: 2 more (got %d)",
             nc_budget_epochs(8, 2, 30, 13, 8));
    NC_CHECK(nc_budget_epochs(8, 2, 30, 13, 5) == 5, "17 s left, epochs of up to 5 s: 3 more");
    NC_CHECK(nc_budget_epochs(3, 1, 100, 5, 5) == 3, "never more than planned");
    NC_CHECK(nc_budget_epochs(8, 1, 1e-9, 0.5, 0.5) == 1 && nc_budget_epochs(8, 3, 10, 12, 4) == 3,
             "nothing left: those done");
    /* epochs of 5 s then 8 s: the mean (6.5 s) would fit 2 more in 13 s and overrun; the longest fits 1 */
    NC_CHECK(nc_budget_epochs(8, 2, 26, 13, 8) == 3, "13 s left, an 8 s epoch: 1 more (got %d)",
             nc_budget_epochs(8, 2, 26, 13, 8));
}

int main(void)
{
    NC_RUN(test_reserve_in_proportion_to_images);
    NC_RUN(test_training_after_training_shares);
    NC_RUN(test_over_full_runs_one_epoch);
    NC_RUN(test_rates);
    NC_RUN(test_nothing_measured);
    NC_RUN(test_epochs_that_fit);
    return nc_test_done();
}
