// Dot product, FP32: out[0] = sum_i a[i] * b[i], in two passes.
// Pass 1: each block reduces BLOCK*ITEMS products in shared memory to one partial.
// Pass 2: one block sums the partials. No atomics, so the result is the same on every run.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

// kernel-lsp: launch dot_partial grid=cdiv(n, BLOCK*ITEMS) block=BLOCK
// kernel-lsp: launch dot_final grid=1 block=BLOCK
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

extern "C" __global__ void dot_partial(const float* a, const float* b, float* partial, int n)
{
    const int first = blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = first + k * BLOCK;
        if (i < n) acc += a[i] * b[i];
    }
    const float total = block_sum(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

extern "C" __global__ void dot_final(const float* partial, float* out, int n)
{
    const int count = (n + BLOCK * ITEMS - 1) / (BLOCK * ITEMS);  // blocks of pass 1
    float acc = 0.0f;
    for (int i = threadIdx.x; i < count; i += BLOCK) acc += partial[i];
    const float total = block_sum(acc);
    if (threadIdx.x == 0) out[0] = total;
}
