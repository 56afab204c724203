// y = alpha x + y: through a float temporary the launcher allocates and frees each call, against one fused kernel (bf16): the rewrite (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16(v); }

__global__ void saxpy_fused(const __nv_bfloat16* x, __nv_bfloat16* y, float alpha, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = st(alpha * ld(x[i]) + ld(y[i]));
}

extern "C" void saxpy_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, float alpha, int n)
{
    int blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    saxpy_fused<<<blocks, 256>>>(x, y, alpha, n);
}
