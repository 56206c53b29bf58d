/* nc_train_dp.h — data-parallel fine-tuning: one trainer per rank (device),
 * each taking a shard of every batch, their gradients summed across the
 * ranks during the backward pass (sim/nc_allreduce.h), the same optimiser
 * step applied on every rank.
 *
 * The result is that of one trainer with the whole batch, within float
 * rounding: rank r takes the contiguous images nc_rank_shard(n, R, r) of a
 * batch of n, its loss gradient is scaled by its share n_r / n, and the sum
 * of the ranks' gradients is the gradient of the batch's mean loss.  Since
 * every rank starts from the same parameters and applies the same step to
 * the same summed gradients, the parameters, thresholds and optimiser
 * moments stay identical on every rank without ever being sent; rank 0's
 * trainer (bound to the caller's net) is the one that reads and writes the
 * net.  Distillation works per rank (each has its own teacher).
 *
 * The ranks are threads of this process (sim/nc_ranks.h); the trainer's
 * backend follows o->engine on each rank's device. */
#ifndef NC_TRAIN_DP_H
#define NC_TRAIN_DP_H

#include "nc_train.h"

typedef struct nc_train_group nc_train_group;

/* `ranks` trainers for batches of up to max_batch images (each rank's
 * trainer is made for its shard: ⌈max_batch / ranks⌉); rank 0 trains `net`,
 * the others clones of it.  o->ranks is ignored.  bucket_floats: see
 * nc_trainer_set_reducer (0: the default). */
nc_status nc_train_group_new(nc_net *net, const nc_train_options *o, int ranks, int max_batch,
                             int64_t bucket_floats, nc_train_group **out, nc_error *err);
void nc_train_group_free(nc_train_group *g); /* NULL is a no-op */
int nc_train_group_ranks(const nc_train_group *g);
nc_trainer *nc_train_group_trainer(nc_train_group *g, int rank);

/* One optimiser step on a batch of n images (host memory): every rank's
 * forward and backward pass on its shard, the gradient sums, then the step
 * at learning rate lr on every rank.  *loss = the batch's mean loss,
 * *correct = images predicted right (either may be NULL). */
nc_status nc_train_group_step(nc_train_group *g, const float *images, const int32_t *labels, int n, double lr,
                              double *loss, int64_t *correct, nc_error *err);

/* The largest difference between rank 0's parameters and any other rank's
 * (0 when they are identical, as they must be). */
double nc_train_group_divergence(nc_train_group *g);

#endif
