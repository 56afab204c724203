// Layer norm, FP32: y[r][c] = (x[r][c] - mean_r) / sqrt(var_r + eps) * weight[c] + bias[c],
// with the biased variance (as torch.nn.functional.layer_norm).
// One block per row, three passes over the row: the mean, then the variance around it (two
// passes are more accurate than sum and sum of squares), then the output.
#ifndef BLOCK
#define BLOCK 256
#endif

// kernel-lsp: launch layernorm grid=rows block=BLOCK
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

extern "C" __global__ void layernorm(const float* x, const float* weight, const float* bias,
                                     float* y, int rows, int cols, float eps)
{
    __shared__ float buf[BLOCK];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;

    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) sum += xr[c];
    const float mean = block_sum(sum, buf) / cols;

    float sum_sq = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        const float d = xr[c] - mean;
        sum_sq += d * d;
    }
    const float rstd = rsqrtf(block_sum(sum_sq, buf) / cols + eps);

    for (int c = threadIdx.x; c < cols; c += BLOCK)
        yr[c] = (xr[c] - mean) * rstd * weight[c] + bias[c];
}
