/* nc_bias_calib.h — training-free calibration after conversion: per-channel
 * bias corrections chosen for the T the SNN will run at.
 *
 * The expected-error correction of the ANN-to-SNN calibration literature
 * (Li et al. 2021, "A free lunch from ANN: towards efficient, accurate spiking
 * neural networks calibration", bias calibration): at small T an IF layer's
 * mean output rate φ = θ·spikes/T is off from the ANN activation a by a
 * systematic amount per channel (quantisation floor, clipping, uneven
 * arrival).  For each IF layer in network order, with the layers before it
 * already corrected, over the first `images` images:
 *
 *     Δ_c = mean(a_c) − mean(φ_c)          (means over samples and positions)
 *
 * and Δ_c is added to the bias of the layer that feeds the neuron (its
 * "carrier"): a conv, dense or affine node whose only consumer is the path to
 * this neuron — directly, through an add (one summand of a residual sum), or
 * through a MaxPool or an unpadded AvgPool (both commute with a per-channel
 * shift).  A constant added to the input current shifts the rate
 * by about the same constant in the linear range, so the layer's mean error
 * goes towards 0.  a is the converted net's ANN reading (IF as ReLU) before any
 * correction: the correction makes the SNN follow the ANN it came from.
 * A layer with no carrier (e.g. fed by a shared conv or a padded AvgPool) is left as
 * it is and named in the notes.
 *
 * The corrected biases are the net's own: nothing new is needed to run or
 * save it.  The result lists Δ per layer (the project file keeps them as the
 * per-layer statistic "bias_correction") and each layer's mean error
 * mean(φ − a) before and after.  With check images (held out, labelled),
 * the SNN accuracy at T is measured before and after; when the corrections
 * make it worse they are undone (kept = 0), so the stage never ends below
 * where it started on images it was not chosen on. */
#ifndef NC_BIAS_CALIB_H
#define NC_BIAS_CALIB_H

#include "../core/nc_dataset.h"
#include "nc_engine.h"

#define NC_BIAS_CALIB_DEFAULT_IMAGES 512

typedef struct nc_bias_calib_options {
    int T;                    /* the steps the corrections are chosen for (≥ 1)    */
    int64_t images;           /* the first images of `calib`; 0: default above     */
    int batch_size;           /* 0: 100                                            */
    /* held-out check (optional): images [check_first, check_first + check_count)
     * of `calib`; check_count 0: corrections always kept */
    int64_t check_first, check_count;
    nc_progress_fn progress;  /* stage "calibrate-bias"; non-zero cancels          */
    void *progress_user;
} nc_bias_calib_options;

typedef struct nc_bias_layer {
    int node;                 /* the IF neuron                                     */
    int carrier;              /* the node whose bias was shifted; −1: none         */
    int channels;
    float *delta;             /* [channels] added to the carrier's bias (owned)    */
    double error_before;      /* mean(φ − a) over the layer, before any correction */
    double error_after;       /* the same after all corrections                    */
} nc_bias_layer;

typedef struct nc_bias_calib_result {
    int n_layers;
    nc_bias_layer *layers;    /* owned, in network order                          */
    int T;
    int64_t images;
    double check_before, check_after; /* SNN accuracy at T on the check images (−1: none) */
    int kept;                 /* 1: the net holds the corrections; 0: undone       */
    char notes[1024];         /* layers without a carrier, an undo                 */
} nc_bias_calib_result;

void nc_bias_calib_result_clear(nc_bias_calib_result *r);

/* Corrects the biases of the converted SNN `net` in place (see above).  The
 * engine is loaded with `net` and left so.  On failure or cancel the net
 * holds the biases it had before. */
nc_status nc_bias_calibrate(nc_engine *engine, nc_net *net, const nc_dataset *calib,
                            const nc_bias_calib_options *o, nc_bias_calib_result *result, nc_error *err);

/* The work nc_bias_calibrate does with options `o` on the converted `net`
 * and a calibration set of `count` images, in image-steps (one image through
 * the net for one step): *observed, the passes that read every IF layer
 * (one ANN pass, then an SNN pass over T steps before the first correction
 * and after each); *plain, the check before and after.  For a time plan
 * (sim/nc_budget.h). */
void nc_bias_calib_work(const nc_net *net, const nc_bias_calib_options *o, int64_t count, double *observed,
                        double *plain);

/* Seconds per image-step of an observed SNN pass over T steps on one batch
 * of the first images of `calib` (the kind of pass nc_bias_calibrate does
 * most), timed after one untimed pass of the same batch: a cheap
 * measurement for a time plan.  Loads `net` when the engine holds another;
 * changes nothing in it. */
nc_status nc_bias_calib_pass_rate(nc_engine *engine, nc_net *net, const nc_dataset *calib,
                                  const nc_bias_calib_options *o, double *seconds_per_image_step, nc_error *err);

/* The carrier of IF node `node` (see above), or −1. */
int nc_bias_carrier(const nc_net *net, int node);

#endif
