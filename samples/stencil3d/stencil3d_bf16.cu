// 3-D 7-point stencil (one Jacobi step of the heat equation), BF16 in and out, on an nz x ny x nx grid
// (x fastest):
//   dst = 0.4 * center + 0.1 * (the six face neighbours),
// where a neighbour outside the grid counts as 0 (a fixed zero boundary).
// Loads are widened to float, the math is done in float, and each result is rounded once.
// Default (VEC=1, ITEMS=1): one thread per grid point, BX x BY threads per block in an x-y plane,
// one plane per grid z; neighbours come from the caches. Tuned (VEC or ITEMS > 1): each thread
// owns VEC consecutive points of ITEMS consecutive planes (2.5-D blocking); see the second kernel.
#include <cuda_bf16.h>

#ifndef BX
#define BX 32
#endif
#ifndef BY
#define BY 8
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
static_assert(BX * BY <= 1024, "at most 1024 threads per block");
static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC bf16 make one 2, 4, 8 or 16-byte access");
static_assert(ITEMS >= 1, "ITEMS planes per thread");

// kernel-lsp: launch stencil3d grid=(cdiv(nx, BX * VEC), cdiv(ny, BY), cdiv(nz, ITEMS)) block=(BX, BY)
// kernel-lsp: tune BX=32,64 BY=8,4 VEC=1,8 ITEMS=1,2,4

#if VEC == 1 && ITEMS == 1

extern "C" __global__ void stencil3d(const __nv_bfloat16* src, __nv_bfloat16* dst, int nz, int ny, int nx)
{
    const int x = blockIdx.x * BX + threadIdx.x;
    const int y = blockIdx.y * BY + threadIdx.y;
    const int z = blockIdx.z;
    if (x >= nx || y >= ny || z >= nz) return;
    const long long plane = (long long)nx * ny;
    const long long at = z * plane + (long long)y * nx + x;
    float neighbours = 0.0f;
    if (x > 0) neighbours += __bfloat162float(src[at - 1]);
    if (x + 1 < nx) neighbours += __bfloat162float(src[at + 1]);
    if (y > 0) neighbours += __bfloat162float(src[at - nx]);
    if (y + 1 < ny) neighbours += __bfloat162float(src[at + nx]);
    if (z > 0) neighbours += __bfloat162float(src[at - plane]);
    if (z + 1 < nz) neighbours += __bfloat162float(src[at + plane]);
    dst[at] = __float2bfloat16(0.4f * __bfloat162float(src[at]) + 0.1f * neighbours);
}

#else

// The thread loads planes z0-1 .. z0+ITEMS of its VEC columns before any math: ITEMS+2
// independent loads in flight (bytes in flight are what a memory-bound kernel needs), each plane
// read once per thread, the z-neighbours being registers. The y-neighbours are the points of the
// threads above and below, shared through one shared-memory tile per plane (the rows above and
// below the block loaded by its first and last thread rows); the x-neighbours come from the
// lanes beside it by warp shuffle, lanes 0 and 31 loading the one point past their warp's edge.
// The kernel runs close to the SMs' instruction-issue rate, so each load costs one predicate and
// one address add (offsets step a plane at a time), not a full bounds check and index product.
static_assert(BX % 32 == 0, "a warp must be 32 consecutive threads of one row for the shuffles");

// VEC bf16 kept packed two to a 32-bit register (the first point in the low half, as in memory),
// so the ITEMS+2 planes cost VEC/2 registers each; they are widened to float only when used. A row
// starts VEC-aligned only when nx % VEC == 0 (the buffer itself is aligned), so that is when the
// vector path (one 4, 8 or 16-byte access) is taken.
constexpr int WORDS = (VEC + 1) / 2;
struct alignas(sizeof(unsigned int) * WORDS) Pack {
    unsigned int w[WORDS];
};

// A bf16 is the top half of a float: widening puts its bits there (exact, one instruction).
__device__ __forceinline__ float widen(const Pack& p, int e)
{
    const unsigned int w = p.w[e / 2];
    return __uint_as_float(e % 2 ? w & 0xffff0000u : w << 16);
}

__device__ __forceinline__ unsigned int bits(const __nv_bfloat16 h, int e)
{
    return (unsigned int)__bfloat16_as_ushort(h) << (16 * (e % 2));
}

// The VEC points at src[at..], x0 .. x0+VEC-1 of a row; `inside`: the row is in the grid and
// x0 < nx. Points outside the grid read as 0 (the zero boundary).
__device__ __forceinline__ Pack load_pack(const __nv_bfloat16* at, bool inside, int x0, int nx, bool whole)
{
    Pack p;
#pragma unroll
    for (int k = 0; k < WORDS; ++k) p.w[k] = 0u;
    if (whole) {
        if (inside) p = *reinterpret_cast<const Pack*>(at);  // all VEC points are inside
    } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e)
            if (inside && x0 + e < nx) p.w[e / 2] |= bits(at[e], e);
    }
    return p;
}

