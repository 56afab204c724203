// The honest rewrite: the same add, without reading pad (it never changed the result): about
// 1.10x less memory traffic.
#include <cuda_runtime.h>

__global__ void add_kernel(const float* a, const float* b, float* c, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" void padded_add(const float* a, const float* b, const float* pad, float* c, int n, int m)
{
    add_kernel<<<(n + 255) / 256, 256>>>(a, b, c, n);
}
