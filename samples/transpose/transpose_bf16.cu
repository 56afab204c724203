// Matrix transpose, BF16: dst[c][r] = src[r][c] for a rows x cols row-major matrix.
// The textbook shared-memory version: a TILE x TILE tile is read with coalesced rows, stored in
// shared memory (one column of padding avoids bank conflicts) and written back with coalesced
// rows of the output. Each thread moves TILE / BLOCK_ROWS elements.
#include <cuda_bf16.h>

#ifndef TILE
#define TILE 32
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif
static_assert(BLOCK_ROWS <= TILE && TILE % BLOCK_ROWS == 0, "BLOCK_ROWS must divide TILE");
static_assert(TILE * BLOCK_ROWS <= 1024, "at most 1024 threads per block");

// kernel-lsp: launch transpose grid=(cdiv(cols, TILE), cdiv(rows, TILE)) block=(TILE, BLOCK_ROWS)
// kernel-lsp: tune TILE=32,16,64 BLOCK_ROWS=8,4,16

extern "C" __global__ void transpose(const __nv_bfloat16* src, __nv_bfloat16* dst, int rows, int cols)
{
    __shared__ __nv_bfloat16 tile[TILE][TILE + 1];

    const int c = blockIdx.x * TILE + threadIdx.x;
    for (int k = threadIdx.y; k < TILE; k += BLOCK_ROWS) {
        const int r = blockIdx.y * TILE + k;
        if (r < rows && c < cols) tile[k][threadIdx.x] = src[(long long)r * cols + c];
    }
    __syncthreads();

    // Swap the block's roles: this block now writes rows of the output (columns of the input).
    const int out_c = blockIdx.y * TILE + threadIdx.x;  // a row index of the input
    for (int k = threadIdx.y; k < TILE; k += BLOCK_ROWS) {
        const int out_r = blockIdx.x * TILE + k;  // a column index of the input
        if (out_r < cols && out_c < rows) dst[(long long)out_r * rows + out_c] = tile[threadIdx.x][k];
    }
}
