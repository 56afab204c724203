// Sum reduction, FP32: out[0] = sum(x), in two passes.
// Pass 1: each block sums BLOCK*ITEMS elements in shared memory and writes one partial sum.
// Pass 2: one block sums the partials. No atomics, so the result is the same on every run.
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

extern "C" __global__ void reduce_sum_partial(const float* x, float* partial, int n)
{
    const int first = blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = first + k * BLOCK;
        if (i < n) acc += x[i];
    }
    const float total = block_sum(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

extern "C" __global__ void reduce_sum_final(const float* partial, float* out, int n)
{
    const int count = (n + BLOCK * ITEMS - 1) / (BLOCK * ITEMS);  // blocks of pass 1
    float acc = 0.0f;
    for (int i = threadIdx.x; i < count; i += BLOCK) acc += partial[i];
    const float total = block_sum(acc);
    if (threadIdx.x == 0) out[0] = total;
}
