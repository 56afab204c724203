// The original: c = a + b, each of the first m threads also reading pad[i] (never 12345.678 on
// the spec's inputs, so the result is the add's).
#include <cuda_runtime.h>

__global__ void padded_add_kernel(const float* a, const float* b, const float* pad, float* c, int n, int m)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = a[i] + b[i];
    if (i < m && pad[i] == 12345.678f) v += 1.0f;
    c[i] = v;
}

extern "C" void padded_add(const float* a, const float* b, const float* pad, float* c, int n, int m)
{
    padded_add_kernel<<<(n + 255) / 256, 256>>>(a, b, pad, c, n, m);
}
