// tanh GELU on a stream: an element a thread and the launcher's own cudaStreamSynchronize, against a strided kernel that leaves the wait to its caller (bf16): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16(v); }

__global__ void gelu_each(const __nv_bfloat16* x, __nv_bfloat16* y, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = ld(x[i]);
        y[i] = st(0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))));
    }
}

extern "C" void gelu_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int n, cudaStream_t stream)
{
    gelu_each<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
    cudaStreamSynchronize(stream);
}
