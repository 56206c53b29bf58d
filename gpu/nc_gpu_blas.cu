// nc_gpu_blas.cu — the GEMM dispatcher of the GPU engine (one place that
// knows how each precision maps onto cuBLAS), the measured peak, and the
// error helpers shared by gpu/.
#include "gpu/nc_gpu_internal.h"
#include "gpu/nc_gpu_nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

nc_status nc_gpu_fail_cuda(nc_error *err, const char *where, const char *call, cudaError_t e)
{
    (void)cudaGetLastError(); /* clears a non-sticky error; a sticky one stays */
    nc_status code = e == cudaErrorMemoryAllocation ? NC_ERR_MEMORY : NC_ERR_DEVICE;
    return nc_fail(err, code, "%s%s%s failed: %s (%s)%s", where ? where : "", where && *where ? ": " : "", call,
                   cudaGetErrorName(e), cudaGetErrorString(e),
                   code == NC_ERR_MEMORY ? "; use a smaller batch or fewer steps" : "");
}

nc_status nc_gpu_fail_cublas(nc_error *err, const char *where, const char *call, cublasStatus_t s)
{
    (void)cudaGetLastError();
    nc_status code = s == CUBLAS_STATUS_ALLOC_FAILED ? NC_ERR_MEMORY : NC_ERR_DEVICE;
    return nc_fail(err, code, "%s%s%s failed: %s (%s)", where ? where : "", where && *where ? ": " : "", call,
                   cublasGetStatusName(s), cublasGetStatusString(s));
}

nc_status nc_gpu_gemm(cublasHandle_t h, const nc_gemm *g, const char *where, nc_error *err)
{
    if (g->m < 1 || g->n < 1 || g->k < 1 || g->parts < 1 || g->parts > 3 || g->batch < 1)
        return nc_fail(err, NC_ERR_INTERNAL, "%s: bad GEMM %d x %d x %d (%d parts, batch %d)", where, g->m, g->n,
                       g->k, g->parts, g->batch);
    cudaDataType_t ab = g->kind == NC_GEMM_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasComputeType_t ct = g->kind == NC_GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const float alpha = 1.0f;
    for (int p = 0; p < g->parts; p++) {
        float beta = p == 0 ? g->beta : 1.0f;
        if (g->batch == 1)
            NC_CUBLAS_TRY(err, where,
                          cublasGemmEx(h, g->ta, g->tb, g->m, g->n, g->k, &alpha, g->a[p], ab, g->lda, g->b[p], ab,
                                       g->ldb, &beta, g->c, CUDA_R_32F, g->ldc, ct, CUBLAS_GEMM_DEFAULT));
        else
            NC_CUBLAS_TRY(err, where,
                          cublasGemmStridedBatchedEx(h, g->ta, g->tb, g->m, g->n, g->k, &alpha, g->a[p], ab, g->lda,
                                                     g->stride_a, g->b[p], ab, g->ldb, g->stride_b, &beta, g->c,
                                                     CUDA_R_32F, g->ldc, g->stride_c, g->batch, ct,
                                                     CUBLAS_GEMM_DEFAULT));
    }
    return NC_OK;
}

// ---- measured peak ---------------------------------------------------------------

namespace {

struct peak_res {
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    void *ptr[5] = {};
    ~peak_res()
    {
        for (void *p : ptr)
            if (p)
                cudaFree(p);
        if (e0)
            cudaEventDestroy(e0);
        if (e1)
            cudaEventDestroy(e1);
        if (blas)
            cublasDestroy(blas);
        if (stream)
            cudaStreamDestroy(stream);
    }
};

} // namespace

extern "C" nc_status nc_gpu_measure_peak(nc_gpu_precision p, double *tflops, nc_error *err)
{
    const char *where = "gpu peak";
    *tflops = 0;
    if ((unsigned)p >= NC_GPU_PRECISION_COUNT)
        return nc_fail(err, NC_ERR_ARGUMENT, "gpu peak: unknown precision %d", (int)p);
    long n = nc_gpu_options_get().peak_n;
    if (n < 256 || n > 32768)
        n = 8192;
    peak_res r;
    NC_CUDA_TRY(err, where, cudaSetDevice(nc_gpu_thread_device()));
    NC_CUDA_TRY(err, where, cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    NC_CUBLAS_TRY(err, where, cublasCreate(&r.blas));
    NC_CUBLAS_TRY(err, where, cublasSetStream(r.blas, r.stream));
    NC_CUBLAS_TRY(err, where, cublasSetMathMode(r.blas, CUBLAS_DEFAULT_MATH));
    NC_CUDA_TRY(err, where, cudaEventCreate(&r.e0));
    NC_CUDA_TRY(err, where, cudaEventCreate(&r.e1));
    int bf16 = p == NC_GPU_BF16 || p == NC_GPU_SPLIT_BF16 || p == NC_GPU_SPLIT_BF16X2;
    int parts = p == NC_GPU_SPLIT_BF16 ? 3 : p == NC_GPU_SPLIT_BF16X2 ? 2 : 1;
    size_t nn = (size_t)n * (size_t)n, ab = bf16 ? 2 : 4;
    NC_CUDA_TRY(err, where, cudaMalloc(&r.ptr[0], nn * ab));        /* A: activations */
    for (int k = 0; k < parts; k++)
        NC_CUDA_TRY(err, where, cudaMalloc(&r.ptr[1 + k], nn * ab)); /* B parts: weights */
    NC_CUDA_TRY(err, where, cudaMalloc(&r.ptr[4], nn * 4));         /* C, fp32 */
    for (int k = 0; k < 1 + parts; k++) {
        cudaError_t e = bf16 ? nc_launch_fill_random_bf16(r.stream, (int64_t)nn, 1234 + k, -1.0f, 1.0f, (nc_bf16 *)r.ptr[k])
                             : nc_launch_fill_random_f32(r.stream, (int64_t)nn, 1234 + k, -1.0f, 1.0f, (float *)r.ptr[k]);
        if (e != cudaSuccess)
            return nc_gpu_fail_cuda(err, where, "fill_random", e);
    }
    nc_gemm g = {};
    g.kind = p == NC_GPU_TF32 ? NC_GEMM_TF32 : bf16 ? NC_GEMM_BF16 : NC_GEMM_F32;
    g.ta = g.tb = CUBLAS_OP_N;
    g.m = g.n = g.k = (int)n;
    g.lda = g.ldb = g.ldc = (int)n;
    for (int k = 0; k < parts; k++) {
        g.a[k] = r.ptr[0];
        g.b[k] = r.ptr[1 + k];
    }
    g.parts = parts;
    g.c = (float *)r.ptr[4];
    g.batch = 1;
    g.beta = 0.0f;
    const int warmup = 3, runs = 10;
    std::vector<double> ms;
    for (int i = 0; i < warmup + runs; i++) {
        NC_CUDA_TRY(err, where, cudaEventRecord(r.e0, r.stream));
        nc_status s = nc_gpu_gemm(r.blas, &g, where, err);
        if (s != NC_OK)
            return s;
        NC_CUDA_TRY(err, where, cudaEventRecord(r.e1, r.stream));
        NC_CUDA_TRY(err, where, cudaEventSynchronize(r.e1));
        float t = 0;
        NC_CUDA_TRY(err, where, cudaEventElapsedTime(&t, r.e0, r.e1));
        if (i >= warmup)
            ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    double med = 0.5 * (ms[(runs - 1) / 2] + ms[runs / 2]);
    *tflops = med > 0 ? 2.0 * (double)n * (double)n * (double)n / (med * 1e-3) / 1e12 : 0;
    return NC_OK;
}
