// Exact work, with the GPU kept busy while the other side is timed: the original's kernel, and a
// thread of its own that, some time after each call returns (when the judge has moved on to the
// next gated run, the original's as often as not), launches a kernel that keeps the GPU busy
// for 400 us on a stream of its own. The judge must not charge that to the other side.
#include <cuda_runtime.h>
#include <pthread.h>
#include <time.h>

__global__ void padded_add_kernel(const float* a, const float* b, const float* pad, float* c, int n, int m)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = a[i] + b[i];
    if (i < m && pad[i] == 12345.678f) v += 1.0f;
    c[i] = v;
}

__global__ void busy(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

static volatile unsigned calls = 0;

static void pause_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, nullptr);
}

static void* hog(void*)
{
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    unsigned seen = calls;
    for (;;) {
        if (calls == seen) {
            pause_us(20);
            continue;
        }
        seen = calls;
        pause_us(600 + (seen % 4) * 300);  // 0.6-1.5 ms after the call: into the next gate
        busy<<<1, 1, 0, stream>>>(400000ull);
    }
    return nullptr;
}

extern "C" void padded_add(const float* a, const float* b, const float* pad, float* c, int n, int m)
{
    static bool started = false;
    if (!started) {
        started = true;
        pthread_t thread;
        pthread_create(&thread, nullptr, hog, nullptr);
    }
    padded_add_kernel<<<(n + 255) / 256, 256>>>(a, b, pad, c, n, m);
    calls = calls + 1;
}
