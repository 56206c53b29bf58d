// nc_gpu_spike_conv_fx16.cu — the 3×3 convolution of spike counts with the
// weight in 16-bit fixed point per output channel, on int8 tensor cores,
// writing the fp32 currents.
//
// The same 16-bit currents as nc_gpu_spike_conv.cu at half its tensor-core
// work: int8 products run at twice bf16's rate on sm_90, and the counts q
// (0..255, as IF spikes and their average pools are) and both weight parts
// are exact 8-bit integers (the arithmetic: nc_gpu_spike_fx16.h).  The only
// error is the weight's fixed point (at most s[o]/2).
//
// Layout and walk as nc_gpu_spike_conv.cu (channels last, a persistent grid,
// blocks of 32 output channels over groups of whole images, one zero-bordered
// tile per image in shared memory), with uint8 counts (as the IF before
// writes them for this conv, or as nc_launch_to_counts8 converts them),
// copied into the tile as they are, 32 input channels (one 32-byte k step of
// mma.sync m16n8k32) per tap and step.  nc_gpu_spike_conv_if.cu is the same
// conv with the IF neurons after it in its epilogue.
#include "gpu/nc_gpu_internal.h"
#include "gpu/nc_gpu_spike_fx16.h"

#include <stdio.h>

namespace {

using namespace ncfx16;

// One warp's tiles t0 and t0 + warps (those below `tiles`): 16 pixels × 32
// channels each, y = step[o]·(256·Σ q·a + Σ q·b).
template <int C>
__device__ void warp_tiles(const unsigned char *tile, const unsigned char *w_smem, const geom &g, int t0,
                           int tiles, int npix, int64_t first_pixel, int first_channel, const float *step, float *y)
{
    sums acc;
    accumulate<C>(tile, w_smem, g, t0, tiles, npix, acc);
    float s[4][2];
#pragma unroll
    for (int n = 0; n < 4; n++)
#pragma unroll
        for (int e = 0; e < 2; e++)
            s[n][e] = step[first_channel + lane_channel(n, e)];
    store_tiles<kTilesPerWarp>(g, t0, tiles, npix, first_pixel, first_channel, y, [&](int j, int n, int e) {
        return current(acc[0][j][n][e], acc[1][j][n][e], s[n][e & 1]);
    });
}

template <int C>
__global__ void __launch_bounds__(kMaxWarps * 32, 2)
    spike_conv3x3_fx16_kernel(geom g, const uint8_t *x, const int8_t *a, const uint8_t *b, const float *step,
                              float *y)
{
    extern __shared__ __align__(16) unsigned char smem[];
    const int channel0 = block_slice(g) * kBlockCout;
    unsigned char *w_smem = smem, *tile = smem + weight_bytes(C);
    load_weight_rows(w_smem, a, b, 9 * C, weight_row_bytes(C), channel0);
    walk_groups(
        g, tile, g.group * g.halo_pixels * C, kTilesPerWarp,
        [&](int64_t first, int n) { copy_images<C>(tile, x, g, first, n); },
        [&](int t0, int tiles, int npix, int64_t first_pixel) {
            warp_tiles<C>(tile, w_smem, g, t0, tiles, npix, first_pixel, channel0, step, y);
        });
}

size_t smem_bytes(int C, int h, int w, int group)
{
    return weight_bytes(C) + (size_t)group * (h + 2) * (w + 2) * C;
}

// How shape C × h × w runs (choose_tiling).
tiling plan_for(int C, int h, int w)
{
    return choose_tiling((size_t)(h + 2) * (w + 2) * C * 1, smem_bytes(C, h, w, 0), h * w, kTilesPerWarp);
}

template <int C>
cudaError_t launch_for(cudaStream_t s, const geom &g, const uint8_t *x, const int8_t *a, const uint8_t *b,
                       const float *step, float *y)
{
    size_t smem = smem_bytes(C, g.H, g.W, g.group);
    int64_t grid = 0;
    cudaError_t e = persistent_grid(spike_conv3x3_fx16_kernel<C>, g, smem, &grid);
    if (e != cudaSuccess)
        return e;
    spike_conv3x3_fx16_kernel<C><<<(unsigned)grid, g.warps * 32, smem, s>>>(g, x, a, b, step, y);
    return cudaGetLastError();
}

// One block per output row: its largest |w·mul|, the step, then both parts.
__global__ void fx16_parts_kernel(int64_t k, const float *w, const float *mul, int c, int8_t *a, uint8_t *b,
                                  float *step)
{
    __shared__ float most[256];
    const float *row = w + blockIdx.x * k;
    float m = 0.0f;
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x)
        m = fmaxf(m, fabsf(mul ? __fmul_rn(row[j], mul[j % c]) : row[j]));
    most[threadIdx.x] = m;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            most[threadIdx.x] = fmaxf(most[threadIdx.x], most[threadIdx.x + half]);
        __syncthreads();
    }
    float s = most[0] > 0.0f ? __fdiv_rn(most[0], 32767.0f) : 1.0f;
    if (threadIdx.x == 0)
        step[blockIdx.x] = s;
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
        float v = mul ? __fmul_rn(row[j], mul[j % c]) : row[j];
        int q = (int)rintf(__fdiv_rn(v, s));
        q = q > 32767 ? 32767 : q < -32767 ? -32767 : q;
        a[blockIdx.x * k + j] = (int8_t)(q >> 8); /* arithmetic shift: floor(q / 256) */
        b[blockIdx.x * k + j] = (uint8_t)(q & 255);
    }
}

} // namespace

int nc_spike_conv_fx16_fits(const nc_gwin *w, int cout, int groups)
{
    return (w->c == 32 || w->c == 64) && nc_spike_conv_fits(w, cout, groups, nullptr, 0) &&
           smem_bytes(w->c, w->h, w->w, 1) <= kBlockSmem;
}

void nc_spike_conv_fx16_describe(const nc_gwin *w, int cout, char *out, size_t size)
{
    tiling p = plan_for(w->c, w->h, w->w);
    snprintf(out, size,
             "own kernel: 3×3 spike conv, uint8 counts × weight in 16-bit fixed point per channel (two int8 parts), "
             "exact int32 sums, fp32 output (mma.sync m16n8k32), %d image%s, %d channels and %d warps per block, "
             "%zu bytes of shared memory",
             p.group, p.group > 1 ? "s" : "", cout < kBlockCout ? cout : kBlockCout, p.warps,
             smem_bytes(w->c, w->h, w->w, p.group));
}

cudaError_t nc_launch_fx16_parts(cudaStream_t s, int rows, int64_t k, const float *w, const float *mul, int c,
                                 int8_t *a, uint8_t *b, float *step)
{
    if (rows <= 0)
        return cudaSuccess;
    fx16_parts_kernel<<<rows, 256, 0, s>>>(k, w, mul, c, a, b, step);
    return cudaGetLastError();
}

cudaError_t nc_launch_spike_conv3x3_fx16(cudaStream_t s, int64_t images, const nc_gwin *w, int cout,
                                         const uint8_t *x, const int8_t *a, const uint8_t *b, const float *step,
                                         float *y)
{
    if (!nc_spike_conv_fx16_fits(w, cout, 1))
        return cudaErrorInvalidValue;
    if (images <= 0)
        return cudaSuccess;
    tiling p = plan_for(w->c, w->h, w->w);
    geom g = geom_for(images, w->h, w->w, cout, p);
    return w->c == 32 ? launch_for<32>(s, g, x, a, b, step, y) : launch_for<64>(s, g, x, a, b, step, y);
}
