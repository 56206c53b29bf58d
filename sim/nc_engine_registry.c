/* nc_engine_registry.c — the engine table (nc_engine_registry.h): sim/'s own
 * engines, the entry that says why "gpu" is missing from a build without CUDA,
 * and the entries engines register. */
#include "nc_engine_registry.h"
#include "nc_cpu_ops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_config.h"
#include "nc_engine_loihi.h"

/* ---- sim/'s engines ------------------------------------------------------- */

#define N_OPTIONS(array) ((int)(sizeof array / sizeof array[0]))

#define THREADS_OPTION                                                                                       \
    {.key = "threads", .type = NC_ENGINE_OPTION_INT, .default_value = "0", .min = 0, .max = 4096,                 \
     .help = "worker threads of a forward pass (0: every core)"}

/* The cpu engine: its threads, and which build of the CPU kernels runs
 * (sim/nc_cpu_dispatch.c; the same for every engine of the process). */
static const nc_engine_option cpu_options[] = {
    THREADS_OPTION,
    {.key = "kernels", .type = NC_ENGINE_OPTION_CHOICE, .default_value = "auto",
     .choices = "auto|avx512|avx2|baseline",
     .help = "build of the CPU kernels (auto: the best this CPU runs; one build per process)",
     .env = "NC_CPU_PATH"},
};

static int always(char *why, size_t size)
{
    (void)why;
    (void)size;
    return 1;
}

static nc_status create_cpu(const nc_engine_values *v, nc_engine **out, nc_error *err)
{
    char why[200];
    if (strcmp(v->text[1], "auto") != 0 && nc_cpu_path_request(v->text[1], why, sizeof why) != 0)
        return nc_fail(err, NC_ERR_ARGUMENT, "cpu engine: kernels=%s: %s", v->text[1], why);
    *out = nc_engine_cpu_new();
    if (!*out)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory creating the cpu engine");
    (*out)->threads = atoi(v->text[0]);
    return NC_OK;
}

/* The loihi engine's settings (sim/nc_engine_loihi.h); the defaults are
 * nc_loihi_options_default()'s, which tests/test_loihi.c checks.  The CLI's
 * --loihi-* switches set the same keys. */
enum { LOIHI_THREADS, LOIHI_RESET, LOIHI_FIRE, LOIHI_DELAY, LOIHI_SPIKES, LOIHI_MESSAGE_BITS, LOIHI_VTH,
       LOIHI_INPUT_BITS, LOIHI_N_OPTIONS };

static const nc_engine_option loihi_options[LOIHI_N_OPTIONS] = {
    [LOIHI_THREADS] = THREADS_OPTION,
    [LOIHI_RESET] = {.key = "reset", .type = NC_ENGINE_OPTION_CHOICE, .default_value = "subtract",
                     .choices = "subtract|zero",
                     .help = "reset after a spike: subtract the threshold (our QCFS neurons) or zero (Lava's LIF)"},
    [LOIHI_FIRE] = {.key = "fire", .type = NC_ENGINE_OPTION_CHOICE, .default_value = "gt", .choices = "gt|ge",
                    .help = "fire when v > threshold (gt, the chip) or v >= threshold (ge)"},
    [LOIHI_DELAY] = {.key = "delay", .type = NC_ENGINE_OPTION_CHOICE, .default_value = "compensated",
                     .choices = "compensated|off|raw",
                     .help = "1-step synaptic delay: each layer starts when its input arrives (compensated), "
                             "no delay (off), or every layer starting at step 0 (raw)"},
    [LOIHI_SPIKES] = {.key = "spikes", .type = NC_ENGINE_OPTION_CHOICE, .default_value = "binary",
                      .choices = "binary|graded", .help = "spike payload: 1 (binary) or the thresholds crossed"},
    [LOIHI_MESSAGE_BITS] = {.key = "message-bits", .type = NC_ENGINE_OPTION_INT, .default_value = "8", .min = 1,
                            .max = 24, .help = "bits of a graded spike's payload"},
    [LOIHI_VTH] = {.key = "vth", .type = NC_ENGINE_OPTION_INT, .default_value = "4096", .min = 1,
                   .max = NC_LOIHI_VTH_MAX, .help = "threshold mantissa the quantisation aims at"},
    [LOIHI_INPUT_BITS] = {.key = "input-bits", .type = NC_ENGINE_OPTION_INT, .default_value = "8", .min = 0,
                          .max = 16, .help = "fractional bits of the input payload round(x * 2^F)"},
};

/* The position of option k's value among its choices (checked already). */
static int loihi_choice(const nc_engine_values *v, int k)
{
    int at = nc_engine_option_choice(&loihi_options[k], v->text[k]);
    return at > 0 ? at : 0;
}

