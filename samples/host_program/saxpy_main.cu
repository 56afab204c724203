// A whole CUDA program as cuda-samples writes one: host and device code in one file, a `main` that
// allocates, copies, launches with <<<...>>>, checks every runtime call and verifies the result.
// Built as it stands with `nvcc saxpy_main.cu -o saxpy`; kernel-lsp checks it with nvcc (the file
// has host code), and shows the resources of `saxpy` and of each `scale<T>` instance.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

// Every runtime call goes through this, as helper_cuda.h's checkCudaErrors does.
#define CHECK_CUDA(call)                                                                      \
    do {                                                                                      \
        const cudaError_t status_ = (call);                                                   \
        if (status_ != cudaSuccess) {                                                         \
            std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,          \
                         cudaGetErrorString(status_));                                        \
            std::exit(EXIT_FAILURE);                                                          \
        }                                                                                     \
    } while (0)

// With a GPU, kernel-lsp verifies and times both kernels against saxpy_main.spec.py:
// kernel-lsp: launch saxpy grid=cdiv(n, 256) block=256
__global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// kernel-lsp: launch scale grid=cdiv(n, 256) block=256
template <typename T>
__global__ void scale(T* data, T factor, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        data[i] *= factor;
    }
}

int main(int argc, char** argv)
{
    const int n = argc > 1 ? std::atoi(argv[1]) : 1 << 20;
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    std::vector<float> x(n, 1.0f), y(n, 2.0f);

    float *d_x = nullptr, *d_y = nullptr;
    CHECK_CUDA(cudaMalloc(&d_x, bytes));
    CHECK_CUDA(cudaMalloc(&d_y, bytes));
    CHECK_CUDA(cudaMemcpy(d_x, x.data(), bytes, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(d_y, y.data(), bytes, cudaMemcpyHostToDevice));

    const int block = 256;
    const int grid = (n + block - 1) / block;
    saxpy<<<grid, block>>>(3.0f, d_x, d_y, n);
    CHECK_CUDA(cudaGetLastError());
    scale<float><<<grid, block>>>(d_y, 0.5f, n);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());

    CHECK_CUDA(cudaMemcpy(y.data(), d_y, bytes, cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < n; ++i) wrong += y[i] != 2.5f;
    std::printf("%s: %d of %d wrong\n", wrong ? "FAILED" : "PASSED", wrong, n);

    CHECK_CUDA(cudaFree(d_x));
    CHECK_CUDA(cudaFree(d_y));
    return wrong ? EXIT_FAILURE : EXIT_SUCCESS;
}
