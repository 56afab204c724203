// Row softmax, BF16 in and out, float math: y[r][c] = exp(x[r][c] - max_r) / sum_c exp(...).
// One block per row, three passes over the row (max, sum of exponentials, write), with
// shared-memory tree reductions. Safe for any row length.
#include <cuda_bf16.h>
#include <math_constants.h>  // CUDART_INF_F

#ifndef BLOCK
#define BLOCK 256
#endif

// kernel-lsp: launch softmax grid=rows block=BLOCK
// kernel-lsp: tune BLOCK=256,64,128,512,1024

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
