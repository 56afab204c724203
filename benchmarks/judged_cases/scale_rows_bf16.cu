// y = x * s[row]: a block a row with a loop over columns, against a flat grid of one element a thread (bf16): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16(v); }

__global__ void scale_by_row(const __nv_bfloat16* x, const __nv_bfloat16* s, __nv_bfloat16* y, int rows, int cols)
{
    const int r = blockIdx.x;
    const float f = ld(s[r]);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) y[(size_t)r * cols + j] = st(ld(x[(size_t)r * cols + j]) * f);
}

extern "C" void scale_rows_bf16(const __nv_bfloat16* x, const __nv_bfloat16* s, __nv_bfloat16* y, int rows, int cols)
{
    scale_by_row<<<rows, 64>>>(x, s, y, rows, cols);
}
