// Matrix multiply, FP32: C = A @ B with A (M x K), B (K x N), C (M x N), all row-major.
// The textbook shared-memory tiled kernel: each block computes a TILE x TILE tile of C, one
// element per thread, walking over K one TILE x TILE tile of A and of B at a time.
#ifndef TILE
#define TILE 16
#endif
static_assert(TILE * TILE <= 1024, "at most 1024 threads per block");

// kernel-lsp: launch gemm grid=(cdiv(N, TILE), cdiv(M, TILE)) block=(TILE, TILE)
// kernel-lsp: tune TILE=16,8,32

extern "C" __global__ void gemm(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;

    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Out-of-range elements are loaded as 0 so they add nothing.
        const int a_col = k0 + threadIdx.x;
        const int b_row = k0 + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && a_col < K) ? A[(long long)row * K + a_col] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (b_row < K && col < N) ? B[(long long)b_row * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[(long long)row * N + col] = acc;
}
