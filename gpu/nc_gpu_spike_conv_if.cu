// nc_gpu_spike_conv_if.cu — the fixed-point spike convolution of
// nc_gpu_spike_conv_fx16.cu with the IF neurons that read its current in its
// epilogue, and the 2×2 average pool after them where there is one.
//
// Why: a conv's fp32 current over T·N rows is the largest value of a pass
// (822 MB for a 28×28×32 layer at 8192 rows); written by the conv and read
// back by the IF it costs about as much as the conv's own work.  Here the
// current never leaves the registers: each block walks the T steps of one
// sample at a time, keeps the membranes of its 32 output channels over the
// whole image in shared memory, and writes only what the next layer reads:
// the spikes as uint8 counts (for the next fixed-point conv) or as θ / 0 in
// fp32, or their 2×2 averages (counts 0..4, or the pooled fp32 value).
//
// The values are those of the three kernels run one after the other, bit for
// bit: the current is nc_gpu_spike_conv_fx16.cu's, the conv's bias is added
// and the membrane updated as the IF kernel does (nc_gpu_kernels.cu), and a
// pooled fp32 value is summed as if_avgpool2_kernel sums it.
//
// Rows are time-major (row t·N + n), so one sample's steps are N rows apart.
// While a step is computed, the next step's counts are copied into the second
// of two tiles (cp.async), so the copy costs no time of its own.
#include "gpu/nc_gpu_internal.h"
#include "gpu/nc_gpu_spike_fx16.h"

#include <stdio.h>

