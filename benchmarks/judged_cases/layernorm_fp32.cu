// a row's layer norm: row statistics a thread a row into scratch allocated each call, then an elementwise kernel, against one block a row (fp32): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void row_stats(const float* x, float* stats, int rows, int cols, float eps)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (size_t)r * cols;
    float mean = 0.0f;
    for (int j = 0; j < cols; ++j) mean += ld(xr[j]);
    mean /= cols;
    float var = 0.0f;
    for (int j = 0; j < cols; ++j) {
        const float d = ld(xr[j]) - mean;
        var += d * d;
    }
    stats[2 * r] = mean;
    stats[2 * r + 1] = rsqrtf(var / cols + eps);
}

__global__ void normalize(const float* x, const float* stats, const float* gamma, const float* beta, float* y, int rows, int cols)
{
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * cols) return;
    const int r = (int)(i / cols), c = (int)(i % cols);
    y[i] = st((ld(x[i]) - stats[2 * r]) * stats[2 * r + 1] * ld(gamma[c]) + ld(beta[c]));
}

extern "C" void layernorm_fp32(const float* x, const float* gamma, const float* beta, float* y, int rows, int cols, float eps)
{
    float* stats = nullptr;
    cudaMalloc(&stats, 2 * (size_t)rows * sizeof(float));
    row_stats<<<(rows + 127) / 128, 128>>>(x, stats, rows, cols, eps);
    const size_t total = (size_t)rows * cols;
    normalize<<<(unsigned)((total + 255) / 256), 256>>>(x, stats, gamma, beta, y, rows, cols);
    cudaFree(stats);
}
