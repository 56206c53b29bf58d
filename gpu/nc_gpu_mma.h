// nc_gpu_mma.h — the shared-memory and tensor-core building blocks of the
// own spike convolutions (nc_gpu_spike_conv.cu, nc_gpu_spike_conv_fx16.cu,
// nc_gpu_spike_conv_if.cu),
// device code only (C++, gpu/ only).
#ifndef NC_GPU_MMA_H
#define NC_GPU_MMA_H

namespace ncmma {

__device__ __forceinline__ unsigned smem_address(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

// Offset of the 16-byte chunk `chunk` of tile pixel `pixel` (Chunks chunks per
// pixel, a power of two up to 8), swizzled so that the 8 consecutive pixels of
// one ldmatrix phase land in 8 different 16-byte bank groups of a 128-byte line.
template <int Chunks> __device__ __forceinline__ int swizzled_chunk(int pixel, int chunk)
{
    constexpr int pixels_per_line = 8 / Chunks;
    int swz = (pixel / pixels_per_line) & (Chunks - 1);
    return pixel * (Chunks * 16) + ((chunk ^ swz) << 4);
}

// Four 8×8 matrices of 16-bit elements (or 8×16 of 8-bit ones): lanes 8i..8i+7
// give the row addresses of matrix i, and lane l receives row l/4, elements
// 2·(l%4) and +1 (bytes 4·(l%4)..+3) of each, in r0..r3.
__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

__device__ __forceinline__ void copy16_async(unsigned dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

__device__ __forceinline__ void wait_copies()
{
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
}

// For copies that overlap work: close this thread's group of copies without
// waiting; later wait for every group closed before.
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void wait_committed_copies() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

} // namespace ncmma

#endif