namespace {

using namespace ncfx16;

constexpr size_t kMaxSmem = 227 << 10; // shared memory of one block, at most (sm_90)
// Warps per block, at most: a 28×28 image (49 tiles) in two passes of 13
// warps, the only block of its SM (its membranes take most of the shared
// memory); 7 warps for a 14×14 image.  14 warps of 144 registers were refused
// at launch on an H100 (cudaErrorLaunchOutOfResources, 2026-12-07), 13 ran.
// 128 registers a thread: each of an SM's four schedulers holds 16 384, so
// with 138 (a block of 7 warps: 4 608 a warp) it took only 3 warps, and a
// 14×14 conv ran one block of 7 warps per SM (ncu, H100, 2026-12-08:
// theoretical occupancy 10.9 %); with 128 two such blocks fit.  The pooled
// variants need no more; the others spill 16-40 bytes.
constexpr int kMaxFusedWarps = 13;
constexpr int kFusedRegisters = 128;

// What the epilogue needs besides the conv: the IF's parameters and where
// its spikes (or their pool) go.
struct epilogue {
    int T;
    int64_t N;
    const float *th; // θ per output channel (n_th == cout) or one for all
    int n_th;
    float v0f;       // initial membrane, as a fraction of θ
    int fire_ge;     // fire on m ≥ θ (else m > θ)
    int reset_sub;   // reset by subtracting θ (else to 0)
    const float *bias; // the conv's bias per output channel (may be NULL)
    void *out;       // uint8 counts or fp32 values, channels last
};

// Shared memory: the weights, two tiles, the membranes (one float per output
// of the block's tiles, in the accumulators' layout), and with a pool the
// step's spikes [pixels, 32] as bytes.
struct layout {
    size_t tile, membranes, spikes, total;
};

__host__ __device__ inline layout layout_for(int C, int h, int w, int pool)
{
    layout l;
    int tiles = (h * w + 15) / 16;
    l.tile = (size_t)(h + 2) * (w + 2) * C;
    l.membranes = (size_t)tiles * 16 * kBlockCout * sizeof(float);
    l.spikes = pool ? (size_t)h * w * kBlockCout : 0;
    l.total = weight_bytes(C) + 2 * l.tile + l.membranes + l.spikes;
    return l;
}

// The membrane of tile tt, n-tile n, element e of this lane.
__device__ __forceinline__ int membrane_index(int tt, int n, int e) { return ((tt * 4 + n) * 4 + e) * 32 + (threadIdx.x & 31); }

// One IF update: the membrane (v0 at step 0) plus the current and bias;
// returns whether it fires and leaves the new membrane in v.
__device__ __forceinline__ bool if_update(const epilogue &ep, float &v, float x, float b, float theta)
{
    float xb = ep.bias ? __fadd_rn(x, b) : x;
    float m = __fadd_rn(v, xb);
    bool fire = ep.fire_ge ? m >= theta : m > theta;
    v = fire ? (ep.reset_sub ? __fsub_rn(m, theta) : 0.0f) : m;
    return fire;
}

// The spike pair of outputs (p, c) and (p, c + 1) of row `row`: into the
// pool's spike bytes, or straight out as counts or θ values.
template <bool Pool, typename Out>
__device__ __forceinline__ void put_spikes(const geom &g, const epilogue &ep, uint8_t *spikes, int64_t row, int p,
                                           int channel0, int c, bool f0, bool f1, float th0, float th1)
{
    if (Pool) {
        *(uint16_t *)(spikes + p * kBlockCout + c) = (uint16_t)(f0 | (f1 << 8));
        return;
    }
    int64_t at = (row * g.pixels + p) * g.cout + channel0 + c;
    if (sizeof(Out) == 1)
        *(uint16_t *)((uint8_t *)ep.out + at) = (uint16_t)(f0 | (f1 << 8));
    else
        *(float2 *)((float *)ep.out + at) = make_float2(f0 ? th0 : 0.0f, f1 ? th1 : 0.0f);
}

// The IF over one warp's tiles of step t of row `row`: membranes in and out
// of shared memory, spikes out.
template <bool Pool, typename Out>
__device__ void fire_tiles(const geom &g, const epilogue &ep, const sums &acc, int t0, int tiles, int t, int64_t row,
                           int channel0, const float *step, float *membrane, uint8_t *spikes)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < kTilesPerWarp; j++) {
        int tt = t0 + j * g.warps;
        if (tt >= tiles)
            break;
#pragma unroll
        for (int n = 0; n < 4; n++) {
            int c = lane_channel(n, 0), o = channel0 + c;
            float s0 = step[o], s1 = step[o + 1];
            float th0 = ep.th[ep.n_th == g.cout ? o : 0], th1 = ep.th[ep.n_th == g.cout ? o + 1 : 0];
            float b0 = ep.bias ? ep.bias[o] : 0.0f, b1 = ep.bias ? ep.bias[o + 1] : 0.0f;
#pragma unroll
            for (int half = 0; half < 2; half++) {
                int p = tt * 16 + (lane >> 2) + 8 * half;
                if (p >= g.pixels)
                    continue;
                int m0 = membrane_index(tt, n, 2 * half), m1 = membrane_index(tt, n, 2 * half + 1);
                float v0 = t == 0 ? __fmul_rn(ep.v0f, th0) : membrane[m0];
                float v1 = t == 0 ? __fmul_rn(ep.v0f, th1) : membrane[m1];
                bool f0 = if_update(ep, v0, current(acc[0][j][n][2 * half], acc[1][j][n][2 * half], s0), b0, th0);
                bool f1 = if_update(ep, v1, current(acc[0][j][n][2 * half + 1], acc[1][j][n][2 * half + 1], s1), b1, th1);
                membrane[m0] = v0;
                membrane[m1] = v1;
                put_spikes<Pool, Out>(g, ep, spikes, row, p, channel0, c, f0, f1, th0, th1);
            }
        }
    }
}

