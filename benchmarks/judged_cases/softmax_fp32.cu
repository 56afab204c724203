// a row's softmax: a thread a row (three passes, loads a row apart), against a block a row (fp32): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void softmax_rows(const float* x, float* y, int rows, int cols)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (size_t)r * cols;
    float* yr = y + (size_t)r * cols;
    float m = -3.4e38f;
    for (int j = 0; j < cols; ++j) m = fmaxf(m, ld(xr[j]));
    float s = 0.0f;
    for (int j = 0; j < cols; ++j) s += expf(ld(xr[j]) - m);
    for (int j = 0; j < cols; ++j) yr[j] = st(expf(ld(xr[j]) - m) / s);
}

extern "C" void softmax_fp32(const float* x, float* y, int rows, int cols)
{
    softmax_rows<<<(rows + 127) / 128, 128>>>(x, y, rows, cols);
}
