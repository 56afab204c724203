// Broken on purpose: a typo in a variable name. Expected finding:
//   error.cu(11): error: identifier "idx" is undefined
#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void scale(const float* x, float* y, float factor, int n)
{
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) {
        y[i] = factor * x[idx];
    }
}
