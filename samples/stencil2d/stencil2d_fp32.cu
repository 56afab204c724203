// 2-D 5-point stencil (one Jacobi step of the heat equation), FP32,
// on an ny x nx row-major grid:
//   dst[i][j] = 0.5 * src[i][j] + 0.125 * (src[i-1][j] + src[i+1][j] + src[i][j-1] + src[i][j+1]),
// where a neighbour outside the grid counts as 0 (a fixed zero boundary).
// One thread per grid point, BX x BY threads per block; neighbours come from the caches.
#ifndef BX
#define BX 32
#endif
#ifndef BY
#define BY 8
#endif
static_assert(BX * BY <= 1024, "at most 1024 threads per block");

// kernel-lsp: launch stencil2d grid=(cdiv(nx, BX), cdiv(ny, BY)) block=(BX, BY)
// kernel-lsp: tune BX=32,64,128 BY=8,1,2,4

extern "C" __global__ void stencil2d(const float* src, float* dst, int ny, int nx)
{
    const int j = blockIdx.x * BX + threadIdx.x;
    const int i = blockIdx.y * BY + threadIdx.y;
    if (i >= ny || j >= nx) return;
    const long long at = (long long)i * nx + j;
    const float up = i > 0 ? src[at - nx] : 0.0f;
    const float down = i + 1 < ny ? src[at + nx] : 0.0f;
    const float left = j > 0 ? src[at - 1] : 0.0f;
    const float right = j + 1 < nx ? src[at + 1] : 0.0f;
    dst[at] = 0.5f * src[at] + 0.125f * (up + down + left + right);
}
