// Vector add, BF16, in the shape benchmark suites ship their kernels: a naive kernel and the
// extern "C" launcher a harness calls with device pointers. The spec names the launcher
// (`Spec(entry="vector_add_bf16")`), so kernel-lsp runs it exactly as the harness does.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdio>

__global__ void vector_add_bf16_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b,
                                       __nv_bfloat16* c, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

extern "C" void vector_add_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c,
                                int n)
{
    const int threadsPerBlock = 256;
    const int blocks = (n + threadsPerBlock - 1) / threadsPerBlock;
    vector_add_bf16_kernel<<<blocks, threadsPerBlock>>>(a, b, c, n);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) fprintf(stderr, "vector_add_bf16: %s\n", cudaGetErrorString(err));
}
