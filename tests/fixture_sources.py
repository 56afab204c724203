"""CUDA sources several test modules share."""

VADD = """\
// kernel-lsp: launch vadd grid=cdiv(n, 256) block=256
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""
