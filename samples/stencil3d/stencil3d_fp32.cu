// 3-D 7-point stencil (one Jacobi step of the heat equation), FP32, on an nz x ny x nx grid
// (x fastest):
//   dst = 0.4 * center + 0.1 * (the six face neighbours),
// where a neighbour outside the grid counts as 0 (a fixed zero boundary).
// Default (VEC=1, ITEMS=1): one thread per grid point, BX x BY threads per block in an x-y plane,
// one plane per grid z; neighbours come from the caches. Tuned (VEC or ITEMS > 1): each thread
// owns VEC consecutive points of ITEMS consecutive planes (2.5-D blocking); see the second kernel.
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
static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC floats make one 4, 8 or 16-byte access");
static_assert(ITEMS >= 1, "ITEMS planes per thread");

// kernel-lsp: launch stencil3d grid=(cdiv(nx, BX * VEC), cdiv(ny, BY), cdiv(nz, ITEMS)) block=(BX, BY)
// kernel-lsp: tune BX=32,64 BY=8,4 VEC=1,4 ITEMS=1,2,4

#if VEC == 1 && ITEMS == 1

extern "C" __global__ void stencil3d(const float* src, float* dst, int nz, int ny, int nx)
{
    const int x = blockIdx.x * BX + threadIdx.x;
    const int y = blockIdx.y * BY + threadIdx.y;
    const int z = blockIdx.z;
    if (x >= nx || y >= ny || z >= nz) return;
    const long long plane = (long long)nx * ny;
    const long long at = z * plane + (long long)y * nx + x;
    float neighbours = 0.0f;
    if (x > 0) neighbours += src[at - 1];
    if (x + 1 < nx) neighbours += src[at + 1];
    if (y > 0) neighbours += src[at - nx];
    if (y + 1 < ny) neighbours += src[at + nx];
    if (z > 0) neighbours += src[at - plane];
    if (z + 1 < nz) neighbours += src[at + plane];
    dst[at] = 0.4f * src[at] + 0.1f * neighbours;
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

// VEC floats read and written as one aligned access. A row starts VEC-aligned only when
// nx % VEC == 0 (the buffer itself is aligned), so that is when the vector path is taken.
struct alignas(sizeof(float) * VEC) Pack {
    float v[VEC];
};

// The VEC points at src[at..], x0 .. x0+VEC-1 of a row; `inside`: the row is in the grid and
// x0 < nx. Points outside the grid read as 0 (the zero boundary).
__device__ __forceinline__ Pack load_pack(const float* at, bool inside, int x0, int nx, bool whole)
{
    Pack p;
#pragma unroll
    for (int e = 0; e < VEC; ++e) p.v[e] = 0.0f;
    if (whole) {
        if (inside) p = *reinterpret_cast<const Pack*>(at);  // all VEC points are inside
    } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e)
            if (inside && x0 + e < nx) p.v[e] = at[e];
    }
    return p;
}

__device__ __forceinline__ void store_pack(float* dst, long long at, bool inside, int x0, int nx, bool whole,
                                           const Pack& p)
{
    if (whole) {
        if (inside) *reinterpret_cast<Pack*>(dst + at) = p;
    } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e)
            if (inside && x0 + e < nx) dst[at + e] = p.v[e];
    }
}

__device__ __forceinline__ bool in_range(int i, int n)
{
    return (unsigned int)i < (unsigned int)n;  // 0 <= i < n in one compare
}

extern "C" __global__ void stencil3d(const float* src, float* dst, int nz, int ny, int nx)
{
    // tile[k]: plane z0+k, the block's BY rows at 1..BY and the rows above (0) and below (BY+1) it.
    __shared__ Pack tile[ITEMS][BY + 2][BX];
    const int lane = threadIdx.x % 32;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x0 = (blockIdx.x * BX + tx) * VEC;
    const int y = blockIdx.y * BY + ty;
    const int z0 = blockIdx.z * ITEMS;
    const bool whole = nx % VEC == 0;
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
        edge[k] = edge_in && in_range(z0 + k, nz) ? src[at + (k + 1) * plane + dx] : 0.0f;

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

#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const Pack& c = col[k + 1];
        const Pack up = tile[k][ty][tx];
        const Pack down = tile[k][ty + 2][tx];
        float left = __shfl_up_sync(0xffffffffu, c.v[VEC - 1], 1);
        float right = __shfl_down_sync(0xffffffffu, c.v[0], 1);
        if (lane == 0) left = edge[k];
        if (lane == 31) right = edge[k];
        Pack out;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
            const float l = e == 0 ? left : c.v[e - 1];
            const float r = e == VEC - 1 ? right : c.v[e + 1];
            // the naive kernel's order: x, y, z neighbours
            const float neighbours = l + r + up.v[e] + down.v[e] + col[k].v[e] + col[k + 2].v[e];
            out.v[e] = 0.4f * c.v[e] + 0.1f * neighbours;
        }
        store_pack(dst, at + (k + 1) * plane, row_in && z0 + k < nz, x0, nx, whole, out);
    }
}

#endif
