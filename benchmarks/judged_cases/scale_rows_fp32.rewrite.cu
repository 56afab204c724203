// y = x * s[row]: a block a row with a loop over columns, against a flat grid of one element a thread (fp32): the rewrite (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void scale_flat(const float* x, const float* s, float* y, int rows, int cols)
{
    const size_t total = (size_t)rows * cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        y[i] = st(ld(x[i]) * ld(s[i / cols]));
}

extern "C" void scale_rows_fp32(const float* x, const float* s, float* y, int rows, int cols)
{
    scale_flat<<<4096, 256>>>(x, s, y, rows, cols);
}
