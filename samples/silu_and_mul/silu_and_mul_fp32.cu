// SiLU-and-mul (the gated MLP activation of Llama-style models), FP32:
// x holds rows x (2*d): the gate in columns [0, d), the up projection in [d, 2d);
// out[r][j] = silu(x[r][j]) * x[r][d + j], silu(v) = v / (1 + exp(-v)).
// One thread per output element (ITEMS elements with the tunable), BLOCK apart for coalescing.
// Indices are int: the spec keeps rows * 2d below 2^31.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

// kernel-lsp: launch silu_and_mul grid=cdiv(rows*d, BLOCK*ITEMS) block=BLOCK
// kernel-lsp: tune BLOCK=256,128,512,1024 ITEMS=1,2,4,8

extern "C" __global__ void silu_and_mul(const float* x, float* out, int rows, int d)
{
    const int total = rows * d;
    const int first = blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = first + k * BLOCK;
        if (i < total) {
            const int r = i / d;
            const int j = i - r * d;
            const float gate = x[2 * r * d + j];
            const float up = x[2 * r * d + d + j];
            out[i] = gate / (1.0f + expf(-gate)) * up;
        }
    }
}
