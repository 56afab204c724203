// y = alpha x + y: through a float temporary the launcher allocates and frees each call, against one fused kernel (fp32): the rewrite (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void saxpy_fused(const float* x, float* y, float alpha, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = st(alpha * ld(x[i]) + ld(y[i]));
}

extern "C" void saxpy_fp32(const float* x, float* y, float alpha, int n)
{
    int blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    saxpy_fused<<<blocks, 256>>>(x, y, alpha, n);
}
