// y = x * s[row]: a block a row with a loop over columns, against a flat grid of one element a thread (bf16): the rewrite (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16(v); }

__global__ void scale_flat(const __nv_bfloat16* x, const __nv_bfloat16* s, __nv_bfloat16* y, int rows, int cols)
{
    const size_t total = (size_t)rows * cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        y[i] = st(ld(x[i]) * ld(s[i / cols]));
}

extern "C" void scale_rows_bf16(const __nv_bfloat16* x, const __nv_bfloat16* s, __nv_bfloat16* y, int rows, int cols)
{
    scale_flat<<<4096, 256>>>(x, s, y, rows, cols);
}
