// c = a + b: four consecutive elements a thread (a warp's loads four apart), against one a thread (bf16): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16(v); }

__global__ void vadd_chunks(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int n)
{
    const int base = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    for (int k = 0; k < 4; ++k) {
        const int i = base + k;
        if (i < n) c[i] = st(ld(a[i]) + ld(b[i]));
    }
}

extern "C" void vadd_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int n)
{
    const int threads = 256;
    vadd_chunks<<<(n + threads * 4 - 1) / (threads * 4), threads>>>(a, b, c, n);
}
