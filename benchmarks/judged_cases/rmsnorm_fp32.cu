// a row's RMS norm on a stream: row scales a thread a row into scratch allocated each call, then an elementwise kernel, against one block a row (fp32): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void row_scales(const float* x, float* scale, int rows, int cols, float eps)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (size_t)r * cols;
    float ss = 0.0f;
    for (int j = 0; j < cols; ++j) ss += ld(xr[j]) * ld(xr[j]);
    scale[r] = rsqrtf(ss / cols + eps);
}

__global__ void apply_scales(const float* x, const float* scale, const float* w, float* y, int rows, int cols)
{
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * cols) return;
    y[i] = st(ld(x[i]) * scale[i / cols] * ld(w[i % cols]));
}

extern "C" void rmsnorm_fp32(const float* x, const float* w, float* y, int rows, int cols, float eps, cudaStream_t stream)
{
    float* scale = nullptr;
    cudaMalloc(&scale, (size_t)rows * sizeof(float));
    row_scales<<<(rows + 127) / 128, 128, 0, stream>>>(x, scale, rows, cols, eps);
    const size_t total = (size_t)rows * cols;
    apply_scales<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(x, scale, w, y, rows, cols);
    cudaFree(scale);
}
