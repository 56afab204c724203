// a row's RMS norm on a stream: row scales a thread a row into scratch allocated each call, then an elementwise kernel, against one block a row (bf16): the rewrite (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16(v); }

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

__global__ void rmsnorm_fused(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int cols, float eps)
{
    __shared__ float red[256];
    const __nv_bfloat16* xr = x + (size_t)blockIdx.x * cols;
    __nv_bfloat16* yr = y + (size_t)blockIdx.x * cols;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) ss += ld(xr[j]) * ld(xr[j]);
    const float scale = rsqrtf(block_sum(ss, red) / cols + eps);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = st(ld(xr[j]) * scale * ld(w[j]));
}

extern "C" void rmsnorm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int rows, int cols, float eps, cudaStream_t stream)
{
    rmsnorm_fused<<<rows, 256, 0, stream>>>(x, w, y, cols, eps);
}
