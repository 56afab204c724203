// A whole CUDA program, host code included, as nvcc would build it. With the default compiler
// (auto) it goes to nvcc and is clean. With `--compiler nvrtc` (NVRTC compiles device code only)
// the expected finding is one diagnostic that says the file has host code, and how to fix it:
// guard the host part with `#ifndef __CUDACC_RTC__ ... #endif`, or let nvcc compile it.
#include <vector>

__global__ void add_one(float* x, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}

int main()
{
    const int n = 1 << 20;
    std::vector<float> host(n, 1.0f);
    float* device = nullptr;
    cudaMalloc(&device, n * sizeof(float));
    cudaMemcpy(device, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    add_one<<<(n + 255) / 256, 256>>>(device, n);
    cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(device);
    return host[0] == 2.0f ? 0 : 1;
}
