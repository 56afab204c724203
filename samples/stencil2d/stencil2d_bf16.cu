// 2-D 5-point stencil (one Jacobi step of the heat equation), BF16 in and out,
// on an ny x nx row-major grid:
//   dst[i][j] = 0.5 * src[i][j] + 0.125 * (src[i-1][j] + src[i+1][j] + src[i][j-1] + src[i][j+1]),
// where a neighbour outside the grid counts as 0 (a fixed zero boundary).
// Loads are widened to float, the math is done in float, and each result is rounded once.
// Default (VEC=1, ITEMS=1): one thread per grid point, BX x BY threads per block; neighbours come
// from the caches. Tuned (VEC or ITEMS > 1): each thread owns VEC consecutive points of ITEMS
// consecutive rows (2.5-D blocking); see the second kernel below.
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
static_assert(ITEMS >= 1, "ITEMS rows per thread");

// kernel-lsp: launch stencil2d grid=(cdiv(nx, BX * VEC), cdiv(ny, BY * ITEMS)) block=(BX, BY)
// kernel-lsp: tune BX=32,64 BY=8,4 VEC=1,8 ITEMS=1,2,4,8

#if VEC == 1 && ITEMS == 1

extern "C" __global__ void stencil2d(const __nv_bfloat16* src, __nv_bfloat16* dst, int ny, int nx)
{
    const int j = blockIdx.x * BX + threadIdx.x;
    const int i = blockIdx.y * BY + threadIdx.y;
    if (i >= ny || j >= nx) return;
    const long long at = (long long)i * nx + j;
    const float up = i > 0 ? __bfloat162float(src[at - nx]) : 0.0f;
    const float down = i + 1 < ny ? __bfloat162float(src[at + nx]) : 0.0f;
    const float left = j > 0 ? __bfloat162float(src[at - 1]) : 0.0f;
    const float right = j + 1 < nx ? __bfloat162float(src[at + 1]) : 0.0f;
    dst[at] = __float2bfloat16(0.5f * __bfloat162float(src[at]) + 0.125f * (up + down + left + right));
}

#else

// The thread loads rows i0-1 .. i0+ITEMS before any math: ITEMS+2 independent loads in flight
// (bytes in flight are what a memory-bound kernel needs), and each row is read once per thread,
// the up/down neighbours being registers. Left/right neighbours come from the lanes beside it by
// warp shuffle; lanes 0 and 31 load the one point past their warp's edge (an L1/L2 hit).
static_assert(BX % 32 == 0, "a warp must be 32 consecutive threads of one row for the shuffles");

// VEC bf16 kept packed two to a 32-bit register (the first point in the low half, as in memory),
// so the ITEMS+2 rows cost VEC/2 registers each; they are widened to float only when used.
constexpr int WORDS = (VEC + 1) / 2;
struct alignas(sizeof(unsigned int) * WORDS) Pack {
    unsigned int w[WORDS];
};

__device__ __forceinline__ float widen(const Pack& p, int e)
{
    return __bfloat162float(__ushort_as_bfloat16((unsigned short)(p.w[e / 2] >> (16 * (e % 2)))));
}

__device__ __forceinline__ unsigned int bits(const __nv_bfloat16 h, int e)
{
    return (unsigned int)__bfloat16_as_ushort(h) << (16 * (e % 2));
}

// Points j0 .. j0+VEC-1 of row i; points outside the grid read as 0 (the zero boundary). `whole`:
// one 4/8/16-byte access, taken only when nx % VEC == 0, the one case where every row starts
// VEC-aligned (the buffer itself is aligned); else point by point.
__device__ __forceinline__ Pack load_pack(const __nv_bfloat16* src, int i, int ny, int j0, int nx, bool whole)
{
    Pack p;
#pragma unroll
    for (int k = 0; k < WORDS; ++k) p.w[k] = 0u;
    if (i < 0 || i >= ny) return p;
    const __nv_bfloat16* row = src + (long long)i * nx;
    if (whole) {
        if (j0 < nx) p = *reinterpret_cast<const Pack*>(row + j0);  // all VEC points are inside
    } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e)
            if (j0 + e < nx) p.w[e / 2] |= bits(row[j0 + e], e);
    }
    return p;
}

__device__ __forceinline__ void store_pack(__nv_bfloat16* dst, int i, int ny, int j0, int nx, bool whole, const Pack& p)
{
    if (i >= ny) return;
    __nv_bfloat16* row = dst + (long long)i * nx;
    if (whole) {
        if (j0 < nx) *reinterpret_cast<Pack*>(row + j0) = p;
    } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e)
            if (j0 + e < nx) row[j0 + e] = __ushort_as_bfloat16((unsigned short)(p.w[e / 2] >> (16 * (e % 2))));
    }
}

extern "C" __global__ void stencil2d(const __nv_bfloat16* src, __nv_bfloat16* dst, int ny, int nx)
{
    const int lane = threadIdx.x % 32;
    const int j0 = (blockIdx.x * BX + threadIdx.x) * VEC;
    const int i0 = (blockIdx.y * BY + threadIdx.y) * ITEMS;
    if (i0 >= ny) return;  // the whole warp (its lanes share threadIdx.y), so shuffles stay full
    const bool whole = VEC > 1 && nx % VEC == 0;  // VEC=1 is one 2-byte point: the scalar path

    Pack rows[ITEMS + 2];  // rows i0-1 .. i0+ITEMS of this thread's VEC columns
#pragma unroll
    for (int r = 0; r < ITEMS + 2; ++r) rows[r] = load_pack(src, i0 - 1 + r, ny, j0, nx, whole);
    const bool edge_lane = lane == 0 || lane == 31;
    const int je = lane == 0 ? j0 - 1 : j0 + VEC;  // the point just past the warp's edge
    float edge[ITEMS];
#pragma unroll
    for (int r = 0; r < ITEMS; ++r)
        edge[r] = edge_lane && je >= 0 && je < nx && i0 + r < ny
                      ? __bfloat162float(src[(long long)(i0 + r) * nx + je])
                      : 0.0f;

#pragma unroll
    for (int r = 0; r < ITEMS; ++r) {
        float c[VEC];
#pragma unroll
        for (int e = 0; e < VEC; ++e) c[e] = widen(rows[r + 1], e);
        float left = __shfl_up_sync(0xffffffffu, c[VEC - 1], 1);
        float right = __shfl_down_sync(0xffffffffu, c[0], 1);
        if (lane == 0) left = edge[r];
        if (lane == 31) right = edge[r];
        Pack out;
#pragma unroll
        for (int k = 0; k < WORDS; ++k) out.w[k] = 0u;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
            const float l = e == 0 ? left : c[e - 1];
            const float rt = e == VEC - 1 ? right : c[e + 1];
            const float up = widen(rows[r], e), down = widen(rows[r + 2], e);
            out.w[e / 2] |= bits(__float2bfloat16(0.5f * c[e] + 0.125f * (up + down + l + rt)), e);
        }
        store_pack(dst, i0 + r, ny, j0, nx, whole, out);
    }
}

#endif
