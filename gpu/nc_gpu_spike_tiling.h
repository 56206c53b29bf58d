// nc_gpu_spike_tiling.h — how the own spike convolutions (nc_gpu_spike_conv.cu,
// nc_gpu_spike_conv_fx16.cu) cut a pass into blocks: the geometry both
// kernels read, the choice of images per group and warps per block, and the
// persistent grid (C++, gpu/ only).
#ifndef NC_GPU_SPIKE_TILING_H
#define NC_GPU_SPIKE_TILING_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/nc_gpu_mma.h"

namespace ncspike {

constexpr int kMinWarps = 4;           // warps per block, at least and at most
constexpr int kMaxWarps = 8;
constexpr int kBlockCout = 32;         // output channels per block
constexpr size_t kTileBudget = 64 << 10; // bytes of image tiles per group, at most
constexpr size_t kBlockSmem = (227 << 10) / 2 - 1024; // shared memory of one of two blocks per SM

// One launch, as every block sees it.
struct geom {
    int H, W;        // image size (input and output)
    int halo_w;      // W + 2
    int halo_pixels; // (H + 2)·(W + 2): one image's tile
    int pixels;      // H·W
    int group;       // images per group
    int warps;       // warps per block
    int cout;
    int64_t images;
};

struct tiling {
    int group, warps;
};

// The images per group and warps per block that leave the fewest 16-pixel
// tile slots idle (a warp computes up to tiles_per_warp tiles at once, and
// one with fewer loads the weights' fragments for fewer products), in groups
// that kTileBudget and two blocks per SM allow; on a tie the larger group,
// then more warps.  image and weights: their bytes in shared memory.
inline tiling choose_tiling(size_t image, size_t weights, int pixels, int tiles_per_warp)
{
    size_t room = kBlockSmem > weights ? kBlockSmem - weights : 0;
    size_t budget = room < kTileBudget ? room : kTileBudget;
    int most = (int)(budget / image) > 0 ? (int)(budget / image) : 1;
    tiling best = {1, kMaxWarps};
    double best_use = -1;
    for (int group = 1; group <= most; group++) {
        int tiles = (group * pixels + 15) / 16;
        for (int warps = kMinWarps; warps <= kMaxWarps; warps++) {
            int slots = warps * tiles_per_warp, passes = (tiles + slots - 1) / slots;
            double use = (double)tiles / ((double)passes * slots);
            if (use >= best_use - 1e-9) {
                best_use = use;
                best = {group, warps};
            }
        }
    }
    return best;
}

// The blocks of a persistent launch of `kernel` with smem bytes each: as many
// as the SMs hold at once, at most one per (group, 32-channel slice), a
// multiple of the slices (block b owns slice b % slices).  Sets the kernel's
// shared-memory limit first.
template <typename Kernel>
cudaError_t persistent_grid(Kernel kernel, const geom &g, size_t smem, int64_t *grid)
{
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    int device = 0, sms = 0, per_sm = 0;
    if (e == cudaSuccess)
        e = cudaGetDevice(&device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, g.warps * 32, smem);
    if (e != cudaSuccess)
        return e;
    int slices = g.cout / kBlockCout;
    int64_t groups = (g.images + g.group - 1) / g.group;
    int64_t want = groups * slices, room = (int64_t)sms * (per_sm > 0 ? per_sm : 1);
    room -= room % slices;
    *grid = want < room ? want : room;
    if (*grid < slices)
        *grid = slices;
    return cudaSuccess;
}

// The tile pixel of a group's pixel p (image p / pixels of the group, inside
// its zero border).
__host__ __device__ inline int halo_pixel(const geom &g, int p)
{
    int img = p / g.pixels, q = p % g.pixels;
    return img * g.halo_pixels + (q / g.W + 1) * g.halo_w + q % g.W + 1;
}

// The 32-channel slice of the outputs that this block computes.
__device__ inline int block_slice(const geom &g) { return blockIdx.x % (g.cout / kBlockCout); }

// One block's walk over its groups of images, for a kernel whose shared
// memory holds the weights (whose copies the caller has issued), then `tile`
// (tile_bytes for the whole group): the tile zeroed once (its border stays
// zero), then for each group load(first, n) copies images [first, first + n)
// inside the border and compute(t0, tiles, npix, first_pixel) runs warp tiles
// t0, t0 + warps, ...

template <class Load, class Compute>
__device__ void walk_groups(const geom &g, unsigned char *tile, int tile_bytes, int tiles_per_warp, Load load,
                            Compute compute)
{
    for (int i = threadIdx.x; i < tile_bytes / 16; i += blockDim.x)
        ((uint4 *)tile)[i] = make_uint4(0, 0, 0, 0);
    const int slices = g.cout / kBlockCout;
    const int64_t groups = (g.images + g.group - 1) / g.group, stride = gridDim.x / slices;
    const int warp = threadIdx.x >> 5;
    for (int64_t gi = blockIdx.x / slices; gi < groups; gi += stride) {
        int64_t first = gi * g.group;
        int n = (int)(g.images - first < g.group ? g.images - first : g.group);
        __syncthreads(); /* every warp has read the previous group's tiles; the zeroed border is written */
        load(first, n);
        ncmma::wait_copies(); /* this thread's copies, the weights' too */
        __syncthreads();
        int npix = n * g.pixels, tiles = (npix + 15) / 16;
        for (int t0 = warp; t0 < tiles; t0 += g.warps * tiles_per_warp)
            compute(t0, tiles, npix, first * g.pixels);
    }
}

// Issues the copies of images [first, first + n) of x (channels last,
// PixelBytes bytes per pixel, a multiple of 16) into the tile, inside its
// zero border: 16 bytes per copy, into swizzled chunks, no registers on the
// way (the caller commits and waits).
template <int PixelBytes>
__device__ void copy_images(unsigned char *tile, const void *x, const geom &g, int64_t first, int n)
{
    constexpr int chunks = PixelBytes / 16;
    const unsigned char *src = (const unsigned char *)x + first * g.pixels * PixelBytes;
    const int total = n * g.pixels * chunks;
    for (int i = threadIdx.x; i < total; i += blockDim.x) {
        int pix = i / chunks, chunk = i % chunks;
        ncmma::copy16_async(ncmma::smem_address(tile + ncmma::swizzled_chunk<chunks>(halo_pixel(g, pix), chunk)),
                            src + (int64_t)pix * PixelBytes + chunk * 16);
    }
}

// A block's weights into shared memory: rows [first_row, first_row + 32) of
// both parts (row_bytes each, a multiple of 16), part 0's rows first, each
// row smem_row_bytes apart.
__device__ inline void load_weight_rows(unsigned char *w_smem, const void *part0, const void *part1, int row_bytes,
                                        int smem_row_bytes, int first_row)
{
    const int chunks = row_bytes / 16;
    for (int i = threadIdx.x; i < 2 * kBlockCout * chunks; i += blockDim.x) {
        int part = i / (kBlockCout * chunks), rest = i % (kBlockCout * chunks);
        int row = rest / chunks, chunk = rest % chunks;
        const unsigned char *src =
            (const unsigned char *)(part ? part1 : part0) + (int64_t)(first_row + row) * row_bytes + chunk * 16;
        ncmma::copy16_async(ncmma::smem_address(w_smem + (part * kBlockCout + row) * smem_row_bytes + chunk * 16), src);
    }
}

// ---- a warp's tiles: 16 pixels × 32 channels each, tiles t0, t0 + warps, ... ----

// This lane's ldmatrix row of each of a warp's Tiles tiles: the centre tap's
// tile pixel (a row past the group reads pixel 0; its sums are not written).
template <int Tiles>
__device__ __forceinline__ void tile_centres(const geom &g, int t0, int npix, int (&centre)[Tiles])
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < Tiles; j++) {
        int p = (t0 + j * g.warps) * 16 + (lane & 15);
        centre[j] = halo_pixel(g, p < npix ? p : 0);
    }
}

