// a row's layer norm: row statistics a thread a row into scratch allocated each call, then an elementwise kernel, against one block a row (bf16): the rewrite (benchmarks/make_judged_cases.py).
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

__global__ void layernorm_fused(const __nv_bfloat16* x, const __nv_bfloat16* gamma, const __nv_bfloat16* beta, __nv_bfloat16* y, int cols, float eps)
{
    __shared__ float red[256];
    const __nv_bfloat16* xr = x + (size_t)blockIdx.x * cols;
    __nv_bfloat16* yr = y + (size_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += ld(xr[j]);
    const float mean = block_sum(s, red) / cols;
    float v = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        const float d = ld(xr[j]) - mean;
        v += d * d;
    }
    const float rstd = rsqrtf(block_sum(v, red) / cols + eps);
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        yr[j] = st((ld(xr[j]) - mean) * rstd * ld(gamma[j]) + ld(beta[j]));
}

extern "C" void layernorm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* gamma, const __nv_bfloat16* beta, __nv_bfloat16* y, int rows, int cols, float eps)
{
    layernorm_fused<<<rows, 256>>>(x, gamma, beta, y, cols, eps);
}
