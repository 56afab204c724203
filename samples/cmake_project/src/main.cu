// Blurs a step and prints the edge.
#include <cstdio>
#include <vector>

#include "blur.h"

int main()
{
    const int n = 1 << 16;
    std::vector<float> host(n);
    for (int i = 0; i < n; ++i) host[i] = i < n / 2 ? 0.0f : 1.0f;

    float *in = nullptr, *out = nullptr;
    if (cudaMalloc(&in, n * sizeof(float)) != cudaSuccess || cudaMalloc(&out, n * sizeof(float)) != cudaSuccess) {
        std::fprintf(stderr, "cudaMalloc failed\n");
        return 1;
    }
    cudaMemcpy(in, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    const cudaError_t status = box_blur(in, out, n, nullptr);
    cudaMemcpy(host.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(in);
    cudaFree(out);
    if (status != cudaSuccess) {
        std::fprintf(stderr, "box_blur: %s\n", cudaGetErrorString(status));
        return 1;
    }
    std::printf("edge: %.2f %.2f %.2f\n", host[n / 2 - 1], host[n / 2], host[n / 2 + 1]);
    return 0;
}
