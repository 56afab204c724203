// Monte Carlo integration, BF16 points and result: estimates the integral of f(u) = 4 / (1 + u^2) over [0, 1)
// (that is, pi) as the mean of f over n pseudo-random points, written to result[0].
// Point s is u_s = (hash(s ^ hash(seed)) >> 8) * 2^-24, with the "lowbias32" integer hash: a
// counter-based generator with no state, so any thread can make any point and the numpy
// reference can make exactly the same points.
// In this BF16 version each point is rounded to bf16 (as if it came from a bf16 tensor), f is
// evaluated and summed in float, and the mean is rounded once to bf16.
// Two passes, as a sum reduction: each block sums f over BLOCK*ITEMS points into a partial, then
// one block adds the partials and divides by n. No atomics: the same result on every run.
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 16
#endif

// kernel-lsp: launch mc_partial grid=cdiv(n, BLOCK*ITEMS) block=BLOCK
// kernel-lsp: launch mc_final grid=1 block=BLOCK
// kernel-lsp: tune BLOCK=256,128,512,1024 ITEMS=16,4,8,32,64

__device__ unsigned int lowbias32(unsigned int v)
{
    v ^= v >> 16;
    v *= 0x7feb352du;
    v ^= v >> 15;
    v *= 0x846ca68bu;
    v ^= v >> 16;
    return v;
}

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

extern "C" __global__ void mc_partial(float* partial, int n, unsigned int seed)
{
    const unsigned int key = lowbias32(seed);
    const int first = blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
    float acc = 0.0f;
    for (int k = 0; k < ITEMS; ++k) {
        const int s = first + k * BLOCK;
        if (s < n) {
            const float u = __bfloat162float(__float2bfloat16((lowbias32((unsigned int)s ^ key) >> 8) * (1.0f / 16777216.0f)));
            acc += 4.0f / (1.0f + u * u);
        }
    }
    const float total = block_sum(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

extern "C" __global__ void mc_final(const float* partial, __nv_bfloat16* result, int n)
{
    const int count = (n + BLOCK * ITEMS - 1) / (BLOCK * ITEMS);  // blocks of pass 1
    float acc = 0.0f;
    for (int i = threadIdx.x; i < count; i += BLOCK) acc += partial[i];
    const float total = block_sum(acc);
    if (threadIdx.x == 0) result[0] = __float2bfloat16(total / n);
}
