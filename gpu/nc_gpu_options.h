/* nc_gpu_options.h — the CUDA engine's option table and the values chosen
 * through the engine table (nc_gpu_options.c); nc_gpu_options_get in
 * nc_gpu.h reads them. */
#ifndef NC_GPU_OPTIONS_H
#define NC_GPU_OPTIONS_H

#include "../sim/nc_engine_registry.h"

/* The number of options (nc_gpu_options's fields). */
enum { NC_GPU_N_OPTIONS = 9 };
extern const nc_engine_option nc_gpu_option_table[NC_GPU_N_OPTIONS];

/* The values given to an engine created through the table: those that
 * differ from the environment or the default win over it from now on. */
void nc_gpu_options_choose(const nc_engine_values *values);

#endif
