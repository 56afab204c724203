// y = A x: a thread a row (loads a row apart), against a warp a row (bf16): the rewrite (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16(v); }

__global__ void matvec_warps(const __nv_bfloat16* A, const __nv_bfloat16* x, __nv_bfloat16* y, int rows, int cols)
{
    const int r = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (r >= rows) return;  // whole warps: r is the same in all of its lanes
    float acc = 0.0f;
    for (int j = lane; j < cols; j += 32) acc += ld(A[(size_t)r * cols + j]) * ld(x[j]);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) y[r] = st(acc);
}

extern "C" void matvec_bf16(const __nv_bfloat16* A, const __nv_bfloat16* x, __nv_bfloat16* y, int rows, int cols)
{
    matvec_warps<<<(rows + 7) / 8, 256>>>(A, x, y, rows, cols);
}
