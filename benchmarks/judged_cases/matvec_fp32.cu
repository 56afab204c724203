// y = A x: a thread a row (loads a row apart), against a warp a row (fp32): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void matvec_rows(const float* A, const float* x, float* y, int rows, int cols)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float acc = 0.0f;
    for (int j = 0; j < cols; ++j) acc += ld(A[(size_t)r * cols + j]) * ld(x[j]);
    y[r] = st(acc);
}

extern "C" void matvec_fp32(const float* A, const float* x, float* y, int rows, int cols)
{
    matvec_rows<<<(rows + 127) / 128, 128>>>(A, x, y, rows, cols);
}
