// nc_gpu_spike_conv.cu — the 3×3 convolution of spike counts with 16-bit
// currents: bf16 counts times a weight in two bf16 parts, summed in fp32 on
// tensor cores (mma.sync m16n8k16), written as fp32.
//
// Why an own kernel: in bf16 a conv's current rounded to 8 bits — the weight
// or the output — flips the prediction of 5 % of the images of a VGG-style
// net at every step (BENCHMARKS §3j, §3k); the weight in two bf16 parts with
// an fp32 output brings that under 0.1 %.  cuDNN has no such convolution in
// one pass: its bf16 convolutions write bf16, and its fp32-output graph
// engines take twice a bf16 pass for [q, q]·[hi, mid].  Here each count is
// read once and multiplied by both parts into one fp32 accumulator.
//
// Layout (gpu/nc_gpu_cudnn.h's channels last): x [images, H, W, C] bf16
// counts, the parts [Cout, 3, 3, C] bf16 each, y [images, H, W, Cout] fp32.
// Stride 1, padding 1, no dilation, no groups (nc_spike_conv_fits says which
// shapes).
//
// How it runs: a persistent grid; each block owns 32 output channels (their
// two weight parts stay in shared memory for the whole pass) and walks over
// groups of whole images.  A group's counts are copied into shared memory
// with a zero border of one pixel, so the nine taps read shifted rows of the
// same tile (ldmatrix with one row address per pixel: the im2col is only an
// address).  Each warp computes tiles of 16 pixels × 32 channels.  The 16-byte
// chunks of a pixel's channels are stored XOR-swizzled by the pixel index, so
// that the 8 pixels of one ldmatrix phase fall into 8 different bank groups.
#include "gpu/nc_gpu_internal.h"
#include "gpu/nc_gpu_mma.h"
#include "gpu/nc_gpu_spike_tiling.h"

#include <stdio.h>

