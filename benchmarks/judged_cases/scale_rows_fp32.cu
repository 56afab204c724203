// y = x * s[row]: a block a row with a loop over columns, against a flat grid of one element a thread (fp32): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void scale_by_row(const float* x, const float* s, float* y, int rows, int cols)
{
    const int r = blockIdx.x;
    const float f = ld(s[r]);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) y[(size_t)r * cols + j] = st(ld(x[(size_t)r * cols + j]) * f);
}

extern "C" void scale_rows_fp32(const float* x, const float* s, float* y, int rows, int cols)
{
    scale_by_row<<<rows, 64>>>(x, s, y, rows, cols);
}
