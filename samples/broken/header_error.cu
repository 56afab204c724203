// Broken on purpose through its header: broken_header.cuh has a typo. Expected findings:
//   broken_header.cuh(6): error: identifier "flaot" is undefined
//   and the same error shown at line 4 below, the #include line.
#include "broken_header.cuh"

extern "C" __global__ void square(const float* x, float* y, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = squared(x[i]);
}
