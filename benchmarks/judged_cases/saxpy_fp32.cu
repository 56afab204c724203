// y = alpha x + y: through a float temporary the launcher allocates and frees each call, against one fused kernel (fp32): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void scale_into(const float* x, float* tmp, float alpha, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) tmp[i] = alpha * ld(x[i]);
}

__global__ void add_into(const float* tmp, float* y, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = st(tmp[i] + ld(y[i]));
}

extern "C" void saxpy_fp32(const float* x, float* y, float alpha, int n)
{
    float* tmp = nullptr;
    cudaMalloc(&tmp, (size_t)n * sizeof(float));
    const int blocks = (n + 255) / 256;
    scale_into<<<blocks, 256>>>(x, tmp, alpha, n);
    add_into<<<blocks, 256>>>(tmp, y, n);
    cudaFree(tmp);
}
