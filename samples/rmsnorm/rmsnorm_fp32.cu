// RMSNorm, FP32: y[r][c] = x[r][c] / sqrt(mean_c(x[r][c]^2) + eps) * weight[c].
// One block per row: the block sums the squares (shared-memory tree reduction), then scales.
#ifndef BLOCK
#define BLOCK 256
#endif

// kernel-lsp: launch rmsnorm grid=rows block=BLOCK
// kernel-lsp: tune BLOCK=256,64,128,512,1024

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

extern "C" __global__ void rmsnorm(const float* x, const float* weight, float* y, int rows, int cols,
                                   float eps)
{
    __shared__ float buf[BLOCK];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;

    float sum_sq = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        const float v = xr[c];
        sum_sq += v * v;
    }
    sum_sq = block_sum(sum_sq, buf);

    const float scale = rsqrtf(sum_sq / cols + eps);
    for (int c = threadIdx.x; c < cols; c += BLOCK)
        yr[c] = xr[c] * scale * weight[c];
}
