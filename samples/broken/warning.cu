// Compiles, with a warning on purpose: `unused` is declared and never read. Expected finding:
//   warning.cu(10): warning #177-D: variable "unused" was declared but never referenced
#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void scale(const float* x, float* y, float factor, int n)
{
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    int unused;
    if (i < n) {
        y[i] = factor * x[i];
    }
}
