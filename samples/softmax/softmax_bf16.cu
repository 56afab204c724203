// Row softmax, BF16 in and out, float math: y[r][c] = exp(x[r][c] - max_r) / sum_c exp(...).
// The defaults are the naive kernel: one block per row, three passes over the row (max, sum of
// exponentials, write), with shared-memory tree reductions. Safe for any row length.
// The tunables switch to a tuned kernel (still one block per row, any row length):
// - VEC=8: 16-byte loads and stores (8 bf16). Only when cols % 8 == 0, since only then does
//   every row start 16-byte aligned (the buffers are); other rows take the scalar loop.
// - CACHE_COLS=4096: a row of up to CACHE_COLS columns is loaded once into registers
//   (CACHE_COLS / (BLOCK*VEC) vectors per thread, widened to float), so x is read from DRAM once
//   and the exponentials are computed once; longer rows take the looped passes.
// - Either of them also replaces the tree reductions with warp shuffles (one barrier each).
#include <cuda_bf16.h>
#include <math_constants.h>  // CUDART_INF_F

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef CACHE_COLS
#define CACHE_COLS 0
#endif

// kernel-lsp: launch softmax grid=rows block=BLOCK
// kernel-lsp: tune BLOCK=256,64,128,512,1024 VEC=1,8 CACHE_COLS=0,4096

#if VEC == 1 && CACHE_COLS == 0  // ---- the naive kernel -------------------------------------

__device__ float block_max(float value, float* buf)
{
    buf[threadIdx.x] = value;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + stride]);
        __syncthreads();
    }
    const float result = buf[0];
    __syncthreads();  // buf is reused by the next reduction
    return result;
}

__device__ float block_sum(float value, float* buf)
{
    buf[threadIdx.x] = value;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    const float result = buf[0];
    __syncthreads();
    return result;
}

extern "C" __global__ void softmax(const __nv_bfloat16* x, __nv_bfloat16* y, int rows, int cols)
{
    __shared__ float buf[BLOCK];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const __nv_bfloat16* xr = x + (long long)row * cols;
    __nv_bfloat16* yr = y + (long long)row * cols;

    float m = -CUDART_INF_F;
    for (int c = threadIdx.x; c < cols; c += BLOCK) m = fmaxf(m, __bfloat162float(xr[c]));
    m = block_max(m, buf);

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) s += expf(__bfloat162float(xr[c]) - m);
    s = block_sum(s, buf);

    const float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += BLOCK)
        yr[c] = __float2bfloat16(expf(__bfloat162float(xr[c]) - m) * inv);
}

#else  // ---- the tuned kernel ---------------------------------------------------------------

#define WARPS (BLOCK / 32)
// Vectors of VEC values each thread keeps in registers: the row's first CACHE_VECS*BLOCK*VEC
// columns, the k-th vector of thread t at vector index t + k*BLOCK (coalesced per k).
#define CACHE_VECS ((CACHE_COLS + BLOCK * VEC - 1) / (BLOCK * VEC))

// W bf16 values moved as one access (16 bytes at W=8); the address must be 2*W-byte aligned.
template <int W>
struct alignas(2 * W) Bf16s {
    __nv_bfloat16 v[W];
};

__device__ float warp_max(float v)
{
    for (int lane_mask = 16; lane_mask > 0; lane_mask /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, lane_mask));
    return v;
}

__device__ float warp_sum(float v)
{
    for (int lane_mask = 16; lane_mask > 0; lane_mask /= 2) v += __shfl_xor_sync(0xffffffffu, v, lane_mask);
    return v;
}

// Each warp reduces in registers and its lane 0 leaves one partial in `partials` (WARPS floats);
// after the one barrier every warp reduces the partials itself, so all threads get the result.
// `partials` is still being read after the return: the next reduction needs its own array.
__device__ float block_max(float value, float* partials)
{
    value = warp_max(value);
    if (threadIdx.x % 32 == 0) partials[threadIdx.x / 32] = value;
    __syncthreads();
    return warp_max(threadIdx.x % 32 < WARPS ? partials[threadIdx.x % 32] : -CUDART_INF_F);
}

__device__ float block_sum(float value, float* partials)
{
    value = warp_sum(value);
    if (threadIdx.x % 32 == 0) partials[threadIdx.x / 32] = value;
    __syncthreads();
    return warp_sum(threadIdx.x % 32 < WARPS ? partials[threadIdx.x % 32] : 0.0f);
}