__device__ __forceinline__ void store_pack(__nv_bfloat16* dst, long long at, bool inside, int x0, int nx,
                                           bool whole, const Pack& p)
{
    if (whole) {
        if (inside) *reinterpret_cast<Pack*>(dst + at) = p;
    } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e)
            if (inside && x0 + e < nx)
                dst[at + e] = __ushort_as_bfloat16((unsigned short)(p.w[e / 2] >> (16 * (e % 2))));
    }
}

__device__ __forceinline__ bool in_range(int i, int n)
{
    return (unsigned int)i < (unsigned int)n;  // 0 <= i < n in one compare
}

extern "C" __global__ void stencil3d(const __nv_bfloat16* src, __nv_bfloat16* dst, int nz, int ny,
                                     int nx)
{
    // tile[k]: plane z0+k, the block's BY rows at 1..BY and the rows above (0) and below (BY+1) it.
    __shared__ Pack tile[ITEMS][BY + 2][BX];
    const int lane = threadIdx.x % 32;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x0 = (blockIdx.x * BX + tx) * VEC;
    const int y = blockIdx.y * BY + ty;
    const int z0 = blockIdx.z * ITEMS;
    const bool whole = VEC > 1 && nx % VEC == 0;  // VEC=1 is one 2-byte point: the scalar path
    const long long plane = (long long)ny * nx;
    const long long at = ((long long)(z0 - 1) * ny + y) * nx + x0;  // row (z0-1, y); used only when inside
    const bool row_in = y < ny && x0 < nx;
    // No early return: every thread takes part in __syncthreads and the shuffles; threads outside
    // the grid hold zeros and store nothing.

    Pack col[ITEMS + 2];  // planes z0-1 .. z0+ITEMS of this thread's row y, VEC columns
#pragma unroll
    for (int k = 0; k < ITEMS + 2; ++k)
        col[k] = load_pack(src + at + k * plane, row_in && in_range(z0 - 1 + k, nz), x0, nx, whole);
    // The first and last thread rows also load the row above / below the block (the y-halo),
    // issued with the loads above, before anything waits on them: one memory round trip a block.
    const bool halo_row = ty == 0 || ty == BY - 1;  // whole warps: the other warps skip this
    const int dy = ty == 0 ? -1 : 1;
    Pack halo[ITEMS];
    if (halo_row) {
        const bool halo_in = x0 < nx && in_range(y + dy, ny);
#pragma unroll
        for (int k = 0; k < ITEMS; ++k)
            halo[k] = load_pack(src + at + (k + 1) * plane + dy * nx, halo_in && in_range(z0 + k, nz), x0, nx,
                                whole);
    }
    const int dx = lane == 0 ? -1 : VEC;  // lanes 0 and 31: the point just past the warp's edge
    const bool edge_in = (lane == 0 || lane == 31) && y < ny && in_range(x0 + dx, nx);
    float edge[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k)
        edge[k] = edge_in && in_range(z0 + k, nz) ? __bfloat162float(src[at + (k + 1) * plane + dx])
                                                   : 0.0f;

    const int halo_at = ty == 0 ? 0 : BY + 1;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        tile[k][ty + 1][tx] = col[k + 1];
        if (halo_row) tile[k][halo_at][tx] = halo[k];
    }
    if (BY == 1) {  // one thread row is both first and last: its row below comes second
        const bool below_in = x0 < nx && in_range(y + 1, ny);
#pragma unroll
        for (int k = 0; k < ITEMS; ++k)
            tile[k][BY + 1][tx] =
                load_pack(src + at + (k + 1) * plane + nx, below_in && in_range(z0 + k, nz), x0, nx, whole);
    }
    __syncthreads();

    // Planes z-1, z, z+1 widened once each as the loop walks down z (the loop is unrolled, so
    // these arrays are registers renamed from one plane to the next).
    float below[VEC], c[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
        below[e] = widen(col[0], e);
        c[e] = widen(col[1], e);
    }
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        float above[VEC];
#pragma unroll
        for (int e = 0; e < VEC; ++e) above[e] = widen(col[k + 2], e);
        const Pack up = tile[k][ty][tx];
        const Pack down = tile[k][ty + 2][tx];
        float left = __shfl_up_sync(0xffffffffu, c[VEC - 1], 1);
        float right = __shfl_down_sync(0xffffffffu, c[0], 1);
        if (lane == 0) left = edge[k];
        if (lane == 31) right = edge[k];
        Pack out;
#pragma unroll
        for (int w = 0; w < WORDS; ++w) out.w[w] = 0u;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
            const float l = e == 0 ? left : c[e - 1];
            const float r = e == VEC - 1 ? right : c[e + 1];
            // the naive kernel's order: x, y, z neighbours
            const float neighbours = l + r + widen(up, e) + widen(down, e) + below[e] + above[e];
            out.w[e / 2] |= bits(__float2bfloat16(0.4f * c[e] + 0.1f * neighbours), e);
        }
        store_pack(dst, at + (k + 1) * plane, row_in && z0 + k < nz, x0, nx, whole, out);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
            below[e] = c[e];
            c[e] = above[e];
        }
    }
}

#endif
