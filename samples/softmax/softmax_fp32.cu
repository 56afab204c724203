// Row softmax, FP32: y[r][c] = exp(x[r][c] - max_r) / sum_c exp(x[r][c] - max_r).
// The defaults are the naive kernel: one block per row, three passes over the row (max, sum of
// exponentials, write), with shared-memory tree reductions. Safe for any row length.
// The tunables switch to a tuned kernel (still one block per row, any row length):
// - VEC=4: 16-byte loads and stores. Only when cols % 4 == 0, since only then does every row
//   start 16-byte aligned (the buffers are); other rows take the scalar loop.
// - CACHE_COLS=4096: a row of up to CACHE_COLS columns is loaded once into registers
//   (CACHE_COLS / (BLOCK*VEC) vectors per thread), so x is read from DRAM once and the
//   exponentials are computed once; longer rows take the looped passes.
// - Either of them also replaces the tree reductions with warp shuffles (one barrier each).
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
// kernel-lsp: tune BLOCK=256,64,128,512,1024 VEC=1,4 CACHE_COLS=0,4096

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

extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols)
{
    __shared__ float buf[BLOCK];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;

    float m = -CUDART_INF_F;
    for (int c = threadIdx.x; c < cols; c += BLOCK) m = fmaxf(m, xr[c]);
    m = block_max(m, buf);

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) s += expf(xr[c] - m);
    s = block_sum(s, buf);

    const float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += BLOCK) yr[c] = expf(xr[c] - m) * inv;
}

#else  // ---- the tuned kernel ---------------------------------------------------------------

#define WARPS (BLOCK / 32)
// Vectors of VEC floats each thread keeps in registers: the row's first CACHE_VECS*BLOCK*VEC
// columns, the k-th vector of thread t at vector index t + k*BLOCK (coalesced per k).
#define CACHE_VECS ((CACHE_COLS + BLOCK * VEC - 1) / (BLOCK * VEC))

// W floats moved as one access (16 bytes at W=4); the address must be 4*W-byte aligned.
template <int W>
struct alignas(4 * W) Floats {
    float v[W];
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

// Three passes that re-read the row (mostly from L1/L2), W floats per access; W divides cols.
template <int W>
__device__ void softmax_looped(const float* xr, float* yr, int cols, float* partials)
{
    const Floats<W>* xv = reinterpret_cast<const Floats<W>*>(xr);
    Floats<W>* yv = reinterpret_cast<Floats<W>*>(yr);
    const int n = cols / W;

    float m = -CUDART_INF_F;
    for (int i = threadIdx.x; i < n; i += BLOCK) {
        const Floats<W> a = xv[i];
#pragma unroll
        for (int j = 0; j < W; ++j) m = fmaxf(m, a.v[j]);
    }
    m = block_max(m, partials);

    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += BLOCK) {
        const Floats<W> a = xv[i];
#pragma unroll
        for (int j = 0; j < W; ++j) s += expf(a.v[j] - m);
    }
    s = block_sum(s, partials + WARPS);

    const float inv = 1.0f / s;
    for (int i = threadIdx.x; i < n; i += BLOCK) {
        Floats<W> a = xv[i];
#pragma unroll
        for (int j = 0; j < W; ++j) a.v[j] = expf(a.v[j] - m) * inv;
        yv[i] = a;
    }
}

#if CACHE_COLS > 0
// The row is read once into registers; cols % VEC == 0 and cols <= CACHE_VECS*BLOCK*VEC.
__device__ void softmax_cached(const float* xr, float* yr, int cols, float* partials)
{
    const Floats<VEC>* xv = reinterpret_cast<const Floats<VEC>*>(xr);
    Floats<VEC>* yv = reinterpret_cast<Floats<VEC>*>(yr);
    const int n = cols / VEC;

    // All loads are issued before the first use: CACHE_VECS*VEC*4 bytes in flight per thread.
    // Slots past the row hold -inf, which neither wins the max nor adds to the sum (exp = 0).
    Floats<VEC> a[CACHE_VECS];
#pragma unroll
    for (int k = 0; k < CACHE_VECS; ++k) {
        const int i = threadIdx.x + k * BLOCK;
        if (i < n) {
            a[k] = xv[i];
        } else {
#pragma unroll
            for (int j = 0; j < VEC; ++j) a[k].v[j] = -CUDART_INF_F;
        }
    }

    float m = -CUDART_INF_F;
#pragma unroll
    for (int k = 0; k < CACHE_VECS; ++k)
#pragma unroll
        for (int j = 0; j < VEC; ++j) m = fmaxf(m, a[k].v[j]);
    m = block_max(m, partials);

    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < CACHE_VECS; ++k)
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
            a[k].v[j] = expf(a[k].v[j] - m);  // kept for the write: one exp per element
            s += a[k].v[j];
        }
    s = block_sum(s, partials + WARPS);

    const float inv = 1.0f / s;
#pragma unroll
    for (int k = 0; k < CACHE_VECS; ++k) {
        const int i = threadIdx.x + k * BLOCK;
        if (i < n) {
#pragma unroll
            for (int j = 0; j < VEC; ++j) a[k].v[j] *= inv;
            yv[i] = a[k];
        }
    }
}
#endif

extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols)
{
    __shared__ float partials[2 * WARPS];  // one array per reduction (max, sum)
    const int row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;

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