// The step's 2×2 averages of the spikes in shared memory, for row `row`:
// counts 0..4 (uint8), or (0 + s00 + s01 + s10 + s11) / 4 with s = θ or 0
// in that order (fp32), as if_avgpool2_kernel sums them.
template <typename Out>
__device__ void write_pooled(const geom &g, const epilogue &ep, const uint8_t *spikes, int64_t row, int channel0)
{
    const int ow = g.W / 2, pooled = (g.H / 2) * ow;
    for (int i = threadIdx.x; i < pooled * kBlockCout; i += blockDim.x) {
        int c = i % kBlockCout, q = i / kBlockCout;
        const uint8_t *s = spikes + ((q / ow) * 2 * g.W + (q % ow) * 2) * kBlockCout + c;
        bool s00 = s[0], s01 = s[kBlockCout], s10 = s[g.W * kBlockCout], s11 = s[(g.W + 1) * kBlockCout];
        int64_t at = (row * pooled + q) * g.cout + channel0 + c;
        if (sizeof(Out) == 1) {
            ((uint8_t *)ep.out)[at] = (uint8_t)(s00 + s01 + s10 + s11);
        } else {
            float theta = ep.th[ep.n_th == g.cout ? channel0 + c : 0], sum = 0.0f;
            sum = __fadd_rn(sum, s00 ? theta : 0.0f);
            sum = __fadd_rn(sum, s01 ? theta : 0.0f);
            sum = __fadd_rn(sum, s10 ? theta : 0.0f);
            sum = __fadd_rn(sum, s11 ? theta : 0.0f);
            ((float *)ep.out)[at] = __fdiv_rn(sum, 4.0f);
        }
    }
}

// A persistent grid: block b owns output channels [32·(b % slices), +32) and
// the samples b / slices, + gridDim.x / slices, ...; per sample the T steps
// in order, each one image (g.group = 1, g.images = N).
template <int C, bool Pool, typename Out>
__global__ void __maxnreg__(kFusedRegisters)
    spike_conv3x3_fx16_if_kernel(geom g, epilogue ep, const uint8_t *x, const int8_t *a, const uint8_t *b,
                                 const float *step)
{
    extern __shared__ __align__(16) unsigned char smem[];
    const layout l = layout_for(C, g.H, g.W, Pool);
    const int channel0 = block_slice(g) * kBlockCout, tiles = (g.pixels + 15) / 16, warp = threadIdx.x >> 5;
    unsigned char *w_smem = smem, *tiles_smem = smem + weight_bytes(C); /* two tiles, l.tile bytes each */
    float *membrane = (float *)(tiles_smem + 2 * l.tile);
    uint8_t *spikes = (uint8_t *)membrane + l.membranes;
    for (int i = threadIdx.x; i < (int)(2 * l.tile / 16); i += blockDim.x)
        ((uint4 *)tiles_smem)[i] = make_uint4(0, 0, 0, 0); /* both borders stay zero */
    load_weight_rows(w_smem, a, b, 9 * C, weight_row_bytes(C), channel0);
    __syncthreads(); /* the zeros are written before any copy lands inside them */
    const int slices = g.cout / kBlockCout;
    const int64_t stride = gridDim.x / slices, first = blockIdx.x / slices;
    if (first < ep.N)
        copy_images<C>(tiles_smem, x, g, first, 1);
    commit_copies();
    int buf = 0;
    for (int64_t n = first; n < ep.N; n += stride)
        for (int t = 0; t < ep.T; t++, buf ^= 1) {
            wait_committed_copies();
            __syncthreads(); /* this step's tile is in; every warp is done with the other tile and the spikes */
            int64_t next_n = t + 1 < ep.T ? n : n + stride;
            if (next_n < ep.N)
                copy_images<C>(tiles_smem + (buf ^ 1) * l.tile, x, g, (t + 1 < ep.T ? t + 1 : 0) * ep.N + next_n, 1);
            commit_copies();
            const int64_t row = t * ep.N + n;
            for (int t0 = warp; t0 < tiles; t0 += g.warps * kTilesPerWarp) {
                sums acc;
                accumulate<C>(tiles_smem + buf * l.tile, w_smem, g, t0, tiles, g.pixels, acc);
                fire_tiles<Pool, Out>(g, ep, acc, t0, tiles, t, row, channel0, step, membrane, spikes);
            }
            if (Pool) {
                __syncthreads(); /* every spike of the step is in shared memory */
                write_pooled<Out>(g, ep, spikes, row, channel0);
            }
        }
    wait_committed_copies(); /* a block with no sample still copied its weights */
}

