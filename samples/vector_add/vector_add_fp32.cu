// Vector add, FP32: c[i] = a[i] + b[i].
// One thread handles ITEMS groups of VEC consecutive elements; the groups of a block are BLOCK
// vectors apart so that every load instruction of a warp stays coalesced. The defaults
// (BLOCK=256, ITEMS=1, VEC=1) are the textbook one-element-per-thread kernel.
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
// kernel-lsp: tune BLOCK=256,128,512,1024 ITEMS=1,2,4,8 VEC=1,2,4

// VEC floats read and written as one aligned access (ld.global.v2/v4).
struct alignas(sizeof(float) * VEC) FloatVec {
    float v[VEC];
};

extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    const int full = n / VEC;  // whole vectors; the last n % VEC elements are the tail
    const int first = blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int v = first + k * BLOCK;
        if (v < full) {
            FloatVec x = reinterpret_cast<const FloatVec*>(a)[v];
            FloatVec y = reinterpret_cast<const FloatVec*>(b)[v];
            FloatVec z;
#pragma unroll
            for (int j = 0; j < VEC; ++j) z.v[j] = x.v[j] + y.v[j];
            reinterpret_cast<FloatVec*>(c)[v] = z;
        } else if (v == full) {
            // The thread just past the last whole vector does the tail element by element.
            for (int i = full * VEC; i < n; ++i) c[i] = a[i] + b[i];
        }
    }
}
