// out = sum(x): block sums into scratch, the launcher's own cudaDeviceSynchronize, a second kernel, against shuffles and one atomic a block (fp32): the rewrite (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void reduce_atomic(const float* x, float* out, int n)
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

extern "C" void reduce_fp32(const float* x, float* out, int n)
{
    cudaMemsetAsync(out, 0, sizeof(float), 0);
    int blocks = (n + 255) / 256;
    if (blocks > 1024) blocks = 1024;
    reduce_atomic<<<blocks, 256>>>(x, out, n);
}