static nc_loihi_options loihi_options_of(const nc_engine_values *v)
{
    static const nc_loihi_delay delays[] = {NC_LOIHI_DELAY_COMPENSATED, NC_LOIHI_DELAY_OFF, NC_LOIHI_DELAY_RAW};
    nc_loihi_options lo = nc_loihi_options_default();
    lo.reset = loihi_choice(v, LOIHI_RESET) == 1 ? NC_RESET_ZERO : NC_RESET_SUBTRACT;
    lo.compare = loihi_choice(v, LOIHI_FIRE) == 1 ? NC_FIRE_GE : NC_FIRE_GT;
    lo.delay = delays[loihi_choice(v, LOIHI_DELAY)];
    lo.graded = loihi_choice(v, LOIHI_SPIKES) == 1;
    lo.message_bits = atoi(v->text[LOIHI_MESSAGE_BITS]);
    lo.quant.vth_target = atoi(v->text[LOIHI_VTH]);
    lo.quant.input_frac_bits = atoi(v->text[LOIHI_INPUT_BITS]);
    return lo;
}

static nc_status create_loihi(const nc_engine_values *v, nc_engine **out, nc_error *err)
{
    *out = nc_engine_loihi_new();
    if (!*out)
        return nc_fail(err, NC_ERR_MEMORY, "out of memory creating the loihi engine");
    (*out)->threads = atoi(v->text[LOIHI_THREADS]);
    nc_loihi_options lo = loihi_options_of(v);
    nc_status st = nc_engine_loihi_set_options(*out, &lo, err);
    if (st != NC_OK) {
        nc_engine_free(*out);
        *out = NULL;
    }
    return st;
}

static void cpu_details(char *buf, size_t size)
{
    snprintf(buf, size, "float32 reference (OpenBLAS); CPU kernels: %s%s%s", nc_cpu_path(),
             *nc_cpu_path_note() ? " — " : "", nc_cpu_path_note());
}

static const nc_engine_info cpu_info = {
    .name = "cpu",
    .description = "float32 reference (OpenBLAS)",
    .caps = NC_CAP_SNN | NC_CAP_TRAINING, /* fine-tuning runs on sim/nc_train_backend_cpu.c */
    .n_options = N_OPTIONS(cpu_options),
    .options = cpu_options,
    .available = always,
    .details = cpu_details,
    .create = create_cpu,
};

static const nc_engine_info loihi_info = {
    .name = "loihi",
    .description = "Loihi-2-style fixed point: bit-accurate integer IF neurons (CPU)",
    .caps = NC_CAP_SNN | NC_CAP_FIXED_POINT,
    .n_options = N_OPTIONS(loihi_options),
    .options = loihi_options,
    .available = always,
    .create = create_loihi,
};

/* The "gpu" entry of a build without CUDA: it says why the engine is missing
 * (gpu/nc_gpu_register.c replaces it when the CUDA library is linked). */
static const char no_cuda[] = "not compiled in: this build has no CUDA (rebuild with -Dcuda=enabled where nvcc is "
                              "installed); use --engine cpu";

static int gpu_absent(char *why, size_t size)
{
    snprintf(why, size, "%s", no_cuda);
    return 0;
}

static nc_status create_absent_gpu(const nc_engine_values *v, nc_engine **out, nc_error *err)
{
    (void)v;
    *out = NULL;
    return nc_fail(err, NC_ERR_UNSUPPORTED, "the gpu engine is %s", no_cuda);
}

static const nc_engine_info gpu_not_built = {
    .name = "gpu",
    .description = "CUDA, cuBLAS and cuDNN (not in this build)",
    .available = gpu_absent,
    .create = create_absent_gpu,
};

/* ---- the table --------------------------------------------------------------- */

#define MAX_ENGINES 8
static const nc_engine_info *table[MAX_ENGINES] = {&cpu_info, &gpu_not_built, &loihi_info};
static int n_engines = 3;

void nc_engine_register(const nc_engine_info *info)
{
    for (int i = 0; i < n_engines; i++)
        if (strcmp(table[i]->name, info->name) == 0) {
            table[i] = info;
            return;
        }
    if (n_engines < MAX_ENGINES)
        table[n_engines++] = info;
}

int nc_engine_count(void) { return n_engines; }
const nc_engine_info *nc_engine_at(int i) { return i >= 0 && i < n_engines ? table[i] : NULL; }

const nc_engine_info *nc_engine_find(const char *name)
{
    for (int i = 0; name && i < n_engines; i++)
        if (strcmp(table[i]->name, name) == 0)
            return table[i];
    return NULL;
}

const nc_engine_info *nc_engine_info_of(const nc_engine *e)
{
    return e && e->ops ? nc_engine_find(e->ops->name) : NULL;
}

const nc_engine_option *nc_engine_option_find(const nc_engine_info *info, const char *key)
{
    for (int i = 0; info && i < info->n_options; i++)
        if (strcmp(info->options[i].key, key) == 0)
            return &info->options[i];
    return NULL;
}

/* Names of the engines compiled into this build (not the "gpu" entry of a
 * build without CUDA). */
const char *const *nc_engine_names(void)
{
    static const char *names[MAX_ENGINES + 1];
    int n = 0;
    for (int i = 0; i < n_engines; i++)
        if (table[i] != &gpu_not_built)
            names[n++] = table[i]->name;
    names[n] = NULL;
    return names;
}

