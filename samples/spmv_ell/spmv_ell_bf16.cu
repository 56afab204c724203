// Sparse matrix-vector product, ELLPACK, BF16 in and out: y = A x for a rows x rows sparse matrix A stored
// as `width` slots per row, column-major (slot k of row r at k * rows + r) so that consecutive
// threads read consecutive addresses. An unused slot has col_idx = -1 (its value is ignored).
// Loads are widened to float, the math is done in float, and each result is rounded once.
// One thread per row (ITEMS rows with the tunable, BLOCK rows apart).
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

// kernel-lsp: launch spmv_ell grid=cdiv(rows, BLOCK*ITEMS) block=BLOCK
// kernel-lsp: tune BLOCK=256,64,128,512,1024 ITEMS=1,2,4

extern "C" __global__ void spmv_ell(const int* col_idx, const __nv_bfloat16* values, const __nv_bfloat16* x, __nv_bfloat16* y,
                                    int rows, int width)
{
    const int first = blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int row = first + k * BLOCK;
        if (row >= rows) continue;
        float sum = 0.0f;
        for (int slot = 0; slot < width; ++slot) {
            const long long at = (long long)slot * rows + row;
            const int col = col_idx[at];
            if (col >= 0) sum += __bfloat162float(values[at]) * __bfloat162float(x[col]);
        }
        y[row] = __float2bfloat16(sum);
    }
}
