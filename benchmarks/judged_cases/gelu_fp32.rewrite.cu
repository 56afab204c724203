// tanh GELU on a stream: an element a thread and the launcher's own cudaStreamSynchronize, against a strided kernel that leaves the wait to its caller (fp32): the rewrite (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void gelu_strided(const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float v = ld(x[i]);
        y[i] = st(0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))));
    }
}

extern "C" void gelu_fp32(const float* x, float* y, int n, cudaStream_t stream)
{
    int blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    gelu_strided<<<blocks, 256, 0, stream>>>(x, y, n);
}