static void list_names(char *buf, size_t size)
{
    const char *const *names = nc_engine_names();
    buf[0] = '\0';
    for (int i = 0; names[i]; i++)
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", i ? ", " : "", names[i]);
}

nc_status nc_engine_new_with(const char *name, const nc_engine_settings *settings, nc_engine **out, nc_error *err)
{
    *out = NULL;
    char names[128];
    list_names(names, sizeof names);
    if (!name)
        return nc_fail(err, NC_ERR_ARGUMENT, "no engine name given (engines in this build: %s)", names);
    const nc_engine_info *info = nc_engine_find(name);
    if (!info)
        return nc_fail(err, NC_ERR_ARGUMENT, "unknown engine '%s' (engines in this build: %s)", name, names);
    nc_engine_values values;
    nc_status st = nc_engine_resolve(info, settings, &values, err);
    return st == NC_OK ? info->create(&values, out, err) : st;
}

nc_status nc_engine_new(const char *name, nc_engine **out, nc_error *err)
{
    return nc_engine_new_with(name, NULL, out, err);
}

/* ---- options ------------------------------------------------------------------ */

nc_status nc_engine_settings_add(nc_engine_settings *s, const char *key_value, nc_error *err)
{
    const char *eq = key_value ? strchr(key_value, '=') : NULL;
    size_t klen = eq ? (size_t)(eq - key_value) : 0;
    if (!eq || klen == 0 || klen >= sizeof s->key[0] || strlen(eq + 1) >= sizeof s->value[0])
        return nc_fail(err, NC_ERR_ARGUMENT, "--engine-opt '%s': give KEY=VALUE (`neurocuda engines` lists the keys)",
                       key_value ? key_value : "");
    if (s->n == NC_ENGINE_MAX_SETTINGS)
        return nc_fail(err, NC_ERR_ARGUMENT, "at most %d --engine-opt settings", NC_ENGINE_MAX_SETTINGS);
    memcpy(s->key[s->n], key_value, klen);
    s->key[s->n][klen] = '\0';
    snprintf(s->value[s->n], sizeof s->value[0], "%s", eq + 1);
    s->n++;
    return NC_OK;
}

int nc_engine_option_choice(const nc_engine_option *o, const char *value)
{
    size_t n = strlen(value);
    int k = 0;
    for (const char *p = o->choices; p && *p; k++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, value, n) == 0)
            return k;
        p = bar ? bar + 1 : NULL;
    }
    return -1;
}

static nc_status check_value(const nc_engine_info *info, const nc_engine_option *o, const char *value,
                             const char *from, nc_error *err)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(value, &end, 10);
    int number = errno == 0 && end != value && *end == '\0';
    if (o->type == NC_ENGINE_OPTION_INT && (!number || v < o->min || v > o->max))
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: the %s engine's option %s wants an integer in %ld…%ld, not '%s'",
                       from, info->name, o->key, o->min, o->max, value);
    if (o->type == NC_ENGINE_OPTION_BOOL && (!number || (v != 0 && v != 1)))
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: the %s engine's option %s wants 0 or 1, not '%s'", from,
                       info->name, o->key, value);
    if (o->type == NC_ENGINE_OPTION_CHOICE && nc_engine_option_choice(o, value) < 0)
        return nc_fail(err, NC_ERR_ARGUMENT, "%s: the %s engine's option %s is one of %s, not '%s'", from,
                       info->name, o->key, o->choices, value);
    return NC_OK;
}

static nc_status unknown_key(const nc_engine_info *info, const char *key, nc_error *err)
{
    char keys[256] = "";
    for (int i = 0; i < info->n_options; i++)
        snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s%s", i ? ", " : "", info->options[i].key);
    return nc_fail(err, NC_ERR_ARGUMENT, "--engine-opt %s: the %s engine has no such option (its options: %s)", key,
                   info->name, keys[0] ? keys : "none");
}

nc_status nc_engine_resolve(const nc_engine_info *info, const nc_engine_settings *settings, nc_engine_values *out,
                            nc_error *err)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < info->n_options && i < NC_ENGINE_MAX_OPTIONS; i++) {
        const nc_engine_option *o = &info->options[i];
        const char *env = o->env ? getenv(o->env) : NULL; /* the documented override */
        snprintf(out->text[i], sizeof out->text[i], "%s", env && *env ? env : o->default_value);
    }
    for (int k = 0; settings && k < settings->n; k++) {
        int found = 0;
        for (int i = 0; i < info->n_options && !found; i++) {
            if (strcmp(info->options[i].key, settings->key[k]) != 0)
                continue;
            found = 1;
            nc_status st = check_value(info, &info->options[i], settings->value[k], "--engine-opt", err);
            if (st != NC_OK)
                return st;
            snprintf(out->text[i], sizeof out->text[i], "%s", settings->value[k]);
        }
        if (!found)
            return unknown_key(info, settings->key[k], err);
    }
    return NC_OK;
}
