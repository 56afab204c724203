// Rotary position embedding (RoPE, the rotate-half / GPT-NeoX layout), BF16 in and out:
// x and out are tokens x heads x head_dim; cos_table and sin_table are tokens x (head_dim / 2).
// For i < half = head_dim / 2, with c = cos_table[t][i] and s = sin_table[t][i]:
//   out[t][h][i]        = x[t][h][i] * c - x[t][h][i + half] * s
//   out[t][h][i + half] = x[t][h][i + half] * c + x[t][h][i] * s
// Loads are widened to float, the math is done in float, and each result is rounded once.
// One thread per rotated pair (ITEMS pairs with the tunable). Indices are int: the spec keeps
// tokens * heads * head_dim below 2^31.
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

// kernel-lsp: launch rope grid=cdiv(tokens*heads*(head_dim//2), BLOCK*ITEMS) block=BLOCK
// kernel-lsp: tune BLOCK=256,128,512,1024 ITEMS=1,2,4,8

extern "C" __global__ void rope(const __nv_bfloat16* x, const __nv_bfloat16* cos_table, const __nv_bfloat16* sin_table,
                                __nv_bfloat16* out, int tokens, int heads, int head_dim)
{
    const int half = head_dim / 2;
    const int total = tokens * heads * half;
    const int first = blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
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
