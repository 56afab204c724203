// c = a + b: four consecutive elements a thread (a warp's loads four apart), against one a thread (fp32): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void vadd_chunks(const float* a, const float* b, float* c, int n)
{
    const int base = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    for (int k = 0; k < 4; ++k) {
        const int i = base + k;
        if (i < n) c[i] = st(ld(a[i]) + ld(b[i]));
    }
}

extern "C" void vadd_fp32(const float* a, const float* b, float* c, int n)
{
    const int threads = 256;
    vadd_chunks<<<(n + threads * 4 - 1) / (threads * 4), threads>>>(a, b, c, n);
}
