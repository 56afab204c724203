// The null entry: one one-thread kernel writes one element. Judged minus in-process, its time is
// what the judged path itself adds to a run (benchmarks/judged_vs_bench.py).
#include <cuda_runtime.h>

__global__ void one(float* out) { out[0] = 1.0f; }

extern "C" void null_entry(float* out, int n)
{
    one<<<1, 1>>>(out);
}
