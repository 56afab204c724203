// Sparse matrix-vector product, CSR, FP32: y = A x for a rows x rows sparse matrix A
// given by row_ptr (rows + 1 offsets), col_idx and values (one entry per stored element).
// THREADS_PER_ROW threads share a row: each sums every THREADS_PER_ROW-th element of it, then
// the group adds up its partial sums with warp shuffles. THREADS_PER_ROW=1 (the default) is the
// textbook one-thread-per-row ("scalar") kernel; 32 is the one-warp-per-row ("vector") kernel.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef THREADS_PER_ROW
#define THREADS_PER_ROW 1
#endif
static_assert(THREADS_PER_ROW >= 1 && THREADS_PER_ROW <= 32 &&
                  (THREADS_PER_ROW & (THREADS_PER_ROW - 1)) == 0,
              "THREADS_PER_ROW must be a power of two up to 32");
static_assert(BLOCK % 32 == 0, "BLOCK must be whole warps");

// kernel-lsp: launch spmv_csr grid=cdiv(rows*THREADS_PER_ROW, BLOCK) block=BLOCK
// kernel-lsp: tune BLOCK=256,128,512 THREADS_PER_ROW=1,2,4,8,16,32

extern "C" __global__ void spmv_csr(const int* row_ptr, const int* col_idx, const float* values,
                                    const float* x, float* y, int rows)
{
    const int thread = blockIdx.x * BLOCK + threadIdx.x;
    const int row = thread / THREADS_PER_ROW;
    const int lane = thread % THREADS_PER_ROW;

    // Threads past the last row still take part in the shuffles below, with nothing to add.
    float sum = 0.0f;
    if (row < rows) {
        for (int j = row_ptr[row] + lane; j < row_ptr[row + 1]; j += THREADS_PER_ROW)
            sum += values[j] * x[col_idx[j]];
    }
    for (int offset = THREADS_PER_ROW / 2; offset > 0; offset /= 2)
        sum += __shfl_down_sync(0xffffffffu, sum, offset, THREADS_PER_ROW);
    if (row < rows && lane == 0) y[row] = sum;
}
