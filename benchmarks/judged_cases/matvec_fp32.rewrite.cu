// y = A x: a thread a row (loads a row apart), against a warp a row (fp32): the rewrite (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void matvec_warps(const float* A, const float* x, float* y, int rows, int cols)
{
    const int r = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (r >= rows) return;  // whole warps: r is the same in all of its lanes
    float acc = 0.0f;
    for (int j = lane; j < cols; j += 32) acc += ld(A[(size_t)r * cols + j]) * ld(x[j]);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) y[r] = st(acc);
}

extern "C" void matvec_fp32(const float* A, const float* x, float* y, int rows, int cols)
{
    matvec_warps<<<(rows + 7) / 8, 256>>>(A, x, y, rows, cols);
}
