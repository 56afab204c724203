// Rotary position embedding (RoPE, the rotate-half / GPT-NeoX layout), FP32:
// x and out are tokens x heads x head_dim; cos_table and sin_table are tokens x (head_dim / 2).
// For i < half = head_dim / 2, with c = cos_table[t][i] and s = sin_table[t][i]:
//   out[t][h][i]        = x[t][h][i] * c - x[t][h][i + half] * s
//   out[t][h][i + half] = x[t][h][i + half] * c + x[t][h][i] * s
// One thread per rotated pair (ITEMS pairs with the tunable). Indices are int: the spec keeps
// tokens * heads * head_dim below 2^31.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

// kernel-lsp: launch rope grid=cdiv(tokens*heads*(head_dim//2), BLOCK*ITEMS) block=BLOCK
// kernel-lsp: tune BLOCK=256,128,512,1024 ITEMS=1,2,4,8

extern "C" __global__ void rope(const float* x, const float* cos_table, const float* sin_table,
                                float* out, int tokens, int heads, int head_dim)
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
            const float a = x[base + i];
            const float b = x[base + i + half];
            const float c = cos_table[t * half + i];
            const float s = sin_table[t * half + i];
            out[base + i] = a * c - b * s;
            out[base + i + half] = b * c + a * s;
        }
    }
}
