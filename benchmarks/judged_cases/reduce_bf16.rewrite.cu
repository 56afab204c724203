// out = sum(x): block sums into scratch, the launcher's own cudaDeviceSynchronize, a second kernel, against shuffles and one atomic a block (bf16): the rewrite (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16(v); }

__global__ void reduce_atomic(const __nv_bfloat16* x, float* out, int n)
{
    __shared__ float warp_sums[8];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += ld(x[i]);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (lane == 0) atomicAdd(out, acc);
    }
}

extern "C" void reduce_bf16(const __nv_bfloat16* x, float* out, int n)
{
    cudaMemsetAsync(out, 0, sizeof(float), 0);
    int blocks = (n + 255) / 256;
    if (blocks > 1024) blocks = 1024;
    reduce_atomic<<<blocks, 256>>>(x, out, n);
}
