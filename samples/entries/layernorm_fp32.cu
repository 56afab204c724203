// Layer norm over the rows of x (rows x cols, FP32), as a launcher with host steps between three
// kernels: the row means, then (after the launcher zeroes the accumulator) the sums of squared
// deviations, then the normalisation. The temporaries are the launcher's own (cudaMalloc and
// cudaFree inside the call), and 1/cols is computed once on the host.
//   y[r][j] = (x[r][j] - mean[r]) / sqrt(var[r] + eps) * gamma[j] + beta[j]
#include <cuda_runtime.h>

#define THREADS 256

// One block per row: the row's sum, reduced in shared memory (THREADS is a power of two).
__global__ void row_mean_kernel(const float* x, float* mean, int cols, float inv_cols)
{
    __shared__ float partial[THREADS];
    const float* row = x + (size_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += row[j];
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) mean[blockIdx.x] = partial[0] * inv_cols;
}

// blockIdx.y is the row, blockIdx.x a chunk of THREADS columns: each block adds its chunk's
// squared deviations to the row's accumulator, which the launcher zeroed.
__global__ void row_variance_kernel(const float* x, const float* mean, float* var_sum, int cols)
{
    __shared__ float partial[THREADS];
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    float d = 0.0f;
    if (j < cols) {
        d = x[(size_t)blockIdx.y * cols + j] - mean[blockIdx.y];
        d *= d;
    }
    partial[threadIdx.x] = d;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(&var_sum[blockIdx.y], partial[0]);
}

__global__ void normalize_kernel(const float* x, const float* mean, const float* var_sum,
                                 const float* gamma, const float* beta, float* y, int cols,
                                 float inv_cols, float eps)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    const int r = blockIdx.y;
    const float rstd = rsqrtf(var_sum[r] * inv_cols + eps);
    const size_t at = (size_t)r * cols + j;
    y[at] = (x[at] - mean[r]) * rstd * gamma[j] + beta[j];
}

extern "C" int layernorm_fp32(const float* x, const float* gamma, const float* beta, float* y,
                              int rows, int cols, float eps)
{
    if (rows <= 0 || cols <= 0) return 0;
    float* mean = nullptr;
    float* var_sum = nullptr;
    cudaError_t err = cudaMalloc(&mean, rows * sizeof(float));
    if (err != cudaSuccess) return (int)err;
    err = cudaMalloc(&var_sum, rows * sizeof(float));
    if (err != cudaSuccess) {
        cudaFree(mean);
        return (int)err;
    }
    const float inv_cols = 1.0f / (float)cols;  // a host step: computed once, passed to two kernels
    row_mean_kernel<<<rows, THREADS>>>(x, mean, cols, inv_cols);
    cudaMemset(var_sum, 0, rows * sizeof(float));  // a host step between kernels
    const dim3 grid((cols + THREADS - 1) / THREADS, rows);
    row_variance_kernel<<<grid, THREADS>>>(x, mean, var_sum, cols);
    normalize_kernel<<<grid, THREADS>>>(x, mean, var_sum, gamma, beta, y, cols, inv_cols, eps);
    err = cudaGetLastError();
    cudaFree(mean);
    cudaFree(var_sum);
    return (int)err;
}
