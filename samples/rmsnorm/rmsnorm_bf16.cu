// RMSNorm, BF16 in and out: y[r][c] = x[r][c] / sqrt(mean_c(x[r][c]^2) + eps) * weight[c].
// Loads are widened to float, the math is done in float, and each result is rounded once.
// The defaults are the naive kernel: one block per row, the block sums the squares
// (shared-memory tree reduction), then scales, reading the row twice.
// The tunables switch to a tuned kernel (still one block per row, any row length):
// - VEC=8: 16-byte loads and stores (8 bf16). Only when cols % 8 == 0, since only then does
//   every row start 16-byte aligned (the buffers are); other rows take the scalar loop.
// - CACHE_COLS=4096: a row of up to CACHE_COLS columns is loaded once into registers
//   (CACHE_COLS / (BLOCK*VEC) vectors per thread), so x is read from DRAM once; longer rows
//   take the looped passes.
// - Either of them also replaces the tree reduction with warp shuffles (one barrier).
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef CACHE_COLS
#define CACHE_COLS 0
#endif

// kernel-lsp: launch rmsnorm grid=rows block=BLOCK
// kernel-lsp: tune BLOCK=256,64,128,512,1024 VEC=1,8 CACHE_COLS=0,4096

#if VEC == 1 && CACHE_COLS == 0  // ---- the naive kernel -------------------------------------

// Tree reduction of one value per thread; the block size must be a power of two.
__device__ float block_sum(float value, float* buf)
{
    buf[threadIdx.x] = value;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    const float result = buf[0];
    __syncthreads();  // buf may be reused right after
    return result;
}

extern "C" __global__ void rmsnorm(const __nv_bfloat16* x, const __nv_bfloat16* weight, __nv_bfloat16* y, int rows, int cols,
                                   float eps)
{
    __shared__ float buf[BLOCK];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const __nv_bfloat16* xr = x + (long long)row * cols;
    __nv_bfloat16* yr = y + (long long)row * cols;

    float sum_sq = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        const float v = __bfloat162float(xr[c]);
        sum_sq += v * v;
    }
    sum_sq = block_sum(sum_sq, buf);

    const float scale = rsqrtf(sum_sq / cols + eps);
    for (int c = threadIdx.x; c < cols; c += BLOCK)
        yr[c] = __float2bfloat16(__bfloat162float(xr[c]) * scale * __bfloat162float(weight[c]));
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

__device__ float warp_sum(float v)
{
    for (int lane_mask = 16; lane_mask > 0; lane_mask /= 2) v += __shfl_xor_sync(0xffffffffu, v, lane_mask);
    return v;
}

// Each warp reduces in registers and its lane 0 leaves one partial in `partials` (WARPS floats);
// after the one barrier every warp reduces the partials itself, so all threads get the result.
__device__ float block_sum(float value, float* partials)
{
    value = warp_sum(value);
    if (threadIdx.x % 32 == 0) partials[threadIdx.x / 32] = value;
    __syncthreads();
    return warp_sum(threadIdx.x % 32 < WARPS ? partials[threadIdx.x % 32] : 0.0f);
}

// Two passes that re-read the row (mostly from L1/L2), W values per access; W divides cols.
template <int W>
__device__ void rmsnorm_looped(const __nv_bfloat16* xr, const __nv_bfloat16* weight, __nv_bfloat16* yr, int cols,
                               float eps, float* partials)
{
    const Bf16s<W>* xv = reinterpret_cast<const Bf16s<W>*>(xr);
    const Bf16s<W>* wv = reinterpret_cast<const Bf16s<W>*>(weight);
    Bf16s<W>* yv = reinterpret_cast<Bf16s<W>*>(yr);
    const int n = cols / W;

    float sum_sq = 0.0f;
    for (int i = threadIdx.x; i < n; i += BLOCK) {
        const Bf16s<W> a = xv[i];
#pragma unroll
        for (int j = 0; j < W; ++j) {
            const float v = __bfloat162float(a.v[j]);
            sum_sq += v * v;
        }
    }
    const float scale = rsqrtf(block_sum(sum_sq, partials) / cols + eps);

    for (int i = threadIdx.x; i < n; i += BLOCK) {
        Bf16s<W> a = xv[i];
        const Bf16s<W> w = wv[i];
#pragma unroll
        for (int j = 0; j < W; ++j)
            a.v[j] = __float2bfloat16(__bfloat162float(a.v[j]) * scale * __bfloat162float(w.v[j]));
        yv[i] = a;
    }
}

#if CACHE_COLS > 0
// The row is read once into registers; cols % VEC == 0 and cols <= CACHE_VECS*BLOCK*VEC.
__device__ void rmsnorm_cached(const __nv_bfloat16* xr, const __nv_bfloat16* weight, __nv_bfloat16* yr, int cols,
                               float eps, float* partials)
{
    const Bf16s<VEC>* xv = reinterpret_cast<const Bf16s<VEC>*>(xr);
    const Bf16s<VEC>* wv = reinterpret_cast<const Bf16s<VEC>*>(weight);
    Bf16s<VEC>* yv = reinterpret_cast<Bf16s<VEC>*>(yr);
    const int n = cols / VEC;

    // All loads are issued before the first use: CACHE_VECS*VEC*2 bytes in flight per thread.
    // The row stays in bf16 (half the registers); slots past the row hold 0, which adds
    // nothing to the sum of squares.
    Bf16s<VEC> a[CACHE_VECS];
#pragma unroll
    for (int k = 0; k < CACHE_VECS; ++k) {
        const int i = threadIdx.x + k * BLOCK;
        if (i < n) a[k] = xv[i];
        else a[k] = Bf16s<VEC>{};
    }

    float sum_sq = 0.0f;
#pragma unroll
    for (int k = 0; k < CACHE_VECS; ++k)
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
            const float v = __bfloat162float(a[k].v[j]);
            sum_sq += v * v;
        }
    const float scale = rsqrtf(block_sum(sum_sq, partials) / cols + eps);

    // The weight row is small and shared by all rows: it comes from L2 (or L1), not DRAM.
#pragma unroll
    for (int k = 0; k < CACHE_VECS; ++k) {
        const int i = threadIdx.x + k * BLOCK;
        if (i < n) {
            const Bf16s<VEC> w = wv[i];
#pragma unroll
            for (int j = 0; j < VEC; ++j)
                a[k].v[j] = __float2bfloat16(__bfloat162float(a[k].v[j]) * scale * __bfloat162float(w.v[j]));
            yv[i] = a[k];
        }
    }
}
#endif

extern "C" __global__ void rmsnorm(const __nv_bfloat16* x, const __nv_bfloat16* weight, __nv_bfloat16* y, int rows, int cols,
                                   float eps)
{
    __shared__ float partials[WARPS];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const __nv_bfloat16* xr = x + (long long)row * cols;
    __nv_bfloat16* yr = y + (long long)row * cols;

    const bool aligned = cols % VEC == 0;
#if CACHE_COLS > 0
    if (aligned && cols <= CACHE_VECS * BLOCK * VEC) {
        rmsnorm_cached(xr, weight, yr, cols, eps, partials);
        return;
    }
#endif
    if (aligned) rmsnorm_looped<VEC>(xr, weight, yr, cols, eps, partials);
    else rmsnorm_looped<1>(xr, weight, yr, cols, eps, partials);
}

#endif
