/* nc_budget.c — the time plan of a job with a time budget (nc_budget.h). */
#include "nc_budget.h"

#include <stdio.h>
#include <string.h>

static int ran(const nc_budget_stage *s) { return s->seconds >= 0; }

static int same_label(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

double nc_budget_plain_rate(const nc_budget_stage *stages, int n, const char *label)
{
    double rate = 0;
    for (int i = 0; i < n; i++) {
        const nc_budget_stage *s = &stages[i];
        if (ran(s) && s->train_weight <= 0 && s->plain_steps > 0 && s->observed_steps <= 0 &&
            (!label || same_label(label, s->label)) && s->seconds / s->plain_steps > rate)
            rate = s->seconds / s->plain_steps;
    }
    return rate;
}

double nc_budget_observed_rate(const nc_budget_stage *stages, int n, double plain_rate)
{
    double rate = 0;
    for (int i = 0; i < n; i++) {
        const nc_budget_stage *s = &stages[i];
        if (!ran(s) || s->train_weight > 0 || s->observed_steps <= 0)
            continue;
        double own = (s->seconds - s->plain_steps * plain_rate) / s->observed_steps;
        rate = own > rate ? own : rate;
    }
    return rate;
}

/* The seconds later stage s should take, judged by the `n_ran` stages that
 * ran: its plain passes at the rate of the stages of their kind (plain_like,
 * else its label) that ran, else at the slowest plain rate; its observed
 * passes at the observed rate. */
static double estimate(const nc_budget_stage *stages, int n_ran, const nc_budget_stage *s, const nc_budget_plan *p)
{
    const char *like = s->plain_like ? s->plain_like : s->label;
    double own = like ? nc_budget_plain_rate(stages, n_ran, like) : 0;
    return s->plain_steps * (own > 0 ? own : p->plain_rate) + s->observed_steps * p->observed_rate;
}

/* "evaluate ×3 12.0 s, select ×3 1.5 s, calibrate-bias 4.0 s": the later
 * stages' estimates, summed per label in the order they first come. */
static void describe_reserve(const nc_budget_stage *stages, int n, int stage, const nc_budget_plan *p, char *buf,
                             size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = stage + 1; i < n && len < size; i++) {
        const nc_budget_stage *s = &stages[i];
        int first = s->train_weight <= 0 && (s->plain_steps > 0 || s->observed_steps > 0);
        for (int k = stage + 1; k < i && first; k++)
            first = !same_label(stages[k].label, s->label);
        if (!first)
            continue;
        double sum = 0;
        int count = 0;
        for (int k = i; k < n; k++)
            if (stages[k].train_weight <= 0 && (stages[k].plain_steps > 0 || stages[k].observed_steps > 0) &&
                (k == i || same_label(stages[k].label, s->label))) {
                sum += estimate(stages, stage, &stages[k], p);
                count++;
            }
        char times[16] = "";
        if (count > 1)
            snprintf(times, sizeof times, " ×%d", count);
        len += (size_t)snprintf(buf + len, size - len, "%s%s%s %.1f s", len ? ", " : "", s->label ? s->label : "stage",
                                times, sum);
    }
}

static void explain(const nc_budget_stage *stages, int n, int stage, nc_budget_plan *p)
{
    char items[256], later[320];
    describe_reserve(stages, n, stage, p, items, sizeof items);
    if (p->later > 0 && p->plain_rate <= 0)
        snprintf(later, sizeof later, "the %d stage%s after it (not estimated: nothing measured yet)", p->later,
                 p->later == 1 ? "" : "s");
    else
        snprintf(later, sizeof later, "the %d stage%s after it (%s)", p->later, p->later == 1 ? "" : "s", items);
    char reserved[48] = "nothing reserved";
    if (p->plain_rate > 0)
        snprintf(reserved, sizeof reserved, "%.1f s of them reserved", p->reserve);
    char share[64] = "all";
    if (p->share < 1)
        snprintf(share, sizeof share, "%.0f %%", 100 * p->share);
    if (p->over_full)
        snprintf(p->reason, sizeof p->reason,
                 "time budget over-full: %.1f s of the %.1f s are left, but %s need about %.1f s: the first epoch only",
                 p->left, p->budget, later, p->reserve);
    else if (p->later == 0)
        snprintf(p->reason, sizeof p->reason,
                 "time budget: this stage up to %.1f s, %s of the %.1f s left of the %.1f s (nothing after it to "
                 "reserve for)%s",
                 p->seconds, share, p->left, p->budget, p->share < 1 ? "; more training follows" : "");
    else
        snprintf(p->reason, sizeof p->reason,
                 "time budget: this stage up to %.1f s, %s of the %.1f s free%s: %.1f s of the %.1f s are left, "
                 "%s for %s",
                 p->seconds, share, p->left - p->reserve, p->share < 1 ? " (more training follows)" : "", p->left,
                 p->budget, reserved, later);
}

void nc_budget_plan_training(const nc_budget_stage *stages, int n, int stage, double budget, double elapsed,
                             double probed_rate, nc_budget_plan *out)
{
    memset(out, 0, sizeof *out);
    out->budget = budget;
    out->left = budget - elapsed;
    out->plain_rate = nc_budget_plain_rate(stages, stage, NULL);
    out->observed_rate = nc_budget_observed_rate(stages, stage, out->plain_rate);
    if (out->observed_rate <= 0)
        out->observed_rate = probed_rate;
    if (out->observed_rate <= 0) /* an observed pass does a plain pass and more */
        out->observed_rate = out->plain_rate;
    if (out->plain_rate <= 0)
        out->plain_rate = out->observed_rate;
    double weight = stages[stage].train_weight > 0 ? stages[stage].train_weight : 1, weights = weight;
    for (int i = stage + 1; i < n; i++) {
        const nc_budget_stage *s = &stages[i];
        if (s->train_weight > 0)
            weights += s->train_weight;
        else if (s->plain_steps > 0 || s->observed_steps > 0) {
            out->reserve += estimate(stages, stage, s, out);
            out->later++;
        }
    }
    out->share = weight / weights;
    double free = out->left - out->reserve;
    out->over_full = free <= 0;
    out->seconds = free > 0 ? out->share * free : NC_BUDGET_MIN_SECONDS;
    if (out->seconds < NC_BUDGET_MIN_SECONDS)
        out->seconds = NC_BUDGET_MIN_SECONDS;
    explain(stages, n, stage, out);
}

int nc_budget_epochs(int planned, int done, double seconds, double elapsed, double longest_epoch)
{
    double left = seconds - elapsed;
    int more = longest_epoch > 0 && left > 0 ? (int)(left / longest_epoch) : 0;
    int fit = done + (more < planned - done ? more : planned - done);
    return fit > done ? fit : done;
}
