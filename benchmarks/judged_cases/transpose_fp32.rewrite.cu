// dst = src^T: coalesced reads and writes a row apart, against 32x32 tiles through shared memory (fp32): the rewrite (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void transpose_tiled(const float* src, float* dst, int rows, int cols)
{
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x;
    int y = blockIdx.y * 32 + threadIdx.y;
    for (int k = 0; k < 32; k += 8)
        if (x < cols && y + k < rows) tile[threadIdx.y + k][threadIdx.x] = src[(size_t)(y + k) * cols + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int k = 0; k < 32; k += 8)
        if (x < rows && y + k < cols) dst[(size_t)(y + k) * rows + x] = tile[threadIdx.x][threadIdx.y + k];
}

extern "C" void transpose_fp32(const float* src, float* dst, int rows, int cols)
{
    const dim3 block(32, 8);
    const dim3 grid((cols + 31) / 32, (rows + 31) / 32);
    transpose_tiled<<<grid, block>>>((const float*)src, (float*)dst, rows, cols);
}
