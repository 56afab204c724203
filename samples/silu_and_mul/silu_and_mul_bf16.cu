// SiLU-and-mul (the gated MLP activation of Llama-style models), BF16 in and out:
// x holds rows x (2*d): the gate in columns [0, d), the up projection in [d, 2d);
// out[r][j] = silu(x[r][j]) * x[r][d + j], silu(v) = v / (1 + exp(-v)).
// Loads are widened to float, the math is done in float, and each result is rounded once.
// One thread per output element (ITEMS elements with the tunable), BLOCK apart for coalescing.
// VEC > 1: when d is a multiple of VEC every row (and its up half) starts on a VEC-element
// boundary, so a thread moves VEC bf16 with one access (16 bytes at VEC=8) and divides once per
// vector instead of once per element; otherwise the block falls back to the scalar loop.
// Indices are int: the spec keeps rows * 2d below 2^31.
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
static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC bf16 must fit one 16-byte access");

// kernel-lsp: launch silu_and_mul grid=cdiv(rows*d, BLOCK*ITEMS*VEC) block=BLOCK
// kernel-lsp: tune BLOCK=256,128,512 ITEMS=1,2,4 VEC=1,8

// VEC bf16 values read and written as one aligned access.
struct alignas(sizeof(__nv_bfloat16) * VEC) Bf16Vec {
    __nv_bfloat16 v[VEC];
};

__device__ __forceinline__ __nv_bfloat16 silu_mul(__nv_bfloat16 gate_bf16, __nv_bfloat16 up_bf16)
{
    const float gate = __bfloat162float(gate_bf16);
    const float up = __bfloat162float(up_bf16);
    return __float2bfloat16(gate / (1.0f + expf(-gate)) * up);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
    silu_and_mul(const __nv_bfloat16* x, __nv_bfloat16* out, int rows, int d)
{
    const int total = rows * d;
    if (VEC > 1 && d % VEC == 0) {
        // Vector path: a block covers BLOCK*ITEMS vectors, BLOCK apart so each load instruction
        // of a warp reads one contiguous run. All loads are issued before any store (the compiler
        // may not move a load above a store to `out`, which could alias `x`), so a thread has
        // 2*ITEMS 16-byte loads in flight.
        const int row_vecs = d / VEC;
        const int vecs = total / VEC;
        const int first = blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
        const Bf16Vec* xv = reinterpret_cast<const Bf16Vec*>(x);
        Bf16Vec gate[ITEMS], up[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int v = first + k * BLOCK;
            if (v < vecs) {
                const int r = v / row_vecs;
                const int j = v - r * row_vecs;
                gate[k] = xv[2 * r * row_vecs + j];
                up[k] = xv[2 * r * row_vecs + row_vecs + j];
            }
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int v = first + k * BLOCK;
            if (v < vecs) {
                Bf16Vec o;
#pragma unroll
                for (int e = 0; e < VEC; ++e) o.v[e] = silu_mul(gate[k].v[e], up[k].v[e]);
                reinterpret_cast<Bf16Vec*>(out)[v] = o;
            }
        }
        return;
    }
    // Scalar path (the naive kernel when VEC == 1): the block's BLOCK*ITEMS*VEC elements, BLOCK apart.
    const int first = blockIdx.x * (BLOCK * ITEMS * VEC) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS * VEC; ++k) {
        const int i = first + k * BLOCK;
        if (i < total) {
            const int r = i / d;
            const int j = i - r * d;
            out[i] = silu_mul(x[2 * r * d + j], x[2 * r * d + d + j]);
        }
    }
}
