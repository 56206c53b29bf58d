/* nc_if_params.h — the parameters of the IF recurrence (see nc_if_run in
 * nc_cpu_ops.h): shared by the CPU kernels, the trainer's backends and the
 * GPU trainer, which include this rather than the CPU kernels' header. */
#ifndef NC_IF_PARAMS_H
#define NC_IF_PARAMS_H

#include "../core/nc_net.h"

typedef struct nc_if_params {
    const float *threshold;
    int n_threshold;
    float v0_fraction;
    nc_reset reset;
    nc_compare compare;
} nc_if_params;

#endif
