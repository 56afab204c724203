// C = A B, fp32 accumulation: a thread an output, against 16x16 tiles through shared memory (the milliseconds end) (fp32): the original (benchmarks/make_judged_cases.py).
#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }

__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N, int K)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += ld(A[(size_t)row * K + k]) * ld(B[(size_t)k * N + col]);
    C[(size_t)row * N + col] = st(acc);
}

extern "C" void matmul_fp32(const float* A, const float* B, float* C, int M, int N, int K)
{
    const dim3 block(16, 16);
    const dim3 grid((N + 15) / 16, (M + 15) / 16);
    matmul_naive<<<grid, block>>>(A, B, C, M, N, K);
}
