// Inclusive prefix sum (scan), FP32: y[i] = x[0] + ... + x[i], in three passes
// (reduce, then scan the block totals, then scan each tile with its offset):
//   1. scan_reduce:    each block sums its tile of BLOCK*ITEMS elements into block_sums[b];
//   2. scan_spine:     one block turns block_sums into exclusive offsets, in place;
//   3. scan_downsweep: each block scans its tile again and adds its offset.
// Each tile is staged in shared memory so global loads and stores stay coalesced; inside a
// tile each thread scans ITEMS consecutive elements, then the threads' totals are scanned with
// the textbook Hillis-Steele loop.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#define TILE_SIZE (BLOCK * ITEMS)

// kernel-lsp: launch scan_reduce grid=cdiv(n, BLOCK*ITEMS) block=BLOCK
// kernel-lsp: launch scan_spine grid=1 block=BLOCK
// kernel-lsp: launch scan_downsweep grid=cdiv(n, BLOCK*ITEMS) block=BLOCK
// kernel-lsp: tune BLOCK=256,128,512,1024 ITEMS=1,2,4,8

// Inclusive scan of one value per thread over the block (Hillis-Steele). Afterwards buf[t] holds
// thread t's inclusive sum; the caller must __syncthreads() before it writes buf again.
__device__ void block_inclusive_scan(float value, float* buf)
{
    buf[threadIdx.x] = value;
    __syncthreads();
    for (int offset = 1; offset < BLOCK; offset *= 2) {
        const float left = threadIdx.x >= offset ? buf[threadIdx.x - offset] : 0.0f;
        __syncthreads();
        buf[threadIdx.x] += left;
        __syncthreads();
    }
}

__device__ float block_sum(float value, float* buf)
{
    buf[threadIdx.x] = value;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    return buf[0];
}

extern "C" __global__ void scan_reduce(const float* x, float* block_sums, int n)
{
    __shared__ float buf[BLOCK];
    const int first = blockIdx.x * TILE_SIZE + threadIdx.x;
    float acc = 0.0f;
    for (int k = 0; k < ITEMS; ++k) {
        const int i = first + k * BLOCK;
        if (i < n) acc += x[i];
    }
    const float total = block_sum(acc, buf);
    if (threadIdx.x == 0) block_sums[blockIdx.x] = total;
}

// One block walks over all block totals BLOCK at a time, carrying the running sum.
extern "C" __global__ void scan_spine(float* block_sums, int n)
{
    __shared__ float buf[BLOCK];
    const int count = (n + TILE_SIZE - 1) / TILE_SIZE;
    float carry = 0.0f;
    for (int start = 0; start < count; start += BLOCK) {
        const int i = start + threadIdx.x;
        const float v = i < count ? block_sums[i] : 0.0f;
        block_inclusive_scan(v, buf);
        const float exclusive = threadIdx.x > 0 ? buf[threadIdx.x - 1] : 0.0f;
        const float chunk_total = buf[BLOCK - 1];
        if (i < count) block_sums[i] = carry + exclusive;  // offset of tile i
        carry += chunk_total;
        __syncthreads();
    }
}

extern "C" __global__ void scan_downsweep(const float* x, const float* block_sums, float* y, int n)
{
    __shared__ float tile[TILE_SIZE];
    __shared__ float buf[BLOCK];
    const int base = blockIdx.x * TILE_SIZE;

    // Coalesced load of the tile; elements past n count as 0.
    for (int k = 0; k < ITEMS; ++k) {
        const int j = k * BLOCK + threadIdx.x;
        tile[j] = base + j < n ? x[base + j] : 0.0f;
    }
    __syncthreads();

    // Each thread scans its ITEMS consecutive elements, then the thread totals are scanned.
    float running = 0.0f;
    for (int k = 0; k < ITEMS; ++k) {
        running += tile[threadIdx.x * ITEMS + k];
        tile[threadIdx.x * ITEMS + k] = running;
    }
    block_inclusive_scan(running, buf);
    const float before = (threadIdx.x > 0 ? buf[threadIdx.x - 1] : 0.0f) + block_sums[blockIdx.x];
    for (int k = 0; k < ITEMS; ++k) tile[threadIdx.x * ITEMS + k] += before;
    __syncthreads();

    for (int k = 0; k < ITEMS; ++k) {
        const int j = k * BLOCK + threadIdx.x;
        if (base + j < n) y[base + j] = tile[j];
    }
}
