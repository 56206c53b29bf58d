/* nc-teach-record.h — simulates ONE image with every spike kept, for the
 * teaching view: the first test image goes through the engine in SNN mode
 * (the same nc_engine_forward the simulation driver calls) with an observer
 * that keeps each IF layer's spikes at every step; the output of every step
 * gives the running evidence per class.  Layers too big to keep (more than
 * NC_TEACH_MAX_BYTES in all) are left out.  Runs on the job's worker. */
#pragma once

#include "../core/nc_dataset.h"
#include "../sim/nc_engine.h"
#include "nc-run-data.h"

G_BEGIN_DECLS

#define NC_TEACH_MAX_BYTES (64u << 20)

nc_status nc_teach_record(nc_engine *engine, const nc_net *net, const nc_dataset *ds, int T, nc_encoding encoding,
                          nc_progress_fn progress, void *progress_user, NcTeachData **out, nc_error *err);

/* The ten Fashion-MNIST class names, for datasets known to be Fashion-MNIST. */
extern const char *const nc_fashion_mnist_classes[10];

G_END_DECLS
