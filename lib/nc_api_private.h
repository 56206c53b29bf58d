/* nc_api_private.h — what the files of libneurocuda share: the structs
 * behind the opaque handles of neurocuda.h and the error helpers. */
#ifndef NC_API_PRIVATE_H
#define NC_API_PRIVATE_H

#include "neurocuda.h"

#include "nc_dataset.h"
#include "nc_engine_registry.h"
#include "nc_project.h"
#include "nc_recipe.h"
#include "nc_runner.h"

struct neurocuda_options {
    char data[1024];              /* the dataset spec; "" = none                   */
    nc_preprocess pp;
    int64_t limit;                /* test images (0: all)                          */
    char engine[32];
    nc_engine_settings settings;  /* engine-opt KEY=VALUE                          */
    int threads;
    nc_pipeline_options pipeline;
    int val_images_set;
    int eval_T, sim_T;
    nc_encoding encoding;
    uint64_t seed;
    char output[1024];            /* convert: the project file; "" = none          */
    int target_T;                 /* the --target-T recipe (0: none)               */
    double time_budget;           /* its minutes (0: the recipe's default)          */
};

struct neurocuda_data {
    nc_dataset *ds;               /* a stream over the caller's functions         */
    neurocuda_next_fn next;
    neurocuda_rewind_fn rewind;
    void *user;
    char name[128];
};

struct neurocuda_model {
    nc_net *net;                  /* what forward passes and jobs run             */
    nc_project *project;          /* converted or loaded from .ncsnn; else NULL    */
    char path[1024];              /* where it came from ("" for a conversion)      */
    char engine_name[32];
    nc_engine *engine;            /* bound by compile or on first use; owned       */
};

struct neurocuda_results {
    int n_rows;
    nc_stage_row rows[NC_RUNNER_MAX_ROWS]; /* snn arrays owned                    */
    int n_layers;
    neurocuda_layer *layers;
};

/* A library error into the caller's error (err may be NULL); returns the status. */
int nc_api_error(neurocuda_error *out, const nc_error *err, nc_status st);
/* An error made here. */
int nc_api_fail(neurocuda_error *out, nc_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* snprintf onto the end of buf (*used bytes so far), counting what it wanted
 * (the report functions return the size a complete text needs). */
void nc_api_append(char *buf, size_t size, size_t *used, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The model's engine: the bound one, else a new cpu engine; loaded with its net. */
nc_status nc_api_model_engine(neurocuda_model *m, nc_error *err);

/* The runner's description of a job from options (pointers into o and m). */
nc_runner_desc nc_api_describe(const neurocuda_options *o, const neurocuda_model *m);

#endif
