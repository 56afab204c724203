// a row's RMS norm on a stream: row scales a thread a row into scratch allocated each call, then an elementwise kernel, against one block a row (bf16): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16(v); }

__global__ void row_scales(const __nv_bfloat16* x, float* scale, int rows, int cols, float eps)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const __nv_bfloat16* xr = x + (size_t)r * cols;
    float ss = 0.0f;
    for (int j = 0; j < cols; ++j) ss += ld(xr[j]) * ld(xr[j]);
    scale[r] = rsqrtf(ss / cols + eps);
}

__global__ void apply_scales(const __nv_bfloat16* x, const float* scale, const __nv_bfloat16* w, __nv_bfloat16* y, int rows, int cols)
{
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * cols) return;
    y[i] = st(ld(x[i]) * scale[i / cols] * ld(w[i % cols]));
}

extern "C" void rmsnorm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int rows, int cols, float eps, cudaStream_t stream)
{
    float* scale = nullptr;
    cudaMalloc(&scale, (size_t)rows * sizeof(float));
    row_scales<<<(rows + 127) / 128, 128, 0, stream>>>(x, scale, rows, cols, eps);
    const size_t total = (size_t)rows * cols;
    apply_scales<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(x, scale, w, y, rows, cols);
    cudaFree(scale);
}
