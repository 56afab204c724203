// Sum reduction, BF16 input: out[0] = sum(x) as bf16, accumulated in float, in two passes.
// Pass 1: each block sums BLOCK*ITEMS*VEC elements in shared memory and writes one float partial.
// Pass 2: one block sums the partials and rounds once. No atomics: the same result every run.
// VEC > 1: a thread reads VEC bf16 with one load (16 bytes at VEC=8; x is 256-byte aligned), and
// issues all ITEMS loads before adding, so it has ITEMS*2*VEC bytes in flight; the thread just past
// the last whole vector adds the n % VEC tail. VEC=1 is the naive kernel.
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#ifndef VEC
#define VEC 1
#endif
static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC bf16 must fit one 16-byte access");

// The scratch buffer holds cdiv(n, 128) partials: 128 is the smallest BLOCK*ITEMS*VEC here.
// kernel-lsp: launch reduce_sum_partial grid=cdiv(n, BLOCK*ITEMS*VEC) block=BLOCK
// kernel-lsp: launch reduce_sum_final grid=1 block=BLOCK
// kernel-lsp: tune BLOCK=256,128,512,1024 ITEMS=1,2,4 VEC=1,8

// VEC bf16 values read as one aligned access.
struct alignas(sizeof(__nv_bfloat16) * VEC) Bf16Vec {
    __nv_bfloat16 v[VEC];
};

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

// The VEC lanes widened and added pairwise: a short dependency chain instead of VEC serial adds.
__device__ __forceinline__ float vec_sum(const Bf16Vec& x)
{
    float part[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) part[e] = __bfloat162float(x.v[e]);
#pragma unroll
    for (int width = VEC / 2; width > 0; width /= 2) {
#pragma unroll
        for (int e = 0; e < width; ++e) part[e] += part[e + width];
    }
    return part[0];
}

extern "C" __global__ void __launch_bounds__(BLOCK)
    reduce_sum_partial(const __nv_bfloat16* x, float* partial, int n)
{
    const int full = n / VEC;  // whole vectors; the last n % VEC elements are the tail
    const int first = blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
    Bf16Vec loaded[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int v = first + k * BLOCK;
        if (v < full) loaded[k] = reinterpret_cast<const Bf16Vec*>(x)[v];
    }
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int v = first + k * BLOCK;
        if (v < full) acc += vec_sum(loaded[k]);
        if (VEC > 1 && v == full) {
            for (int i = full * VEC; i < n; ++i) acc += __bfloat162float(x[i]);
        }
    }
    const float total = block_sum(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
    reduce_sum_final(const float* partial, __nv_bfloat16* out, int n)
{
    const int count = (n + BLOCK * ITEMS * VEC - 1) / (BLOCK * ITEMS * VEC);  // blocks of pass 1
    float acc = 0.0f;
    // Unrolled so that several loads are in flight; the adds keep their order.
#pragma unroll 8
    for (int i = threadIdx.x; i < count; i += BLOCK) acc += partial[i];
    const float total = block_sum(acc);
    if (threadIdx.x == 0) out[0] = __float2bfloat16(total);
}
