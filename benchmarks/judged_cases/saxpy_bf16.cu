// y = alpha x + y: through a float temporary the launcher allocates and frees each call, against one fused kernel (bf16): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16(v); }

__global__ void scale_into(const __nv_bfloat16* x, float* tmp, float alpha, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) tmp[i] = alpha * ld(x[i]);
}

__global__ void add_into(const float* tmp, __nv_bfloat16* y, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = st(tmp[i] + ld(y[i]));
}

extern "C" void saxpy_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, float alpha, int n)
{
    float* tmp = nullptr;
    cudaMalloc(&tmp, (size_t)n * sizeof(float));
    const int blocks = (n + 255) / 256;
    scale_into<<<blocks, 256>>>(x, tmp, alpha, n);
    add_into<<<blocks, 256>>>(tmp, y, n);
    cudaFree(tmp);
}
