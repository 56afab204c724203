// c = a + b: four consecutive elements a thread (a warp's loads four apart), against one a thread (fp32): the rewrite (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void vadd_strided(const float* a, const float* b, float* c, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        c[i] = st(ld(a[i]) + ld(b[i]));
}

extern "C" void vadd_fp32(const float* a, const float* b, float* c, int n)
{
    int blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    vadd_strided<<<blocks, 256>>>(a, b, c, n);
}
