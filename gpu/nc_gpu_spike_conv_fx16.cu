// nc_gpu_spike_conv_fx16.cu — the 3×3 convolution of spike counts with the
// weight in 16-bit fixed point per output channel, on int8 tensor cores.
//
// The same 16-bit currents as nc_gpu_spike_conv.cu at half its tensor-core
// work: int8 products run at twice bf16's rate on sm_90, and the counts q
// (0..255, as IF spikes and their average pools are) and both weight parts
// are exact 8-bit integers.  Each output channel o has a step s[o] =
// max|w[o, ·]| / 32767, and w ≈ s[o]·(256·a + b) with a in [-128, 127] and b
// in [0, 255] (nc_launch_fx16_parts).  The sums Σ q·a and Σ q·b are exact in
// int32, so the current s[o]·(256·Σqa + Σqb) has one rounding, and the only
// error is the weight's fixed point (at most s[o]/2).
//
// Layout and walk as nc_gpu_spike_conv.cu (channels last, a persistent grid,
// blocks of 32 output channels over groups of whole images, one zero-bordered
// tile per image in shared memory), with the counts converted from bf16 to
// uint8 as the tile is filled, 32 input channels (one 32-byte k step of
// mma.sync m16n8k32) per tap and step.
#include "gpu/nc_gpu_internal.h"
#include "gpu/nc_gpu_mma.h"
#include "gpu/nc_gpu_spike_tiling.h"

#include <stdio.h>

