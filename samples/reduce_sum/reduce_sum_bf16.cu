// Sum reduction, BF16 input: out[0] = sum(x) as bf16, accumulated in float, in two passes.
// Pass 1: each block sums BLOCK*ITEMS elements in shared memory and writes one float partial.
// Pass 2: one block sums the partials and rounds once. No atomics: the same result every run.
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

// kernel-lsp: launch reduce_sum_partial grid=cdiv(n, BLOCK*ITEMS) block=BLOCK
// kernel-lsp: launch reduce_sum_final grid=1 block=BLOCK
// kernel-lsp: tune BLOCK=256,128,512,1024 ITEMS=1,2,4,8,16

// Tree reduction of one value per thread; the block size must be a power of two.
__device__ float block_sum(float value)
{
    __shared__ float buf[BLOCK];
    buf[threadIdx.x] = value;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    return buf[0];
}

extern "C" __global__ void reduce_sum_partial(const __nv_bfloat16* x, float* partial, int n)
{
    const int first = blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = first + k * BLOCK;
        if (i < n) acc += __bfloat162float(x[i]);
    }
    const float total = block_sum(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

extern "C" __global__ void reduce_sum_final(const float* partial, __nv_bfloat16* out, int n)
{
    const int count = (n + BLOCK * ITEMS - 1) / (BLOCK * ITEMS);  // blocks of pass 1
    float acc = 0.0f;
    for (int i = threadIdx.x; i < count; i += BLOCK) acc += partial[i];
    const float total = block_sum(acc);
    if (threadIdx.x == 0) out[0] = __float2bfloat16(total);
}
