// A whole CUDA program, host code included, as nvcc would build it. NVRTC compiles device code
// only, so `#include <vector>`, `main` and `cudaMalloc` cannot compile here. Expected finding: one
// diagnostic that says the file has host code, and how to fix it: guard the host part with
// `#ifndef __CUDACC_RTC__ ... #endif`, or turn on the `-default-device` setting.
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
