// Rotary position embedding (RoPE, the rotate-half / GPT-NeoX layout), BF16 in and out:
// x and out are tokens x heads x head_dim; cos_table and sin_table are tokens x (head_dim / 2).
// For i < half = head_dim / 2, with c = cos_table[t][i] and s = sin_table[t][i]:
//   out[t][h][i]        = x[t][h][i] * c - x[t][h][i + half] * s
//   out[t][h][i + half] = x[t][h][i + half] * c + x[t][h][i] * s
// Loads are widened to float, the math is done in float, and each result is rounded once.
// One thread per rotated pair (ITEMS pairs with the tunable). Indices are int: the spec keeps
// tokens * heads * head_dim below 2^31.
// VEC > 1: when half is a multiple of VEC, both halves of every head and every table row start on
// a VEC-element boundary, so a thread rotates VEC consecutive pairs with one access per operand
// (16 bytes at VEC=8) and divides once per vector; otherwise the scalar loop runs.
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

// kernel-lsp: launch rope grid=cdiv(tokens*heads*(head_dim//2), BLOCK*ITEMS*VEC) block=BLOCK
// kernel-lsp: tune BLOCK=256,128,512 ITEMS=1,2 VEC=1,4,8

// VEC bf16 values read and written as one aligned access.
struct alignas(sizeof(__nv_bfloat16) * VEC) Bf16Vec {
    __nv_bfloat16 v[VEC];
};

extern "C" __global__ void __launch_bounds__(BLOCK)
    rope(const __nv_bfloat16* x, const __nv_bfloat16* cos_table, const __nv_bfloat16* sin_table,
         __nv_bfloat16* out, int tokens, int heads, int head_dim)
{
    const int half = head_dim / 2;
    const int total = tokens * heads * half;
    if (VEC > 1 && half % VEC == 0) {
        // Vector path: vector v holds pairs [VEC*iv, VEC*iv + VEC) of one head. The vectors of a
        // block are BLOCK apart, so a warp's loads are contiguous runs. All loads are issued
        // before any store (`out` could alias the inputs, so the compiler would not reorder them).
        const int half_vecs = half / VEC;
        const int vecs = total / VEC;
        const int first = blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
        const Bf16Vec* xv = reinterpret_cast<const Bf16Vec*>(x);
        Bf16Vec a[ITEMS], b[ITEMS], c[ITEMS], s[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int v = first + k * BLOCK;
            if (v < vecs) {
                const int token_head = v / half_vecs;  // token * heads + head
                const int iv = v - token_head * half_vecs;
                const int t = token_head / heads;
                const int base = 2 * token_head * half_vecs;  // the head's first vector
                a[k] = xv[base + iv];
                b[k] = xv[base + half_vecs + iv];
                c[k] = reinterpret_cast<const Bf16Vec*>(cos_table)[t * half_vecs + iv];
                s[k] = reinterpret_cast<const Bf16Vec*>(sin_table)[t * half_vecs + iv];
            }
        }
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int v = first + k * BLOCK;
            if (v < vecs) {
                const int token_head = v / half_vecs;
                const int iv = v - token_head * half_vecs;
                const int base = 2 * token_head * half_vecs;
                Bf16Vec lo, hi;
#pragma unroll
                for (int e = 0; e < VEC; ++e) {
                    const float fa = __bfloat162float(a[k].v[e]);
                    const float fb = __bfloat162float(b[k].v[e]);
                    const float fc = __bfloat162float(c[k].v[e]);
                    const float fs = __bfloat162float(s[k].v[e]);
                    lo.v[e] = __float2bfloat16(fa * fc - fb * fs);
                    hi.v[e] = __float2bfloat16(fb * fc + fa * fs);
                }
                reinterpret_cast<Bf16Vec*>(out)[base + iv] = lo;
                reinterpret_cast<Bf16Vec*>(out)[base + half_vecs + iv] = hi;
            }
        }
        return;
    }
    // Scalar path (the naive kernel when VEC == 1): the block's BLOCK*ITEMS*VEC pairs, BLOCK apart.
    const int first = blockIdx.x * (BLOCK * ITEMS * VEC) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS * VEC; ++k) {
        const int p = first + k * BLOCK;
        if (p < total) {
            const int i = p % half;
            const int token_head = p / half;  // token * heads + head
            const int t = token_head / heads;
            const int base = token_head * head_dim;
            const float a = __bfloat162float(x[base + i]);
            const float b = __bfloat162float(x[base + i + half]);
            const float c = __bfloat162float(cos_table[t * half + i]);
            const float s = __bfloat162float(sin_table[t * half + i]);
            out[base + i] = __float2bfloat16(a * c - b * s);
            out[base + i + half] = __float2bfloat16(b * c + a * s);
        }
    }
}
