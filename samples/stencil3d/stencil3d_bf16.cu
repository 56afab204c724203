// 3-D 7-point stencil (one Jacobi step of the heat equation), BF16 in and out, on an nz x ny x nx grid
// (x fastest):
//   dst = 0.4 * center + 0.1 * (the six face neighbours),
// where a neighbour outside the grid counts as 0 (a fixed zero boundary).
// Loads are widened to float, the math is done in float, and each result is rounded once.
// One thread per grid point: BX x BY threads per block in an x-y plane, one plane per grid z.
#include <cuda_bf16.h>

#ifndef BX
#define BX 32
#endif
#ifndef BY
#define BY 8
#endif
static_assert(BX * BY <= 1024, "at most 1024 threads per block");

// kernel-lsp: launch stencil3d grid=(cdiv(nx, BX), cdiv(ny, BY), nz) block=(BX, BY)
// kernel-lsp: tune BX=32,64,128 BY=8,1,2,4

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
