// y = x / sqrt(sum(x^2) + eps) in ONE cooperative launch: every block adds its share of x^2, the
// whole grid synchronises (grid.sync()), then every block reads the block sums and scales its
// share. A grid-wide barrier needs every block resident at once, so the launcher sizes the grid
// from the occupancy API and launches with cudaLaunchCooperativeKernel.
#include <cuda_runtime.h>
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

#define THREADS 256

__global__ void l2_normalize_kernel(const float* x, float* y, float* block_sums, int n, float eps)
{
    cg::grid_group grid = cg::this_grid();
    __shared__ float partial[THREADS];
    __shared__ float scale;
    const int stride = gridDim.x * blockDim.x;
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) s += x[i] * x[i];
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) partial[threadIdx.x] += partial[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) block_sums[blockIdx.x] = partial[0];
    grid.sync();
    // Every block adds the block sums in the same order, so all of them scale by the same value.
    if (threadIdx.x == 0) {
        float total = 0.0f;
        for (int b = 0; b < gridDim.x; ++b) total += block_sums[b];
        scale = rsqrtf(total + eps);
    }
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = x[i] * scale;
}

extern "C" int l2_normalize(const float* x, float* y, int n, float eps)
{
    int device = 0, cooperative = 0, sms = 0, per_sm = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device);
    if (!cooperative) return (int)cudaErrorNotSupported;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, l2_normalize_kernel, THREADS, 0);
    int blocks = sms * per_sm;
    const int needed = (n + THREADS - 1) / THREADS;
    if (blocks > needed) blocks = needed;  // no idle blocks for small inputs
    if (blocks < 1) blocks = 1;
    float* block_sums = nullptr;
    cudaError_t err = cudaMalloc(&block_sums, blocks * sizeof(float));
    if (err != cudaSuccess) return (int)err;
    void* args[] = {(void*)&x, (void*)&y, (void*)&block_sums, (void*)&n, (void*)&eps};
    err = cudaLaunchCooperativeKernel((void*)l2_normalize_kernel, dim3(blocks), dim3(THREADS), args, 0, 0);
    cudaFree(block_sums);
    return (int)err;
}
