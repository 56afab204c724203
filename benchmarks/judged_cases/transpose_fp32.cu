// dst = src^T: coalesced reads and writes a row apart, against 32x32 tiles through shared memory (fp32): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void transpose_naive(const float* src, float* dst, int rows, int cols)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) dst[(size_t)c * rows + r] = src[(size_t)r * cols + c];
}

extern "C" void transpose_fp32(const float* src, float* dst, int rows, int cols)
{
    const dim3 block(32, 8);
    const dim3 grid((cols + 31) / 32, (rows + 7) / 8);
    transpose_naive<<<grid, block>>>((const float*)src, (float*)dst, rows, cols);
}
