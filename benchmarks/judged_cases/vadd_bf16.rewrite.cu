// c = a + b: four consecutive elements a thread (a warp's loads four apart), against one a thread (bf16): the rewrite (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16(v); }

__global__ void vadd_strided(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        c[i] = st(ld(a[i]) + ld(b[i]));
}

extern "C" void vadd_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int n)
{
    int blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    vadd_strided<<<blocks, 256>>>(a, b, c, n);
}