// Three passes that re-read the row (mostly from L1/L2), W values per access; W divides cols.
template <int W>
__device__ void softmax_looped(const __nv_bfloat16* xr, __nv_bfloat16* yr, int cols, float* partials)
{
    const Bf16s<W>* xv = reinterpret_cast<const Bf16s<W>*>(xr);
    Bf16s<W>* yv = reinterpret_cast<Bf16s<W>*>(yr);
    const int n = cols / W;

    float m = -CUDART_INF_F;
    for (int i = threadIdx.x; i < n; i += BLOCK) {
        const Bf16s<W> a = xv[i];
#pragma unroll
        for (int j = 0; j < W; ++j) m = fmaxf(m, __bfloat162float(a.v[j]));
    }
    m = block_max(m, partials);

    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += BLOCK) {
        const Bf16s<W> a = xv[i];
#pragma unroll
        for (int j = 0; j < W; ++j) s += expf(__bfloat162float(a.v[j]) - m);
    }
    s = block_sum(s, partials + WARPS);

    const float inv = 1.0f / s;
    for (int i = threadIdx.x; i < n; i += BLOCK) {
        Bf16s<W> a = xv[i];
#pragma unroll
        for (int j = 0; j < W; ++j) a.v[j] = __float2bfloat16(expf(__bfloat162float(a.v[j]) - m) * inv);
        yv[i] = a;
    }
}

#if CACHE_COLS > 0
// The row is read once into registers; cols % VEC == 0 and cols <= CACHE_VECS*BLOCK*VEC.
__device__ void softmax_cached(const __nv_bfloat16* xr, __nv_bfloat16* yr, int cols, float* partials)
{
    const Bf16s<VEC>* xv = reinterpret_cast<const Bf16s<VEC>*>(xr);
    Bf16s<VEC>* yv = reinterpret_cast<Bf16s<VEC>*>(yr);
    const int n = cols / VEC;

    // All loads are issued before the first use: CACHE_VECS*VEC*2 bytes in flight per thread.
    Bf16s<VEC> raw[CACHE_VECS];
#pragma unroll
    for (int k = 0; k < CACHE_VECS; ++k) {
        const int i = threadIdx.x + k * BLOCK;
        if (i < n) raw[k] = xv[i];
        else raw[k] = Bf16s<VEC>{};  // never used, but not left undefined
    }
    // Widened once. Slots past the row hold -inf, which neither wins the max nor adds to the
    // sum (exp = 0).
    float a[CACHE_VECS][VEC];
    float m = -CUDART_INF_F;
#pragma unroll
    for (int k = 0; k < CACHE_VECS; ++k) {
        const bool inside = threadIdx.x + k * BLOCK < n;
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
            a[k][j] = inside ? __bfloat162float(raw[k].v[j]) : -CUDART_INF_F;
            m = fmaxf(m, a[k][j]);
        }
    }
    m = block_max(m, partials);

    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < CACHE_VECS; ++k)
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
            a[k][j] = expf(a[k][j] - m);  // kept for the write: one exp per element
            s += a[k][j];
        }
    s = block_sum(s, partials + WARPS);

    const float inv = 1.0f / s;
#pragma unroll
    for (int k = 0; k < CACHE_VECS; ++k) {
        const int i = threadIdx.x + k * BLOCK;
        if (i < n) {
            Bf16s<VEC> out;
#pragma unroll
            for (int j = 0; j < VEC; ++j) out.v[j] = __float2bfloat16(a[k][j] * inv);
            yv[i] = out;
        }
    }
}
#endif

extern "C" __global__ void softmax(const __nv_bfloat16* x, __nv_bfloat16* y, int rows, int cols)
{
    __shared__ float partials[2 * WARPS];  // one array per reduction (max, sum)
    const int row = blockIdx.x;
    if (row >= rows) return;
    const __nv_bfloat16* xr = x + (long long)row * cols;
    __nv_bfloat16* yr = y + (long long)row * cols;

    const bool aligned = cols % VEC == 0;
#if CACHE_COLS > 0
    if (aligned && cols <= CACHE_VECS * BLOCK * VEC) {
        softmax_cached(xr, yr, cols, partials);
        return;
    }
#endif
    if (aligned) softmax_looped<VEC>(xr, yr, cols, partials);
    else softmax_looped<1>(xr, yr, cols, partials);
}

#endif