namespace {

using namespace ncmma;
using namespace ncspike;

constexpr int kTilesPerWarp = 2;      // 16-pixel tiles a warp computes at once (two int32 accumulators each)

// Bytes of one weight row in shared memory: 9·C int8 values and 16 bytes of
// padding (8 consecutive rows start in 8 different bank groups).
__host__ __device__ constexpr int weight_row_bytes(int C) { return 9 * C + 16; }

// The 16-byte chunk `chunk` (16 channels) of tile pixel `pixel`.
template <int C> __device__ __forceinline__ int chunk_offset(int pixel, int chunk)
{
    return swizzled_chunk<C / 16>(pixel, chunk);
}

// acc += a·b: uint8 counts times int8 (Signed) or uint8 weight parts, exact int32 sums.
template <bool Signed>
__device__ __forceinline__ void mma_8bit(int (&acc)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    if (Signed)
        asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 "
            "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 "
            "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Images [first, first + n): bf16 counts from global memory, as uint8 into
// the tiles, 8 channels (16 bytes in, 8 out) per thread and turn, with
// kLoadsInFlight loads issued before the first is converted: each waits
// for global memory, so one at a time would leave the block idle for most
// of the copy.
constexpr int kLoadsInFlight = 4;

template <int C>
__device__ void load_images(unsigned char *tile, const nc_bf16 *x, const geom &g, int64_t first, int n)
{
    constexpr int eighths = C / 8;
    const nc_bf16 *src = x + first * g.pixels * C;
    const int total = n * g.pixels * eighths;
    for (int base = threadIdx.x; base < total; base += kLoadsInFlight * blockDim.x) {
        uint4 v[kLoadsInFlight];
#pragma unroll
        for (int u = 0; u < kLoadsInFlight; u++) {
            int i = base + u * blockDim.x;
            if (i < total)
                v[u] = *(const uint4 *)(src + (int64_t)i * 8); /* eighth i of pixel i / eighths */
        }
#pragma unroll
        for (int u = 0; u < kLoadsInFlight; u++) {
            int i = base + u * blockDim.x;
            if (i >= total)
                break;
            int pix = i / eighths, e = i % eighths;
            int halo = halo_pixel(g, pix);
            const nc_bf16 *h = (const nc_bf16 *)&v[u];
            unsigned lo = 0, hi = 0;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                lo |= (unsigned)__bfloat162uint_rn(h[k]) << (8 * k);
                hi |= (unsigned)__bfloat162uint_rn(h[k + 4]) << (8 * k);
            }
            *(uint2 *)(tile + chunk_offset<C>(halo, e >> 1) + (e & 1) * 8) = make_uint2(lo, hi);
        }
    }
}

// One warp's tiles t0 and t0 + warps (those below `tiles`): 16 pixels × 32
// channels each, y = step[o]·(256·Σ q·a + Σ q·b).
template <int C>
__device__ void warp_tiles(const unsigned char *tile, const unsigned char *w_smem, const geom &g, int t0,
                           int tiles, int npix, int64_t first_pixel, int first_channel, const float *step, float *y)
{
    const int lane = threadIdx.x & 31;
    int centre[kTilesPerWarp];
    tile_centres(g, t0, npix, centre);
    int acc[2][kTilesPerWarp][4][4]; // [part][tile][n-tile][element]
#pragma unroll
    for (int part = 0; part < 2; part++)
#pragma unroll
        for (int j = 0; j < kTilesPerWarp; j++)
#pragma unroll
            for (int n = 0; n < 4; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[part][j][n][e] = 0;
    const unsigned w_base = smem_address(w_smem), t_base = smem_address(tile);
#pragma unroll 3
    for (int tap = 0; tap < 9; tap++) {
        const int shift = (tap / 3 - 1) * g.halo_w + (tap % 3 - 1);
#pragma unroll
        for (int kc = 0; kc < C / 32; kc++) {
            const int k0 = tap * C + kc * 32; // in bytes
            unsigned b[2][4][2]; // [part][n-tile][reg]
            load_weight_fragments(w_base, weight_row_bytes(C), k0, b);
            unsigned a[kTilesPerWarp][4];
            load_count_fragments<C / 16>(g, t_base, centre, shift, kc * 2, t0, tiles, a);
#pragma unroll
            for (int j = 0; j < kTilesPerWarp; j++)
                if (t0 + j * g.warps < tiles)
#pragma unroll
                    for (int n = 0; n < 4; n++) {
                        mma_8bit<true>(acc[0][j][n], a[j], b[0][n][0], b[0][n][1]);
                        mma_8bit<false>(acc[1][j][n], a[j], b[1][n][0], b[1][n][1]);
                    }
        }
    }
    float s[4][2];
#pragma unroll
    for (int n = 0; n < 4; n++)
#pragma unroll
        for (int e = 0; e < 2; e++)
            s[n][e] = step[first_channel + n * 8 + 2 * (lane & 3) + e];
    store_tiles<kTilesPerWarp>(g, t0, tiles, npix, first_pixel, first_channel, y, [&](int j, int n, int e) {
        return __fmul_rn(__int2float_rn(acc[0][j][n][e] * 256 + acc[1][j][n][e]), s[n][e & 1]);
    });
}

template <int C>
__global__ void __launch_bounds__(kMaxWarps * 32, 2)
    spike_conv3x3_fx16_kernel(geom g, const nc_bf16 *x, const int8_t *a, const uint8_t *b, const float *step,
                              float *y)
{
    extern __shared__ __align__(16) unsigned char smem[];
    const int channel0 = block_slice(g) * kBlockCout;
    unsigned char *w_smem = smem, *tile = smem + 2 * kBlockCout * weight_row_bytes(C);
    load_weight_rows(w_smem, a, b, 9 * C, weight_row_bytes(C), channel0);
    walk_groups(
        g, tile, g.group * g.halo_pixels * C, kTilesPerWarp,
        [&](int64_t first, int n) { load_images<C>(tile, x, g, first, n); },
        [&](int t0, int tiles, int npix, int64_t first_pixel) {
            warp_tiles<C>(tile, w_smem, g, t0, tiles, npix, first_pixel, channel0, step, y);
        });
}

size_t smem_bytes(int C, int h, int w, int group)
{
    return (size_t)2 * kBlockCout * weight_row_bytes(C) + (size_t)group * (h + 2) * (w + 2) * C;
}

// How shape C × h × w runs (choose_tiling).
tiling plan_for(int C, int h, int w)
{
    return choose_tiling((size_t)(h + 2) * (w + 2) * C * 1, smem_bytes(C, h, w, 0), h * w, kTilesPerWarp);
}

template <int C>
cudaError_t launch_for(cudaStream_t s, const geom &g, const nc_bf16 *x, const int8_t *a, const uint8_t *b,
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
                                         const nc_bf16 *x, const int8_t *a, const uint8_t *b, const float *step,
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
