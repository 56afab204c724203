// dst = src^T: coalesced reads and writes a row apart, against 32x32 tiles through shared memory (bf16): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16(v); }

__global__ void transpose_naive(const unsigned short* src, unsigned short* dst, int rows, int cols)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) dst[(size_t)c * rows + r] = src[(size_t)r * cols + c];
}

extern "C" void transpose_bf16(const __nv_bfloat16* src, __nv_bfloat16* dst, int rows, int cols)
{
    const dim3 block(32, 8);
    const dim3 grid((cols + 31) / 32, (rows + 7) / 8);
    transpose_naive<<<grid, block>>>((const unsigned short*)src, (unsigned short*)dst, rows, cols);
}
