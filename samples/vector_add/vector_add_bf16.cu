// Vector add, BF16: c[i] = a[i] + b[i], added in float and rounded once to bf16.
// One thread handles ITEMS groups of VEC consecutive elements; the groups of a block are BLOCK
// vectors apart so that every load instruction of a warp stays coalesced. The defaults
// (BLOCK=256, ITEMS=1, VEC=1) are the textbook one-element-per-thread kernel.
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#ifndef VEC
#define VEC 1
#endif

// kernel-lsp: launch vector_add grid=cdiv(n, BLOCK*ITEMS*VEC) block=BLOCK
// kernel-lsp: tune BLOCK=256,128,512,1024 ITEMS=1,2,4,8 VEC=1,2,4,8

// VEC bf16 values read and written as one aligned access (up to 16 bytes).
struct alignas(sizeof(__nv_bfloat16) * VEC) Bf16Vec {
    __nv_bfloat16 v[VEC];
};

extern "C" __global__ void vector_add(const __nv_bfloat16* a, const __nv_bfloat16* b,
                                      __nv_bfloat16* c, int n)
{
    const int full = n / VEC;  // whole vectors; the last n % VEC elements are the tail
    const int first = blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int v = first + k * BLOCK;
        if (v < full) {
            Bf16Vec x = reinterpret_cast<const Bf16Vec*>(a)[v];
            Bf16Vec y = reinterpret_cast<const Bf16Vec*>(b)[v];
            Bf16Vec z;
#pragma unroll
            for (int j = 0; j < VEC; ++j)
                z.v[j] = __float2bfloat16(__bfloat162float(x.v[j]) + __bfloat162float(y.v[j]));
            reinterpret_cast<Bf16Vec*>(c)[v] = z;
        } else if (v == full) {
            // The thread just past the last whole vector does the tail element by element.
            for (int i = full * VEC; i < n; ++i)
                c[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
        }
    }
}
