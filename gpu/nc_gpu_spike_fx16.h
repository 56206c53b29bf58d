// nc_gpu_spike_fx16.h — what the two fixed-point spike convolutions share:
// nc_gpu_spike_conv_fx16.cu (the currents out) and nc_gpu_spike_conv_if.cu
// (the IF neurons after the conv in its epilogue).  The weight rows in shared
// memory and one warp's exact int32 sums over the nine taps (C++, device code, gpu/ only).
//
// The arithmetic: each output channel o has a step s[o] = max|w[o, ·]| /
// 32767, and w ≈ s[o]·(256·a + b) with a in [-128, 127] and b in [0, 255]
// (nc_launch_fx16_parts).  The counts q (0..255) and both parts are exact
// 8-bit integers, so mma.sync m16n8k32 sums Σ q·a and Σ q·b exactly in int32,
// and the current s[o]·(256·Σqa + Σqb) has one rounding.
#ifndef NC_GPU_SPIKE_FX16_H
#define NC_GPU_SPIKE_FX16_H

#include "gpu/nc_gpu_mma.h"
#include "gpu/nc_gpu_spike_tiling.h"

#include <stdint.h>

namespace ncfx16 {

using namespace ncmma;
using namespace ncspike;

constexpr int kTilesPerWarp = 2; // 16-pixel tiles a warp computes at once (two int32 accumulators each)

// Bytes of one weight row in shared memory: 9·C int8 values and 16 bytes of
// padding (8 consecutive rows start in 8 different bank groups).
__host__ __device__ constexpr int weight_row_bytes(int C) { return 9 * C + 16; }

// Both weight parts of a block's 32 output channels.
__host__ __device__ constexpr size_t weight_bytes(int C) { return (size_t)2 * kBlockCout * weight_row_bytes(C); }

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

// acc[part][tile][n-tile][element]: a warp's two sums (Σ q·a, Σ q·b) of each
// of its tiles and 8-channel n-tiles, in the C fragment's layout.
using sums = int[2][kTilesPerWarp][4][4];

// One warp's sums of tiles t0, t0 + warps (those below `tiles`; npix pixels
// in the tile's images): 16 pixels × the block's 32 channels each, over the
// nine taps and C input channels (one 32-byte k step per 32 channels).
template <int C>
__device__ __forceinline__ void accumulate(const unsigned char *tile, const unsigned char *w_smem, const geom &g,
                                           int t0, int tiles, int npix, sums &acc)
{
    int centre[kTilesPerWarp];
    tile_centres(g, t0, npix, centre);
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
            unsigned b[2][4][2]; // [part][n-tile][reg]
            load_weight_fragments(w_base, weight_row_bytes(C), tap * C + kc * 32, b);
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
}

// The current of one output from its two sums: step·(256·Σqa + Σqb), one
// rounding (the combination in 64 bits: 256·Σqa may pass 2^31 for counts
// near 255).
__device__ __forceinline__ float current(int sum_a, int sum_b, float step)
{
    return __fmul_rn(__ll2float_rn((long long)sum_a * 256 + sum_b), step);
}

// This lane's 8 output channels of the block (n-tile n, element e: channel
// 8n + 2·(lane % 4) + (e & 1) of the block's 32).
__device__ __forceinline__ int lane_channel(int n, int e) { return n * 8 + 2 * (threadIdx.x & 3) + (e & 1); }

} // namespace ncfx16

#endif
