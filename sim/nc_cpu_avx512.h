/* nc_cpu_avx512.h — the 16-wide kernels of the AVX-512 build of the CPU
 * kernels (sim/nc_cpu_avx512.c).  Only the AVX-512 build of nc_cpu_ops.c
 * calls them (compiled with -mavx512f/bw/dq/vl, chosen at run time by
 * sim/nc_cpu_dispatch.c on a CPU that has those); the other builds keep their
 * own 8-wide or plain loops.  The data layouts are the ones nc_cpu_ops.c
 * describes at the functions of the same job (event_lists, ev_gather,
 * fast_dense). */
#ifndef NC_CPU_AVX512_H
#define NC_CPU_AVX512_H

#include "nc_window.h"

#include <stddef.h>
#include <stdint.h>

/* Values the event lists must have room for past their last event: the
 * AVX-512 list builder stores 16 at a time. */
#define NC_AVX512_LIST_SLACK 16

/* The events of input positions [q0, q1) of one sample appended to the lists
 * (see event_lists in nc_cpu_ops.c): 16 channels per step, left-packed with
 * vcompressps.  Returns the new count of events. */
int nc_avx512_event_lists(int64_t q0, int64_t q1, int w, int cin, int cout, int64_t tap_ld, const float *xt,
                          int *start, int64_t *off, float *val, int ne);

/* y[q·ldy + (0, n)] = init + the gathered events of output positions q < nq
 * (see ev_gather in nc_cpu_ops.c), n outputs of any count: up to
 * NC_AVX512_EV_BLOCK at a time in registers of 16, the last one masked. */
#define NC_AVX512_EV_BLOCK 128
void nc_avx512_ev_gather(float *y, int64_t ldy, int64_t nq, int n, const float *init, const float *wt,
                         const int *ns, int64_t lds, const int *lo, const int *hi, const int64_t *soff,
                         const int *start, const int64_t *off, const float *val);

/* The event-driven conv by scatter, for a 3×3 kernel of stride 1, no
 * dilation, padding under 3, Cout ≤ 32, and a buffer of one sample's
 * currents of at most NC_AVX512_SCATTER_MAX_FLOATS (128 KiB: in L2; the
 * VGG's 28×28 layer of 32 channels, 115 KiB, still ran 23 % faster than by
 * gather, the CNN's 14×14 one, 32 KiB, fits in L1): each
 * input position sums the taps of its events in registers and adds them
 * into the outputs they reach, in a channel-last buffer with a margin (no
 * bounds tests).  In: the lists of one sample as event_lists in
 * nc_cpu_ops.c builds them (position-major, off[e] = ix·Cin·Cout + ci·Cout).
 * Out: y [OH·OW][Cout] channel-last, y = bias + the events' sums, or with
 * add, y += that (in this order: the running sums of a fused max pool get
 * what the unfused conv's currents would add).  wt as
 * nc_conv2d_events_weight makes it; work: nc_avx512_scatter_work_floats(). */
#define NC_AVX512_SCATTER_MAX_FLOATS (32 * 1024)
int nc_avx512_scatter_fits(const nc_window *g, int cout);
size_t nc_avx512_scatter_work_floats(const nc_window *g, int cout);
void nc_avx512_conv_scatter(const nc_window *g, int cout, const int *start, const int64_t *off, const float *val,
                            const float *wt, const float *bias, float *y, int add, float *work);

/* The first-layer conv of few input channels (conv_thin in nc_cpu_ops.c)
 * for one sample, from its zero-padded copy xp ([Cin][hp][wp], wp a multiple
 * of 32 plus KW − 1): two output rows of 32 outputs at a time, four FMA
 * chains of 16, out [Cout][OH·OW]. */
void nc_avx512_conv_thin_sample(const nc_window *g, int cout, const float *xp, int64_t hp, int64_t wp,
                                const float *weight, const float *bias, float *out);

/* out[r·fout + o] = bias[o] + Σ_i in[r·fin + i]·weight[o·fin + i] for every
 * row r < rows and output o in [o0, o1) (bias may be NULL): the dense layer,
 * 4 rows × 4 outputs per block of dot products 16 inputs wide. */
void nc_avx512_dense(int64_t rows, int fin, int fout, int o0, int o1, const float *in, const float *weight,
                     const float *bias, float *out);

#endif