// The B operand of one k step for both weight parts and the block's 4 n-tiles
// of 8 channels: b[part][n-tile] = {k values 0-7, 8-15} (bf16) or {bytes 0-15,
// 16-31} (8-bit), from rows weight_row apart, at byte k_byte of each row.
// Lanes 0-15 read the first n-tile of a pair, 16-31 the second; lanes 8-15
// and 24-31 the upper half of the step.
__device__ __forceinline__ void load_weight_fragments(unsigned w_base, int weight_row, int k_byte,
                                                      unsigned (&b)[2][4][2])
{
    const int lane = threadIdx.x & 31;
    const int row = (lane >> 4) * 8 + (lane & 7), half = (lane >> 3) & 1;
#pragma unroll
    for (int part = 0; part < 2; part++)
#pragma unroll
        for (int pair = 0; pair < 2; pair++)
            ncmma::ldmatrix_x4(w_base + (part * kBlockCout + pair * 16 + row) * weight_row + k_byte + half * 16,
                               b[part][2 * pair][0], b[part][2 * pair][1], b[part][2 * pair + 1][0],
                               b[part][2 * pair + 1][1]);
}

// The A operand of one k step for each of a warp's active tiles: 16 pixels
// (the centre rows moved by the tap's shift) × 16 bytes at chunks chunk0 and
// chunk0 + 1 of each (Chunks 16-byte chunks per tile pixel, swizzled).
template <int Chunks, int Tiles>
__device__ __forceinline__ void load_count_fragments(const geom &g, unsigned t_base, const int (&centre)[Tiles],
                                                     int shift, int chunk0, int t0, int tiles, unsigned (&a)[Tiles][4])
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < Tiles; j++)
        if (t0 + j * g.warps < tiles)
            ncmma::ldmatrix_x4(t_base + ncmma::swizzled_chunk<Chunks>(centre[j] + shift, chunk0 + (lane >> 4)),
                               a[j][0], a[j][1], a[j][2], a[j][3]);
}

// The accumulators of a warp's tiles into y [pixels, cout] (fp32): value(j,
// n, e) is element e of n-tile n of tile j in the C fragment, where this
// lane holds rows lane/4 (e 0, 1) and lane/4 + 8 (e 2, 3), columns
// 2·(lane%4) and +1.
template <int Tiles, class Value>
__device__ __forceinline__ void store_tiles(const geom &g, int t0, int tiles, int npix, int64_t first_pixel,
                                            int first_channel, float *y, Value value)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < Tiles; j++) {
        if (t0 + j * g.warps >= tiles)
            break;
#pragma unroll
        for (int half = 0; half < 2; half++) {
            int p = (t0 + j * g.warps) * 16 + (lane >> 2) + 8 * half;
            if (p >= npix)
                continue;
            float *dst = y + (first_pixel + p) * g.cout + first_channel + 2 * (lane & 3);
#pragma unroll
            for (int n = 0; n < 4; n++)
                *(float2 *)(dst + n * 8) = make_float2(value(j, n, 2 * half), value(j, n, 2 * half + 1));
        }
    }
}

// The geometry of images × w with cout outputs, tiled as t.
inline geom geom_for(int64_t images, int h, int w, int cout, tiling t)
{
    return geom{h, w, w + 2, (h + 2) * (w + 2), h * w, t.group, t.warps, cout, images};
}

} // namespace ncspike

#endif