namespace {

using namespace ncmma;
using namespace ncspike;

constexpr int kTilesPerWarp = 4;    // 16-pixel tiles a warp computes at once

// Bytes of one weight row in shared memory: 9·C bf16 values and 16 bytes of
// padding, so that 8 consecutive rows start in 8 different bank groups.
__host__ __device__ constexpr int weight_row_bytes(int C) { return 9 * C * 2 + 16; }

// acc += a·b on bf16 tensor cores, fp32 accumulation (m16n8k16, A row major, B column major).
// Not volatile: the compiler may interleave independent products, so that
// no product waits for the one before it into the same accumulator.
__device__ __forceinline__ void mma_bf16(float (&acc)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One warp's tiles t0, t0 + warps, ... (kTilesPerWarp of them, those below
// `tiles`) of the group: 16 pixels × 32 channels each, written to y.  Each
// step of k loads the counts of every tile first, then adds the mid part's
// products of all tiles and channels, then the hi part's: 16 independent
// products lie between two into the same accumulator.
template <int C>
__device__ void warp_tiles(const unsigned char *tile, const unsigned char *w_smem, const geom &g,
                           int t0, int tiles, int npix, int64_t first_pixel, int first_channel, float *y)
{
    int centre[kTilesPerWarp];
    tile_centres(g, t0, npix, centre);
    float acc[kTilesPerWarp][4][4];
#pragma unroll
    for (int j = 0; j < kTilesPerWarp; j++)
#pragma unroll
        for (int n = 0; n < 4; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[j][n][e] = 0.0f;
    const unsigned w_base = smem_address(w_smem), t_base = smem_address(tile);
#pragma unroll 3
    for (int tap = 0; tap < 9; tap++) {
        const int shift = (tap / 3 - 1) * g.halo_w + (tap % 3 - 1);
#pragma unroll
        for (int kc = 0; kc < C / 16; kc++) {
            const int k0 = tap * C + kc * 16;
            unsigned b[2][4][2]; // [part][n-tile][reg]
            load_weight_fragments(w_base, weight_row_bytes(C), k0 * 2, b);
            unsigned a[kTilesPerWarp][4];
            load_count_fragments<C / 8>(g, t_base, centre, shift, kc * 2, t0, tiles, a);
#pragma unroll
            for (int part = 1; part >= 0; part--) /* mid first: the smaller part */
#pragma unroll
                for (int j = 0; j < kTilesPerWarp; j++)
                    if (t0 + j * g.warps < tiles)
#pragma unroll
                        for (int n = 0; n < 4; n++)
                            mma_bf16(acc[j][n], a[j], b[part][n][0], b[part][n][1]);
        }
    }
    store_tiles<kTilesPerWarp>(g, t0, tiles, npix, first_pixel, first_channel, y,
                               [&](int j, int n, int e) { return acc[j][n][e]; });
}

template <int C>
__global__ void __launch_bounds__(kMaxWarps * 32, 2)
    spike_conv3x3_kernel(geom g, const nc_bf16 *x, const nc_bf16 *hi, const nc_bf16 *mid, float *y)
{
    extern __shared__ __align__(16) unsigned char smem[];
    const int channel0 = block_slice(g) * kBlockCout;
    unsigned char *w_smem = smem, *tile = smem + 2 * kBlockCout * weight_row_bytes(C);
    load_weight_rows(w_smem, hi, mid, 9 * C * 2, weight_row_bytes(C), channel0);
    walk_groups(
        g, tile, g.group * g.halo_pixels * C * 2, kTilesPerWarp,
        [&](int64_t first, int n) { copy_images<2 * C>(tile, x, g, first, n); },
        [&](int t0, int tiles, int npix, int64_t first_pixel) {
            warp_tiles<C>(tile, w_smem, g, t0, tiles, npix, first_pixel, channel0, y);
        });
}

// Shared memory of one block for C input channels and a group of `group` images.
size_t smem_bytes(int C, int h, int w, int group)
{
    return (size_t)2 * kBlockCout * weight_row_bytes(C) + (size_t)group * (h + 2) * (w + 2) * C * 2;
}

// How shape C × h × w runs (choose_tiling).
tiling plan_for(int C, int h, int w)
{
    return choose_tiling((size_t)(h + 2) * (w + 2) * C * 2, smem_bytes(C, h, w, 0), h * w, kTilesPerWarp);
}

template <int C>
cudaError_t launch_for(cudaStream_t s, const geom &g, const nc_bf16 *x, const nc_bf16 *hi,
                       const nc_bf16 *mid, float *y)
{
    size_t smem = smem_bytes(C, g.H, g.W, g.group);
    int64_t grid = 0;
    cudaError_t e = persistent_grid(spike_conv3x3_kernel<C>, g, smem, &grid);
    if (e != cudaSuccess)
        return e;
    spike_conv3x3_kernel<C><<<(unsigned)grid, g.warps * 32, smem, s>>>(g, x, hi, mid, y);
    return cudaGetLastError();
}

} // namespace

int nc_spike_conv_fits(const nc_gwin *w, int cout, int groups, char *why, size_t why_size)
{
    const char *no = nullptr;
    if (groups > 1)
        no = "a grouped convolution";
    else if (w->kh != 3 || w->kw != 3 || w->sh != 1 || w->sw != 1 || w->dh != 1 || w->dw != 1)
        no = "not a 3×3 window with stride 1";
    else if (w->pt != 1 || w->pl != 1 || w->pb != 1 || w->pr != 1 || w->oh != w->h || w->ow != w->w)
        no = "padding other than 1";
    else if (w->c != 16 && w->c != 32 && w->c != 64)
        no = "input channels other than 16, 32 or 64";
    else if (cout % kBlockCout != 0)
        no = "output channels not a multiple of 32";
    else if (smem_bytes(w->c, w->h, w->w, 1) > kBlockSmem)
        no = "an image too large for shared memory";
    if (no && why)
        snprintf(why, why_size, "%s", no);
    return no == nullptr;
}

void nc_spike_conv_describe(const nc_gwin *w, int cout, char *out, size_t size)
{
    tiling p = plan_for(w->c, w->h, w->w);
    snprintf(out, size,
             "own kernel: 3×3 spike conv, bf16 counts × weight in 2 bf16 parts, fp32 accumulation and output "
             "(mma.sync m16n8k16), %d image%s, %d channels and %d warps per block, %zu bytes of shared memory",
             p.group, p.group > 1 ? "s" : "", cout < kBlockCout ? cout : kBlockCout, p.warps,
             smem_bytes(w->c, w->h, w->w, p.group));
}

cudaError_t nc_launch_spike_conv3x3(cudaStream_t s, int64_t images, const nc_gwin *w, int cout, const nc_bf16 *x,
                                    const nc_bf16 *hi, const nc_bf16 *mid, float *y)
{
    if (!nc_spike_conv_fits(w, cout, 1, nullptr, 0))
        return cudaErrorInvalidValue;
    if (images <= 0)
        return cudaSuccess;
    tiling p = plan_for(w->c, w->h, w->w);
    geom g = geom_for(images, w->h, w->w, cout, p);
    switch (w->c) {
    case 16: return launch_for<16>(s, g, x, hi, mid, y);
    case 32: return launch_for<32>(s, g, x, hi, mid, y);
    default: return launch_for<64>(s, g, x, hi, mid, y);
    }
}
