// probe_int8_conv.cu — can cuDNN's int8 convolution carry the bf16 mode's
// spike convolutions at bf16's cost with 16-bit weights?  (gpu/NOTES.md,
// "Next" 1: vgg_bn's bf16 accuracy needs 16-bit conv currents.)
//
// Spike counts are small integers, exact in int8.  A weight split into two
// int8 parts of a 16-bit fixed-point value (w ≈ s·(256·a + b)) gives two
// int8 convolutions with exact int32 sums; int8 tensor cores run twice the
// bf16 rate, so the pair could cost what one bf16 convolution costs.  This
// probe times, for the VGG-style net's three spike convolutions (8192 rows:
// batch 1024 × T 8), cuDNN's legacy int8 convolution (x, w int8 NHWC, int32
// sums, float y: INT8_EXT_CONFIG) against the bf16 one the engine runs (bf16
// x, w, y), every algorithm cuDNN offers, and checks the int8 result against
// a CPU loop on a small batch.  One line per (shape, type, algorithm).
//
//   nvcc -O2 -std=c++17 -arch=sm_90 -o probe_int8_conv tools/probe_int8_conv.cu -lcudnn
//   ./probe_int8_conv              (on the GPU machine; cuDNN found at run time)
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#define CHECK_CUDA(x)                                                                                  \
    do {                                                                                               \
        cudaError_t e_ = (x);                                                                          \
        if (e_ != cudaSuccess) {                                                                       \
            printf("FAIL %s: %s\n", #x, cudaGetErrorString(e_));                                       \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

struct shape {
    const char *name;
    int rows, h, w, c, k;
};

struct conv_setup {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t f;
    cudnnConvolutionDescriptor_t conv;
};

// Descriptors of a 3×3, pad 1, stride 1 convolution over NHWC values of
// type `data` (x, w) with sums in `compute` and y of type `out`.
static cudnnStatus_t make_setup(const shape &s, cudnnDataType_t data, cudnnDataType_t compute, cudnnDataType_t out,
                                conv_setup *c)
{
    cudnnCreateTensorDescriptor(&c->x);
    cudnnCreateTensorDescriptor(&c->y);
    cudnnCreateFilterDescriptor(&c->f);
    cudnnCreateConvolutionDescriptor(&c->conv);
    cudnnStatus_t st = cudnnSetTensor4dDescriptor(c->x, CUDNN_TENSOR_NHWC, data, s.rows, s.c, s.h, s.w);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnSetTensor4dDescriptor(c->y, CUDNN_TENSOR_NHWC, out, s.rows, s.k, s.h, s.w);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnSetFilter4dDescriptor(c->f, data, CUDNN_TENSOR_NHWC, s.k, s.c, 3, 3);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnSetConvolution2dDescriptor(c->conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, compute);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnSetConvolutionMathType(c->conv, CUDNN_TENSOR_OP_MATH);
    return st;
}

static void free_setup(conv_setup *c)
{
    cudnnDestroyTensorDescriptor(c->x);
    cudnnDestroyTensorDescriptor(c->y);
    cudnnDestroyFilterDescriptor(c->f);
    cudnnDestroyConvolutionDescriptor(c->conv);
}

// Median ms of 20 calls of algorithm `algo` after 3 warm-ups; −1 if it failed.
static float time_algo(cudnnHandle_t h, const conv_setup &c, cudnnConvolutionFwdAlgo_t algo, const void *x,
                       const void *w, void *y, void *ws, size_t ws_bytes)
{
    float one = 1.0f, zero = 0.0f;
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<float> t;
    for (int r = 0; r < 23; r++) {
        cudaEventRecord(a);
        cudnnStatus_t st = cudnnConvolutionForward(h, &one, c.x, x, c.f, w, c.conv, algo, ws, ws_bytes, &zero, c.y, y);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        if (st != CUDNN_STATUS_SUCCESS)
            return -1;
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        if (r >= 3)
            t.push_back(ms);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// Every forward algorithm cuDNN finds for this setup, timed; the fastest.
static float time_all(cudnnHandle_t h, const shape &s, const char *type, const conv_setup &c, const void *x,
                      const void *w, void *y, void *ws, size_t ws_bytes)
{
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    cudnnStatus_t st = cudnnGetConvolutionForwardAlgorithm_v7(h, c.x, c.f, c.conv, c.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                              &n, perf);
    if (st != CUDNN_STATUS_SUCCESS) {
        printf("%-6s %-5s no algorithm list: %s\n", s.name, type, cudnnGetErrorString(st));
        return -1;
    }
    float best = -1;
    for (int k = 0; k < n; k++) {
        if (perf[k].status != CUDNN_STATUS_SUCCESS || perf[k].memory > ws_bytes)
            continue;
        float ms = time_algo(h, c, perf[k].algo, x, w, y, ws, ws_bytes);
        printf("%-6s %-5s algo %d (%s, %s): %s %.3f ms\n", s.name, type, (int)perf[k].algo,
               perf[k].mathType == CUDNN_TENSOR_OP_MATH ? "tensor ops" : "default math",
               perf[k].determinism == CUDNN_DETERMINISTIC ? "deterministic" : "non-deterministic",
               ms < 0 ? "FAILED" : "", ms);
        if (ms >= 0 && (best < 0 || ms < best))
            best = ms;
    }
    if (best < 0)
        printf("%-6s %-5s no algorithm ran\n", s.name, type);
    return best;
}

static void fill_int8(int8_t *h, size_t n, int lo, int hi, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        h[i] = (int8_t)(lo + (int)((seed >> 8) % (unsigned)(hi - lo + 1)));
    }
}

// The int8 convolution of a 2-row batch against a CPU loop: 0 mismatches expected.
static long check_small(cudnnHandle_t h, shape s)
{
    s.rows = 2;
    conv_setup c;
    if (make_setup(s, CUDNN_DATA_INT8, CUDNN_DATA_INT32, CUDNN_DATA_FLOAT, &c) != CUDNN_STATUS_SUCCESS)
        return -1;
    size_t nx = (size_t)s.rows * s.h * s.w * s.c, nw = (size_t)s.k * 9 * s.c, ny = (size_t)s.rows * s.h * s.w * s.k;
    std::vector<int8_t> hx(nx), hw(nw);
    std::vector<float> hy(ny);
    fill_int8(hx.data(), nx, 0, 4, 1u);
    fill_int8(hw.data(), nw, -127, 127, 2u);
    void *x, *w, *y, *ws;
    size_t ws_bytes = 256u << 20;
    CHECK_CUDA(cudaMalloc(&x, nx));
    CHECK_CUDA(cudaMalloc(&w, nw));
    CHECK_CUDA(cudaMalloc(&y, ny * 4));
    CHECK_CUDA(cudaMalloc(&ws, ws_bytes));
    cudaMemcpy(x, hx.data(), nx, cudaMemcpyHostToDevice);
    cudaMemcpy(w, hw.data(), nw, cudaMemcpyHostToDevice);
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    cudnnGetConvolutionForwardAlgorithm_v7(h, c.x, c.f, c.conv, c.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf);
    float one = 1.0f, zero = 0.0f;
    long bad = -1;
    for (int k = 0; k < n && bad < 0; k++)
        if (perf[k].status == CUDNN_STATUS_SUCCESS &&
            cudnnConvolutionForward(h, &one, c.x, x, c.f, w, c.conv, perf[k].algo, ws, ws_bytes, &zero, c.y, y) ==
                CUDNN_STATUS_SUCCESS)
            bad = 0;
    cudaMemcpy(hy.data(), y, ny * 4, cudaMemcpyDeviceToHost);
    for (int r = 0; bad >= 0 && r < s.rows; r++)
        for (int i = 0; i < s.h; i++)
            for (int j = 0; j < s.w; j++)
                for (int o = 0; o < s.k; o++) {
                    long sum = 0;
                    for (int di = 0; di < 3; di++)
                        for (int dj = 0; dj < 3; dj++) {
                            int ii = i + di - 1, jj = j + dj - 1;
                            if (ii < 0 || jj < 0 || ii >= s.h || jj >= s.w)
                                continue;
                            for (int ch = 0; ch < s.c; ch++)
                                sum += (long)hx[(((size_t)r * s.h + ii) * s.w + jj) * s.c + ch] *
                                       hw[(((size_t)o * 3 + di) * 3 + dj) * s.c + ch];
                        }
                    bad += hy[(((size_t)r * s.h + i) * s.w + j) * s.k + o] != (float)sum;
                }
    cudaFree(x), cudaFree(w), cudaFree(y), cudaFree(ws);
    free_setup(&c);
    return bad;
}

int main(void)
{
    cudnnHandle_t h;
    if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) {
        printf("FAIL cudnnCreate\n");
        return 1;
    }
    printf("cuDNN %zu\n", cudnnGetVersion());
    const shape shapes[] = {{"conv3", 8192, 28, 28, 32, 32}, {"conv6", 8192, 14, 14, 32, 64},
                            {"conv8", 8192, 14, 14, 64, 64}};
    size_t ws_bytes = 1u << 30;
    void *x, *w, *y, *ws;
    CHECK_CUDA(cudaMalloc(&x, (size_t)8192 * 28 * 28 * 64 * 2));
    CHECK_CUDA(cudaMalloc(&w, (size_t)64 * 9 * 64 * 2));
    CHECK_CUDA(cudaMalloc(&y, (size_t)8192 * 28 * 28 * 64 * 4));
    CHECK_CUDA(cudaMalloc(&ws, ws_bytes));
    CHECK_CUDA(cudaMemset(x, 0, (size_t)8192 * 28 * 28 * 64 * 2));
    CHECK_CUDA(cudaMemset(w, 0, (size_t)64 * 9 * 64 * 2));
    for (const shape &s : shapes) {
        printf("%-6s int8 exact on 2 rows: %ld mismatches\n", s.name, check_small(h, s));
        conv_setup c8, c16;
        float t8 = -1, t16 = -1;
        if (make_setup(s, CUDNN_DATA_INT8, CUDNN_DATA_INT32, CUDNN_DATA_FLOAT, &c8) == CUDNN_STATUS_SUCCESS)
            t8 = time_all(h, s, "int8", c8, x, w, y, ws, ws_bytes);
        if (make_setup(s, CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16, &c16) == CUDNN_STATUS_SUCCESS)
            t16 = time_all(h, s, "bf16", c16, x, w, y, ws, ws_bytes);
        printf("%-6s best: int8 (float y) %.3f ms, two of them %.3f ms; bf16 %.3f ms\n", s.name, t8, 2 * t8, t16);
        free_setup(&c8);
        free_setup(&c16);
    }
    cudnnDestroy(h);
    return 0;
}
