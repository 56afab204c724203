// a row's RMS norm on a stream: row scales a thread a row into scratch allocated each call, then an elementwise kernel, against one block a row (fp32): the rewrite (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

// A block's sum (blockDim.x a power of two, at most 256), in every thread.
static __device__ float block_sum(float v, float* red)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    const float total = red[0];
    __syncthreads();
    return total;
}

__global__ void rmsnorm_fused(const float* x, const float* w, float* y, int cols, float eps)
{
    __shared__ float red[256];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) ss += ld(xr[j]) * ld(xr[j]);
    const float scale = rsqrtf(block_sum(ss, red) / cols + eps);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = st(ld(xr[j]) * scale * ld(w[j]));
}

extern "C" void rmsnorm_fp32(const float* x, const float* w, float* y, int rows, int cols, float eps, cudaStream_t stream)
{
    rmsnorm_fused<<<rows, 256, 0, stream>>>(x, w, y, cols, eps);
}
