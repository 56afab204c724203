// Sum reduction, FP32: out[0] = sum(x), in two passes.
// Pass 1: each block sums BLOCK*ITEMS*VEC elements in shared memory and writes one partial sum.
// Pass 2: one block sums the partials. No atomics, so the result is the same on every run.
// VEC > 1: a thread reads VEC floats with one 16-byte load (x is 256-byte aligned), and issues all
// ITEMS loads before adding, so it has ITEMS*16 bytes in flight; the thread just past the last
// whole vector adds the n % VEC tail. VEC=1 is the naive kernel.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#ifndef VEC
#define VEC 1
#endif
static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC floats must fit one 16-byte access");

// The scratch buffer holds cdiv(n, 128) partials: 128 is the smallest BLOCK*ITEMS*VEC here.
// kernel-lsp: launch reduce_sum_partial grid=cdiv(n, BLOCK*ITEMS*VEC) block=BLOCK
// kernel-lsp: launch reduce_sum_final grid=1 block=BLOCK
// kernel-lsp: tune BLOCK=256,128,512,1024 ITEMS=1,2,4,8 VEC=1,4

// VEC floats read as one aligned access.
struct alignas(sizeof(float) * VEC) FloatVec {
    float v[VEC];
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

// The VEC lanes added pairwise: a short dependency chain instead of VEC serial adds.
__device__ __forceinline__ float vec_sum(const FloatVec& x)
{
    float part[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) part[e] = x.v[e];
#pragma unroll
    for (int width = VEC / 2; width > 0; width /= 2) {
#pragma unroll
        for (int e = 0; e < width; ++e) part[e] += part[e + width];
    }
    return part[0];
}

extern "C" __global__ void __launch_bounds__(BLOCK) reduce_sum_partial(const float* x, float* partial, int n)
{
    const int full = n / VEC;  // whole vectors; the last n % VEC elements are the tail
    const int first = blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
    FloatVec loaded[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int v = first + k * BLOCK;
        if (v < full) loaded[k] = reinterpret_cast<const FloatVec*>(x)[v];
    }
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int v = first + k * BLOCK;
        if (v < full) acc += vec_sum(loaded[k]);
        if (VEC > 1 && v == full) {
            for (int i = full * VEC; i < n; ++i) acc += x[i];
        }
    }
    const float total = block_sum(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

extern "C" __global__ void __launch_bounds__(BLOCK) reduce_sum_final(const float* partial, float* out, int n)
{
    const int count = (n + BLOCK * ITEMS * VEC - 1) / (BLOCK * ITEMS * VEC);  // blocks of pass 1
    float acc = 0.0f;
    // Unrolled so that several loads are in flight; the adds keep their order.
#pragma unroll 8
    for (int i = threadIdx.x; i < count; i += BLOCK) acc += partial[i];
    const float total = block_sum(acc);
    if (threadIdx.x == 0) out[0] = total;
}
