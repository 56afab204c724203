// Matrix transpose, BF16: dst[c][r] = src[r][c] for a rows x cols row-major matrix.
// The textbook shared-memory version: a TILE x TILE tile is read with coalesced rows, stored in
// shared memory (one column of padding avoids bank conflicts) and written back with coalesced
// rows of the output. Each thread moves TILE / BLOCK_ROWS elements.
// PACK=2: 2-byte accesses waste half of each memory transaction slot, so a thread moves 2x2
// blocks instead, and the block's tile grows to (2*TILE) x (2*TILE): two adjacent rows of two
// adjacent columns read as two 4-byte bf16 pairs, transposed in registers and kept as one 8-byte
// word in shared memory, then written as two 4-byte pairs of two adjacent output rows. A tile row
// is then 4*TILE bytes: whole 128-byte lines from TILE=32 on. The pairs are aligned only when rows
// and cols are even; otherwise the same blocks move element by element.
#include <cuda_bf16.h>

#ifndef TILE
#define TILE 32
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif
#ifndef PACK
#define PACK 1
#endif
static_assert(BLOCK_ROWS <= TILE && TILE % BLOCK_ROWS == 0, "BLOCK_ROWS must divide TILE");
static_assert(TILE * BLOCK_ROWS <= 1024, "at most 1024 threads per block");
static_assert(PACK == 1 || PACK == 2, "PACK: 1 element or 2x2 elements per step");

// kernel-lsp: launch transpose grid=(cdiv(cols, TILE*PACK), cdiv(rows, TILE*PACK)) block=(TILE, BLOCK_ROWS)
// kernel-lsp: tune TILE=32,16,64 BLOCK_ROWS=8,4,16 PACK=1,2

#if PACK == 2
// A 2x2 block of the input, by columns: `left` is column c at rows (r, r + 1), `right` column c + 1;
// each is a pair of adjacent elements of one output row. One 8-byte shared access per block.
struct alignas(8) Block2x2 {
    __nv_bfloat162 left;
    __nv_bfloat162 right;
};
#endif

extern "C" __global__ void transpose(const __nv_bfloat16* src, __nv_bfloat16* dst, int rows, int cols)
{
#if PACK == 1
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
#else
    constexpr int STEPS = TILE / BLOCK_ROWS;  // row pairs (then column pairs) per thread
    constexpr int SIDE = 2 * TILE;           // elements per tile side
    // [column pair][row pair] of the tile. A row stride of TILE + 1 words of 8 bytes keeps the
    // read phase's stores (a warp walks down a column of blocks) free of bank conflicts; the write
    // phase reads along a row.
    __shared__ Block2x2 tile[TILE][TILE + 1];
    // Even sizes: every pair starts on a 4-byte boundary and a pair is either wholly inside or
    // wholly outside the matrix. The same for the whole grid, so the branch does not diverge.
    const bool paired = rows % 2 == 0 && cols % 2 == 0;
    const __nv_bfloat16 zero = __float2bfloat16(0.0f);

    const int c = blockIdx.x * SIDE + 2 * threadIdx.x;  // first of this thread's two columns
    Block2x2 blocks[STEPS];
    // All global loads first, then the shared stores: the loads of every step are in flight at once.
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
        const int k = threadIdx.y + s * BLOCK_ROWS;  // row pair in the tile
        const int r = blockIdx.y * SIDE + 2 * k;
        const long long at = (long long)r * cols + c;
        __nv_bfloat162 top = __halves2bfloat162(zero, zero), bottom = top;  // rows r and r + 1
        if (paired) {
            if (r < rows && c < cols) {
                top = *reinterpret_cast<const __nv_bfloat162*>(src + at);
                bottom = *reinterpret_cast<const __nv_bfloat162*>(src + at + cols);
            }
        } else {
            if (r < rows && c < cols) top.x = src[at];
            if (r < rows && c + 1 < cols) top.y = src[at + 1];
            if (r + 1 < rows && c < cols) bottom.x = src[at + cols];
            if (r + 1 < rows && c + 1 < cols) bottom.y = src[at + cols + 1];
        }
        blocks[s].left = __halves2bfloat162(top.x, bottom.x);
        blocks[s].right = __halves2bfloat162(top.y, bottom.y);
    }
#pragma unroll
    for (int s = 0; s < STEPS; ++s) tile[threadIdx.x][threadIdx.y + s * BLOCK_ROWS] = blocks[s];
    __syncthreads();

    // Swap the block's roles: this block now writes rows of the output (columns of the input),
    // two at a time, each thread a pair of adjacent output columns (input rows).
    const int out_c = blockIdx.y * SIDE + 2 * threadIdx.x;  // a row index of the input
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
        const int k = threadIdx.y + s * BLOCK_ROWS;  // column pair in the tile
        const int out_r = blockIdx.x * SIDE + 2 * k;  // a column index of the input
        const Block2x2 b = tile[k][threadIdx.x];
        const long long at = (long long)out_r * rows + out_c;
        if (paired) {
            if (out_r < cols && out_c < rows) {
                *reinterpret_cast<__nv_bfloat162*>(dst + at) = b.left;
                *reinterpret_cast<__nv_bfloat162*>(dst + at + rows) = b.right;
            }
        } else {
            if (out_r < cols && out_c < rows) dst[at] = b.left.x;
            if (out_r < cols && out_c + 1 < rows) dst[at + 1] = b.left.y;
            if (out_r + 1 < cols && out_c < rows) dst[at + rows] = b.right.x;
            if (out_r + 1 < cols && out_c + 1 < rows) dst[at + rows + 1] = b.right.y;
        }
    }
#endif
}
