// y = A x: a thread a row (loads a row apart), against a warp a row (bf16): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16(v); }

__global__ void matvec_rows(const __nv_bfloat16* A, const __nv_bfloat16* x, __nv_bfloat16* y, int rows, int cols)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float acc = 0.0f;
    for (int j = 0; j < cols; ++j) acc += ld(A[(size_t)r * cols + j]) * ld(x[j]);
    y[r] = st(acc);
}

extern "C" void matvec_bf16(const __nv_bfloat16* A, const __nv_bfloat16* x, __nv_bfloat16* y, int rows, int cols)
{
    matvec_rows<<<(rows + 127) / 128, 128>>>(A, x, y, rows, cols);
}
