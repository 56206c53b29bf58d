/* nc_engine_registry.h — the table of engines: what each is, what it can do,
 * its options, and whether it can run on this machine.
 *
 * sim/ lists its own engines (cpu, loihi) and a "gpu" entry that says why
 * the engine is absent from a build without CUDA; the CUDA engine registers
 * itself from gpu/ when it is linked in (gpu/nc_gpu_register.c, at program
 * start), replacing that entry.  The registry never calls into an engine's own code except
 * through the functions of its entry, so engines depend on sim/, never the
 * other way round.
 *
 * Options are typed (int, bool, choice, text) with a default and a help
 * line; a user sets them as KEY=VALUE (`--engine-opt`).  An option may name
 * an environment variable that overrides its default (documented in
 * `neurocuda engines`); a value set as KEY=VALUE wins over it. */
#ifndef NC_ENGINE_REGISTRY_H
#define NC_ENGINE_REGISTRY_H

#include "nc_engine.h"
#include "nc_train_backend.h"

struct nc_allreduce;

typedef enum nc_engine_option_type {
    NC_ENGINE_OPTION_INT,
    NC_ENGINE_OPTION_BOOL,   /* 0 | 1 */
    NC_ENGINE_OPTION_CHOICE, /* one of `choices` ("a|b|c") */
    NC_ENGINE_OPTION_TEXT
} nc_engine_option_type;

typedef struct nc_engine_option {
    const char *key;
    nc_engine_option_type type;
    const char *default_value;
    const char *choices;      /* CHOICE: "a|b|c"                        */
    long min, max;            /* INT: the range                         */
    const char *help;
    const char *env;          /* environment override, or NULL          */
} nc_engine_option;

#define NC_ENGINE_MAX_OPTIONS 12
#define NC_ENGINE_OPTION_VALUE_MAX 128

/* One engine's option values, in the order of its options. */
typedef struct nc_engine_values {
    char text[NC_ENGINE_MAX_OPTIONS][NC_ENGINE_OPTION_VALUE_MAX];
} nc_engine_values;

typedef struct nc_engine_info {
    const char *name;
    const char *description;  /* one line                               */
    unsigned caps;            /* NC_CAP_* that hold for this engine     */
    int n_options;
    const nc_engine_option *options;
    /* 1 when it can run here; else 0 and the reason in why */
    int (*available)(char *why, size_t size);
    /* a line about the hardware (device, memory), may be NULL */
    void (*details)(char *buf, size_t size);
    /* creates the engine with the resolved option values */
    nc_status (*create)(const nc_engine_values *values, nc_engine **out, nc_error *err);
    /* the fine-tuning arithmetic on this engine's hardware; NULL: the CPU's */
    nc_status (*train_backend_new)(nc_train_backend **out, nc_error *err);
    /* bytes fine-tuning may use by default; NULL: the host memory rule */
    double (*train_memory)(void);
    /* Device engines (NULL elsewhere): times `repeats` forward passes after
     * `warmup` on the device (input uploaded once, no observer) ... */
    nc_status (*time_forward)(nc_engine *e, const nc_tensor *input, const nc_run_options *opts, int warmup,
                              int repeats, double *times_ms, double *median_ms, nc_error *err);
    /* ... the arithmetic in use ("fp32", "bf16", ...) ... */
    const char *(*precision)(const nc_engine *e);
    /* ... the device's measured GEMM peak in it, TFLOP/s ... */
    nc_status (*measure_peak)(const nc_engine *e, double *tflops, nc_error *err);
    /* ... and which kernels ran the loaded net's layers (lines of text) */
    void (*describe_kernels)(const nc_engine *e, char *buf, size_t size);
    /* Engines with several devices (NULL elsewhere; sim/nc_ranks.h): the
     * devices this machine has that the engine can use ... */
    int (*device_count)(void);
    /* ... makes the calling thread use device `rank`, before it creates an
     * engine or a trainer backend there ... */
    nc_status (*bind_device)(int rank, nc_error *err);
    /* ... and the gradient sums between them (sim/nc_allreduce.h); NULL when
     * the build has none (several GPUs need NCCL) */
    nc_status (*allreduce_new)(int ranks, struct nc_allreduce **out, nc_error *err);
} nc_engine_info;

/* Adds an engine, or replaces the entry of the same name (at most 8). */
void nc_engine_register(const nc_engine_info *info);
int nc_engine_count(void);
const nc_engine_info *nc_engine_at(int i);
const nc_engine_info *nc_engine_find(const char *name); /* NULL if unknown */
const nc_engine_info *nc_engine_info_of(const nc_engine *e); /* e's entry, or NULL */
/* The option `key` of info, or NULL. */
const nc_engine_option *nc_engine_option_find(const nc_engine_info *info, const char *key);
/* The position of `value` in a CHOICE option's "a|b|c" (0 for "a"), or −1. */
int nc_engine_option_choice(const nc_engine_option *o, const char *value);

/* KEY=VALUE settings given by the user, for any engine. */
#define NC_ENGINE_MAX_SETTINGS 16
typedef struct nc_engine_settings {
    int n;
    char key[NC_ENGINE_MAX_SETTINGS][32];
    char value[NC_ENGINE_MAX_SETTINGS][NC_ENGINE_OPTION_VALUE_MAX];
} nc_engine_settings;

/* Adds "KEY=VALUE"; NC_ERR_ARGUMENT when it is not of that form. */
nc_status nc_engine_settings_add(nc_engine_settings *s, const char *key_value, nc_error *err);

/* The values of `info`'s options: the setting, else the environment
 * override, else the default.  NC_ERR_ARGUMENT for a value of the wrong type
 * or a key that no option of this engine has (naming the engine's keys). */
nc_status nc_engine_resolve(const nc_engine_info *info, const nc_engine_settings *settings, nc_engine_values *out,
                            nc_error *err);

/* nc_engine_new with settings (may be NULL). */
nc_status nc_engine_new_with(const char *name, const nc_engine_settings *settings, nc_engine **out, nc_error *err);

#endif