// Warps per block: the fewest passes over the image's tiles (each warp
// computes kTilesPerWarp at once), then the fewest idle tile slots.
int warps_for(int pixels)
{
    int tiles = (pixels + 15) / 16, best = kMaxFusedWarps, best_passes = 1 << 30, best_slots = 1 << 30;
    for (int warps = kMinWarps; warps <= kMaxFusedWarps; warps++) {
        int slots = warps * kTilesPerWarp, passes = (tiles + slots - 1) / slots;
        if (passes < best_passes || (passes == best_passes && passes * slots < best_slots)) {
            best = warps;
            best_passes = passes;
            best_slots = passes * slots;
        }
    }
    return best;
}

template <int C, bool Pool, typename Out>
cudaError_t launch_for(cudaStream_t s, const geom &g, const epilogue &ep, const uint8_t *x, const int8_t *a,
                       const uint8_t *b, const float *step)
{
    auto kernel = spike_conv3x3_fx16_if_kernel<C, Pool, Out>;
    size_t smem = layout_for(C, g.H, g.W, Pool).total;
    geom fitted = g;
    int per_sm = 0;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    // fewer warps where a block of these would not fit one SM (any number of warps computes every tile)
    while (e == cudaSuccess && fitted.warps > kMinWarps &&
           (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, fitted.warps * 32, smem)) == cudaSuccess &&
           per_sm < 1)
        fitted.warps--;
    int64_t grid = 0;
    if (e == cudaSuccess)
        e = persistent_grid(kernel, fitted, smem, &grid);
    if (e != cudaSuccess)
        return e;
    kernel<<<(unsigned)grid, fitted.warps * 32, smem, s>>>(fitted, ep, x, a, b, step);
    return cudaGetLastError();
}

template <int C>
cudaError_t launch_c(cudaStream_t s, const geom &g, const epilogue &ep, int pool, int counts, const uint8_t *x,
                     const int8_t *a, const uint8_t *b, const float *step)
{
    if (pool)
        return counts ? launch_for<C, true, uint8_t>(s, g, ep, x, a, b, step)
                      : launch_for<C, true, float>(s, g, ep, x, a, b, step);
    return counts ? launch_for<C, false, uint8_t>(s, g, ep, x, a, b, step)
                  : launch_for<C, false, float>(s, g, ep, x, a, b, step);
}

} // namespace

int nc_spike_conv_if_fits(const nc_gwin *w, int cout, int pool)
{
    return nc_spike_conv_fx16_fits(w, cout, 1) && (!pool || (w->h >= 2 && w->w >= 2)) &&
           layout_for(w->c, w->h, w->w, pool).total <= kMaxSmem;
}

void nc_spike_conv_if_describe(const nc_gwin *w, int cout, int pool, char *out, size_t size)
{
    snprintf(out, size,
             "own kernel: 3×3 spike conv, uint8 counts × weight in 16-bit fixed point per channel (two int8 parts), "
             "exact int32 sums (mma.sync m16n8k32), with the IF%s in its epilogue: the T steps of one sample per "
             "block, membranes in shared memory, %d channels and %d warps per block, %zu bytes of shared memory",
             pool ? " and the 2×2 average pool" : "", cout < kBlockCout ? cout : kBlockCout, warps_for(w->h * w->w),
             layout_for(w->c, w->h, w->w, pool).total);
}

cudaError_t nc_launch_spike_conv3x3_fx16_if(cudaStream_t s, const nc_gwin *w, int cout, const nc_conv_if *p,
                                            const uint8_t *x, const int8_t *a, const uint8_t *b, const float *step)
{
    if (!nc_spike_conv_if_fits(w, cout, p->pool) || p->T < 1 || !p->th || p->n_th < 1 || !p->out)
        return cudaErrorInvalidValue;
    if (p->N <= 0)
        return cudaSuccess;
    geom g = geom_for(p->N, w->h, w->w, cout, tiling{1, warps_for(w->h * w->w)});
    epilogue ep = {p->T, p->N, p->th, p->n_th, p->v0f, !p->fire_gt, !p->reset_zero, p->bias, p->out};
    return w->c == 32 ? launch_c<32>(s, g, ep, p->pool, p->counts, x, a, b, step)
                      : launch_c<64>(s, g, ep, p->pool, p->counts, x, a, b, step);
}
