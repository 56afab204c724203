// out = sum(x): block sums into scratch, the launcher's own cudaDeviceSynchronize, a second kernel, against shuffles and one atomic a block (fp32): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void block_sums(const float* x, float* partial, int n)
{
    __shared__ float s[256];
    const int i = blockIdx.x * 256 + threadIdx.x;
    s[threadIdx.x] = i < n ? ld(x[i]) : 0.0f;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

__global__ void final_sum(const float* partial, float* out, int count)
{
    __shared__ float s[256];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < count; i += 256) acc += partial[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = s[0];
}

extern "C" void reduce_fp32(const float* x, float* out, int n)
{
    const int blocks = (n + 255) / 256;
    float* partial = nullptr;
    cudaMalloc(&partial, blocks * sizeof(float));
    block_sums<<<blocks, 256>>>(x, partial, n);
    cudaDeviceSynchronize();
    final_sum<<<1, 256>>>(partial, out, blocks);
    cudaFree(partial);
}
