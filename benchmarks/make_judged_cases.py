"""Writes benchmarks/judged_cases/: the kernel + `extern "C"` launcher files that
benchmarks/judged_vs_bench.py times in-process (`kernel-lsp bench`'s way) and judged (the
optimizer's way). Ten operators in fp32 and bf16, each an original (`OP_DTYPE.cu`) and a faster
rewrite (`OP_DTYPE.rewrite.cu`) of its launcher, with the entry spec both share
(`OP_DTYPE.spec.py`); a null entry (one one-thread kernel: what the judged path itself costs a
run); and `fake/`, launchers written for the CPU, for the fake GPU.

Between them: run times from about 5 us (a 4 MiB add) to tens of ms (a naive 4096^3 bf16
matmul); launchers that allocate scratch on every call (saxpy, reduce, layernorm, rmsnorm), that
wait for the GPU themselves (reduce's cudaDeviceSynchronize, gelu's cudaStreamSynchronize, the
cudaFree of the allocating ones), that take a stream (gelu, rmsnorm), and that do neither.

    python benchmarks/make_judged_cases.py     # rewrites the folder from the templates here
"""

from __future__ import annotations

import re
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "judged_cases"

PRELUDE = {
    "fp32": """#include <cuda_runtime.h>

static __device__ __forceinline__ float ld(float v) { return v; }
static __device__ __forceinline__ float st(float v) { return v; }
""",
    "bf16": """#include <cuda_runtime.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16(v); }
""",
}
TYPES = {"fp32": ("float", "float32", "float"), "bf16": ("__nv_bfloat16", "bfloat16", "unsigned short")}

BLOCK_SUM = """
// A block's sum (blockDim.x a power of two, at most 256), in every thread.
static __device__ float block_sum(float v, float* red)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    const float total = red[0];
    __syncthreads();
    return total;
}
"""

# op -> (what it is, original, rewrite, spec body). @T@ the element type, @R@ a raw type of its
# size, @D@ fp32|bf16, @DT@ the spec's dtype; the launcher is `OP_DTYPE`.
OPS: dict[str, tuple[str, str, str, str]] = {}

OPS["vadd"] = (
    "c = a + b: four consecutive elements a thread (a warp's loads four apart), against one a thread",
    """
__global__ void vadd_chunks(const @T@* a, const @T@* b, @T@* c, int n)
{
    const int base = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    for (int k = 0; k < 4; ++k) {
        const int i = base + k;
        if (i < n) c[i] = st(ld(a[i]) + ld(b[i]));
    }
}

extern "C" void vadd_@D@(const @T@* a, const @T@* b, @T@* c, int n)
{
    const int threads = 256;
    vadd_chunks<<<(n + threads * 4 - 1) / (threads * 4), threads>>>(a, b, c, n);
}
""",
    """
__global__ void vadd_strided(const @T@* a, const @T@* b, @T@* c, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        c[i] = st(ld(a[i]) + ld(b[i]));
}

extern "C" void vadd_@D@(const @T@* a, const @T@* b, @T@* c, int n)
{
    int blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    vadd_strided<<<blocks, 256>>>(a, b, c, n);
}
""",
    """
SPEC = Spec(
    entry="vadd_@D@",
    sizes=[{"n": 1}, {"n": 1000}, {"n": 100_003}],
    timing_sizes=[{"n": @N@}],
    args={
        "a": In("@DT@", shape="n"),
        "b": In("@DT@", shape="n"),
        "c": Out("@DT@", shape="n"),
        "n": Scalar("int32"),
    },
    reference=lambda a, b: {"c": a.astype(np.float32) + b.astype(np.float32)},
)
""",
)

OPS["saxpy"] = (
    "y = alpha x + y: through a float temporary the launcher allocates and frees each call, against one fused kernel",
    """
__global__ void scale_into(const @T@* x, float* tmp, float alpha, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) tmp[i] = alpha * ld(x[i]);
}

__global__ void add_into(const float* tmp, @T@* y, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = st(tmp[i] + ld(y[i]));
}

extern "C" void saxpy_@D@(const @T@* x, @T@* y, float alpha, int n)
{
    float* tmp = nullptr;
    cudaMalloc(&tmp, (size_t)n * sizeof(float));
    const int blocks = (n + 255) / 256;
    scale_into<<<blocks, 256>>>(x, tmp, alpha, n);
    add_into<<<blocks, 256>>>(tmp, y, n);
    cudaFree(tmp);
}
""",
    """
__global__ void saxpy_fused(const @T@* x, @T@* y, float alpha, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = st(alpha * ld(x[i]) + ld(y[i]));
}

extern "C" void saxpy_@D@(const @T@* x, @T@* y, float alpha, int n)
{
    int blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    saxpy_fused<<<blocks, 256>>>(x, y, alpha, n);
}
""",
    """
SPEC = Spec(
    entry="saxpy_@D@",
    sizes=[{"n": 1}, {"n": 1000}, {"n": 100_003}],
    timing_sizes=[{"n": 1 << 24}],
    args={
        "x": In("@DT@", shape="n"),
        "y": InOut("@DT@", shape="n"),
        "alpha": Scalar("float32", value=2.0),
        "n": Scalar("int32"),
    },
    reference=lambda x, y, alpha: {"y": alpha * x.astype(np.float32) + y.astype(np.float32)},
)
""",
)

OPS["reduce"] = (
    "out = sum(x): block sums into scratch, the launcher's own cudaDeviceSynchronize, a second kernel, against shuffles and one atomic a block",
    """
__global__ void block_sums(const @T@* x, float* partial, int n)
{
    __shared__ float s[256];
    const int i = blockIdx.x * 256 + threadIdx.x;
    s[threadIdx.x] = i < n ? ld(x[i]) : 0.0f;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

__global__ void final_sum(const float* partial, float* out, int count)
{
    __shared__ float s[256];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < count; i += 256) acc += partial[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = s[0];
}

extern "C" void reduce_@D@(const @T@* x, float* out, int n)
{
    const int blocks = (n + 255) / 256;
    float* partial = nullptr;
    cudaMalloc(&partial, blocks * sizeof(float));
    block_sums<<<blocks, 256>>>(x, partial, n);
    cudaDeviceSynchronize();
    final_sum<<<1, 256>>>(partial, out, blocks);
    cudaFree(partial);
}
""",
    """
__global__ void reduce_atomic(const @T@* x, float* out, int n)
{
    __shared__ float warp_sums[8];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += ld(x[i]);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (lane == 0) atomicAdd(out, acc);
    }
}

extern "C" void reduce_@D@(const @T@* x, float* out, int n)
{
    cudaMemsetAsync(out, 0, sizeof(float), 0);
    int blocks = (n + 255) / 256;
    if (blocks > 1024) blocks = 1024;
    reduce_atomic<<<blocks, 256>>>(x, out, n);
}
""",
    """
SPEC = Spec(
    entry="reduce_@D@",
    sizes=[{"n": 1}, {"n": 1000}, {"n": 100_003}],
    timing_sizes=[{"n": 1 << 24}],
    args={
        "x": In("@DT@", shape="n"),
        "out": Out("float32", shape=1, atol=5e-1, rtol=1e-3),  # float sums in any order
        "n": Scalar("int32"),
    },
    reference=lambda x: {"out": np.array([x.astype(np.float64).sum()])},
)
""",
)

OPS["softmax"] = (
    "a row's softmax: a thread a row (three passes, loads a row apart), against a block a row",
    """
__global__ void softmax_rows(const @T@* x, @T@* y, int rows, int cols)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const @T@* xr = x + (size_t)r * cols;
    @T@* yr = y + (size_t)r * cols;
    float m = -3.4e38f;
    for (int j = 0; j < cols; ++j) m = fmaxf(m, ld(xr[j]));
    float s = 0.0f;
    for (int j = 0; j < cols; ++j) s += expf(ld(xr[j]) - m);
    for (int j = 0; j < cols; ++j) yr[j] = st(expf(ld(xr[j]) - m) / s);
}

extern "C" void softmax_@D@(const @T@* x, @T@* y, int rows, int cols)
{
    softmax_rows<<<(rows + 127) / 128, 128>>>(x, y, rows, cols);
}
""",
    """
__global__ void softmax_block(const @T@* x, @T@* y, int rows, int cols)
{
    __shared__ float red[256];
    const @T@* xr = x + (size_t)blockIdx.x * cols;
    @T@* yr = y + (size_t)blockIdx.x * cols;
    float m = -3.4e38f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, ld(xr[j]));
    red[threadIdx.x] = m;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(ld(xr[j]) - m);
    s = block_sum(s, red);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = st(expf(ld(xr[j]) - m) / s);
}

extern "C" void softmax_@D@(const @T@* x, @T@* y, int rows, int cols)
{
    softmax_block<<<rows, 256>>>(x, y, rows, cols);
}
""",
    """
def reference(x):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}


SPEC = Spec(
    entry="softmax_@D@",
    sizes=[{"rows": 1, "cols": 1}, {"rows": 37, "cols": 1000}],
    timing_sizes=[{"rows": 4096, "cols": 1024}],
    args={
        "x": In("@DT@", shape="(rows, cols)", dist="uniform(-4, 4)"),
        "y": Out("@DT@", shape="(rows, cols)"),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
    },
    reference=reference,
)
""",
)

OPS["layernorm"] = (
    "a row's layer norm: row statistics a thread a row into scratch allocated each call, then an elementwise kernel, against one block a row",
    """
__global__ void row_stats(const @T@* x, float* stats, int rows, int cols, float eps)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const @T@* xr = x + (size_t)r * cols;
    float mean = 0.0f;
    for (int j = 0; j < cols; ++j) mean += ld(xr[j]);
    mean /= cols;
    float var = 0.0f;
    for (int j = 0; j < cols; ++j) {
        const float d = ld(xr[j]) - mean;
        var += d * d;
    }
    stats[2 * r] = mean;
    stats[2 * r + 1] = rsqrtf(var / cols + eps);
}

__global__ void normalize(const @T@* x, const float* stats, const @T@* gamma, const @T@* beta, @T@* y, int rows, int cols)
{
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * cols) return;
    const int r = (int)(i / cols), c = (int)(i % cols);
    y[i] = st((ld(x[i]) - stats[2 * r]) * stats[2 * r + 1] * ld(gamma[c]) + ld(beta[c]));
}

extern "C" void layernorm_@D@(const @T@* x, const @T@* gamma, const @T@* beta, @T@* y, int rows, int cols, float eps)
{
    float* stats = nullptr;
    cudaMalloc(&stats, 2 * (size_t)rows * sizeof(float));
    row_stats<<<(rows + 127) / 128, 128>>>(x, stats, rows, cols, eps);
    const size_t total = (size_t)rows * cols;
    normalize<<<(unsigned)((total + 255) / 256), 256>>>(x, stats, gamma, beta, y, rows, cols);
    cudaFree(stats);
}
""",
    """
__global__ void layernorm_fused(const @T@* x, const @T@* gamma, const @T@* beta, @T@* y, int cols, float eps)
{
    __shared__ float red[256];
    const @T@* xr = x + (size_t)blockIdx.x * cols;
    @T@* yr = y + (size_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += ld(xr[j]);
    const float mean = block_sum(s, red) / cols;
    float v = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        const float d = ld(xr[j]) - mean;
        v += d * d;
    }
    const float rstd = rsqrtf(block_sum(v, red) / cols + eps);
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        yr[j] = st((ld(xr[j]) - mean) * rstd * ld(gamma[j]) + ld(beta[j]));
}

extern "C" void layernorm_@D@(const @T@* x, const @T@* gamma, const @T@* beta, @T@* y, int rows, int cols, float eps)
{
    layernorm_fused<<<rows, 256>>>(x, gamma, beta, y, cols, eps);
}
""",
    """
def reference(x, gamma, beta, eps):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
    return {"y": (x64 - mean) / np.sqrt(var + eps) * gamma.astype(np.float64) + beta.astype(np.float64)}


SPEC = Spec(
    entry="layernorm_@D@",
    sizes=[{"rows": 1, "cols": 1}, {"rows": 37, "cols": 1000}],
    timing_sizes=[{"rows": 8192, "cols": 1024}],
    args={
        "x": In("@DT@", shape="(rows, cols)"),
        "gamma": In("@DT@", shape="cols"),
        "beta": In("@DT@", shape="cols"),
        "y": Out("@DT@", shape="(rows, cols)"@TOL@),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
        "eps": Scalar("float32", value=1e-5),
    },
    reference=reference,
)
""",
)

OPS["transpose"] = (
    "dst = src^T: coalesced reads and writes a row apart, against 32x32 tiles through shared memory",
    """
__global__ void transpose_naive(const @R@* src, @R@* dst, int rows, int cols)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) dst[(size_t)c * rows + r] = src[(size_t)r * cols + c];
}

extern "C" void transpose_@D@(const @T@* src, @T@* dst, int rows, int cols)
{
    const dim3 block(32, 8);
    const dim3 grid((cols + 31) / 32, (rows + 7) / 8);
    transpose_naive<<<grid, block>>>((const @R@*)src, (@R@*)dst, rows, cols);
}
""",
    """
__global__ void transpose_tiled(const @R@* src, @R@* dst, int rows, int cols)
{
    __shared__ @R@ tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x;
    int y = blockIdx.y * 32 + threadIdx.y;
    for (int k = 0; k < 32; k += 8)
        if (x < cols && y + k < rows) tile[threadIdx.y + k][threadIdx.x] = src[(size_t)(y + k) * cols + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int k = 0; k < 32; k += 8)
        if (x < rows && y + k < cols) dst[(size_t)(y + k) * rows + x] = tile[threadIdx.x][threadIdx.y + k];
}

extern "C" void transpose_@D@(const @T@* src, @T@* dst, int rows, int cols)
{
    const dim3 block(32, 8);
    const dim3 grid((cols + 31) / 32, (rows + 31) / 32);
    transpose_tiled<<<grid, block>>>((const @R@*)src, (@R@*)dst, rows, cols);
}
""",
    """
SPEC = Spec(
    entry="transpose_@D@",
    sizes=[{"rows": 1, "cols": 1}, {"rows": 37, "cols": 100}, {"rows": 300, "cols": 65}],
    timing_sizes=[{"rows": 4096, "cols": 4096}],
    args={
        "src": In("@DT@", shape="(rows, cols)"),
        "dst": Out("@DT@", shape="(cols, rows)"),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
    },
    reference=lambda src: {"dst": np.ascontiguousarray(src.T)},
)
""",
)

OPS["matmul"] = (
    "C = A B, fp32 accumulation: a thread an output, against 16x16 tiles through shared memory (the milliseconds end)",
    """
__global__ void matmul_naive(const @T@* A, const @T@* B, @T@* C, int M, int N, int K)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += ld(A[(size_t)row * K + k]) * ld(B[(size_t)k * N + col]);
    C[(size_t)row * N + col] = st(acc);
}

extern "C" void matmul_@D@(const @T@* A, const @T@* B, @T@* C, int M, int N, int K)
{
    const dim3 block(16, 16);
    const dim3 grid((N + 15) / 16, (M + 15) / 16);
    matmul_naive<<<grid, block>>>(A, B, C, M, N, K);
}
""",
    """
__global__ void matmul_tiled(const @T@* A, const @T@* B, @T@* C, int M, int N, int K)
{
    __shared__ float As[16][16];
    __shared__ float Bs[16][16];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int t = 0; t < K; t += 16) {
        As[ty][tx] = (row < M && t + tx < K) ? ld(A[(size_t)row * K + t + tx]) : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? ld(B[(size_t)(t + ty) * N + col]) : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = st(acc);
}

extern "C" void matmul_@D@(const @T@* A, const @T@* B, @T@* C, int M, int N, int K)
{
    const dim3 block(16, 16);
    const dim3 grid((N + 15) / 16, (M + 15) / 16);
    matmul_tiled<<<grid, block>>>(A, B, C, M, N, K);
}
""",
    """
SPEC = Spec(
    entry="matmul_@D@",
    sizes=[{"M": 1, "N": 1, "K": 1}, {"M": 33, "N": 17, "K": 45}, {"M": 64, "N": 128, "K": 96}],
    timing_sizes=[{"M": @MM@, "N": @MM@, "K": @MM@}],
    args={
        "A": In("@DT@", shape="(M, K)", dist="uniform(-1, 1)"),
        "B": In("@DT@", shape="(K, N)", dist="uniform(-1, 1)"),
        "C": Out("@DT@", shape="(M, N)"@MMTOL@),
        "M": Scalar("int32"),
        "N": Scalar("int32"),
        "K": Scalar("int32"),
    },
    reference=lambda A, B: {"C": A.astype(np.float64) @ B.astype(np.float64)},
)
""",
)

OPS["matvec"] = (
    "y = A x: a thread a row (loads a row apart), against a warp a row",
    """
__global__ void matvec_rows(const @T@* A, const @T@* x, @T@* y, int rows, int cols)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float acc = 0.0f;
    for (int j = 0; j < cols; ++j) acc += ld(A[(size_t)r * cols + j]) * ld(x[j]);
    y[r] = st(acc);
}

extern "C" void matvec_@D@(const @T@* A, const @T@* x, @T@* y, int rows, int cols)
{
    matvec_rows<<<(rows + 127) / 128, 128>>>(A, x, y, rows, cols);
}
""",
    """
__global__ void matvec_warps(const @T@* A, const @T@* x, @T@* y, int rows, int cols)
{
    const int r = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (r >= rows) return;  // whole warps: r is the same in all of its lanes
    float acc = 0.0f;
    for (int j = lane; j < cols; j += 32) acc += ld(A[(size_t)r * cols + j]) * ld(x[j]);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) y[r] = st(acc);
}

extern "C" void matvec_@D@(const @T@* A, const @T@* x, @T@* y, int rows, int cols)
{
    matvec_warps<<<(rows + 7) / 8, 256>>>(A, x, y, rows, cols);
}
""",
    """
SPEC = Spec(
    entry="matvec_@D@",
    sizes=[{"rows": 1, "cols": 1}, {"rows": 37, "cols": 1000}, {"rows": 1000, "cols": 33}],
    timing_sizes=[{"rows": 8192, "cols": 4096}],
    args={
        "A": In("@DT@", shape="(rows, cols)", dist="uniform(-1, 1)"),
        "x": In("@DT@", shape="cols", dist="uniform(-1, 1)"),
        "y": Out("@DT@", shape="rows"@MVTOL@),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
    },
    reference=lambda A, x: {"y": A.astype(np.float64) @ x.astype(np.float64)},
)
""",
)

OPS["gelu"] = (
    "tanh GELU on a stream: an element a thread and the launcher's own cudaStreamSynchronize, against a strided kernel that leaves the wait to its caller",
    """
__global__ void gelu_each(const @T@* x, @T@* y, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = ld(x[i]);
        y[i] = st(0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))));
    }
}

extern "C" void gelu_@D@(const @T@* x, @T@* y, int n, cudaStream_t stream)
{
    gelu_each<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
    cudaStreamSynchronize(stream);
}
""",
    """
__global__ void gelu_strided(const @T@* x, @T@* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float v = ld(x[i]);
        y[i] = st(0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))));
    }
}

extern "C" void gelu_@D@(const @T@* x, @T@* y, int n, cudaStream_t stream)
{
    int blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    gelu_strided<<<blocks, 256, 0, stream>>>(x, y, n);
}
""",
    """
def reference(x):
    v = x.astype(np.float64)
    return {"y": 0.5 * v * (1.0 + np.tanh(0.7978845608 * (v + 0.044715 * v**3)))}


SPEC = Spec(
    entry="gelu_@D@",
    sizes=[{"n": 1}, {"n": 1000}, {"n": 100_003}],
    timing_sizes=[{"n": 1 << 24}],
    args={
        "x": In("@DT@", shape="n", dist="uniform(-4, 4)"),
        "y": Out("@DT@", shape="n"@TOL@),
        "n": Scalar("int32"),
    },
    reference=reference,
)
""",
)

OPS["rmsnorm"] = (
    "a row's RMS norm on a stream: row scales a thread a row into scratch allocated each call, then an elementwise kernel, against one block a row",
    """
__global__ void row_scales(const @T@* x, float* scale, int rows, int cols, float eps)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const @T@* xr = x + (size_t)r * cols;
    float ss = 0.0f;
    for (int j = 0; j < cols; ++j) ss += ld(xr[j]) * ld(xr[j]);
    scale[r] = rsqrtf(ss / cols + eps);
}

__global__ void apply_scales(const @T@* x, const float* scale, const @T@* w, @T@* y, int rows, int cols)
{
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * cols) return;
    y[i] = st(ld(x[i]) * scale[i / cols] * ld(w[i % cols]));
}

extern "C" void rmsnorm_@D@(const @T@* x, const @T@* w, @T@* y, int rows, int cols, float eps, cudaStream_t stream)
{
    float* scale = nullptr;
    cudaMalloc(&scale, (size_t)rows * sizeof(float));
    row_scales<<<(rows + 127) / 128, 128, 0, stream>>>(x, scale, rows, cols, eps);
    const size_t total = (size_t)rows * cols;
    apply_scales<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(x, scale, w, y, rows, cols);
    cudaFree(scale);
}
""",
    """
__global__ void rmsnorm_fused(const @T@* x, const @T@* w, @T@* y, int cols, float eps)
{
    __shared__ float red[256];
    const @T@* xr = x + (size_t)blockIdx.x * cols;
    @T@* yr = y + (size_t)blockIdx.x * cols;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) ss += ld(xr[j]) * ld(xr[j]);
    const float scale = rsqrtf(block_sum(ss, red) / cols + eps);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = st(ld(xr[j]) * scale * ld(w[j]));
}

extern "C" void rmsnorm_@D@(const @T@* x, const @T@* w, @T@* y, int rows, int cols, float eps, cudaStream_t stream)
{
    rmsnorm_fused<<<rows, 256, 0, stream>>>(x, w, y, cols, eps);
}
""",
    """
def reference(x, w, eps):
    x64 = x.astype(np.float64)
    scale = 1.0 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps)
    return {"y": x64 * scale * w.astype(np.float64)}


SPEC = Spec(
    entry="rmsnorm_@D@",
    sizes=[{"rows": 1, "cols": 1}, {"rows": 37, "cols": 1000}],
    timing_sizes=[{"rows": 4096, "cols": 4096}],
    args={
        "x": In("@DT@", shape="(rows, cols)"),
        "w": In("@DT@", shape="cols"),
        "y": Out("@DT@", shape="(rows, cols)"@TOL@),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
        "eps": Scalar("float32", value=1e-6),
    },
    reference=reference,
)
""",
)

OPS["scale_rows"] = (
    "y = x * s[row]: a block a row with a loop over columns, against a flat grid of one element a thread",
    """
__global__ void scale_by_row(const @T@* x, const @T@* s, @T@* y, int rows, int cols)
{
    const int r = blockIdx.x;
    const float f = ld(s[r]);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) y[(size_t)r * cols + j] = st(ld(x[(size_t)r * cols + j]) * f);
}

extern "C" void scale_rows_@D@(const @T@* x, const @T@* s, @T@* y, int rows, int cols)
{
    scale_by_row<<<rows, 64>>>(x, s, y, rows, cols);
}
""",
    """
__global__ void scale_flat(const @T@* x, const @T@* s, @T@* y, int rows, int cols)
{
    const size_t total = (size_t)rows * cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        y[i] = st(ld(x[i]) * ld(s[i / cols]));
}

extern "C" void scale_rows_@D@(const @T@* x, const @T@* s, @T@* y, int rows, int cols)
{
    scale_flat<<<4096, 256>>>(x, s, y, rows, cols);
}
""",
    """
SPEC = Spec(
    entry="scale_rows_@D@",
    sizes=[{"rows": 1, "cols": 1}, {"rows": 37, "cols": 1000}],
    timing_sizes=[{"rows": 16384, "cols": 512}],
    args={
        "x": In("@DT@", shape="(rows, cols)"),
        "s": In("@DT@", shape="rows"),
        "y": Out("@DT@", shape="(rows, cols)"),
        "rows": Scalar("int32"),
        "cols": Scalar("int32"),
    },
    reference=lambda x, s: {"y": x.astype(np.float32) * s.astype(np.float32)[:, None]},
)
""",
)

# Per dtype: extra substitutions (sizes, tolerances).
EXTRA = {
    "fp32": {
        "@N@": "1 << 20",
        "@MM@": "2048",
        "@TOL@": ", atol=1e-4, rtol=1e-3",
        "@MMTOL@": ", atol=1e-3, rtol=1e-3",
        "@MVTOL@": ", atol=1e-3, rtol=1e-3",
    },
    "bf16": {"@N@": "1 << 21", "@MM@": "4096", "@TOL@": "", "@MMTOL@": "", "@MVTOL@": ""},
}


def spec_head(what: str, dtype: str, body: str) -> str:
    """A spec file's docstring and the imports its body uses."""
    names = [n for n in ("In", "InOut", "Out", "Scalar", "Spec") if re.search(rf"\b{n}\(", body)]
    numpy = "import numpy as np\n\n" if "np." in body else ""
    return (
        f'"""{what} ({dtype}):\nbenchmarks/judged_vs_bench.py\'s case (benchmarks/make_judged_cases.py)."""\n\n'
        f"{numpy}from kernel_lsp.spec import {', '.join(names)}\n"
        + ("\n" if body.startswith("\ndef") else "")
    )


NULL_ENTRY = """// The null entry: one one-thread kernel writes one element. Judged minus in-process, its time is
// what the judged path itself adds to a run (benchmarks/judged_vs_bench.py).
#include <cuda_runtime.h>

__global__ void one(float* out) { out[0] = 1.0f; }

extern "C" void null_entry(float* out, int n)
{
    one<<<1, 1>>>(out);
}
"""
NULL_SPEC = '''"""The null entry (benchmarks/judged_vs_bench.py): one element written."""

import numpy as np

from kernel_lsp.spec import Out, Scalar, Spec

SPEC = Spec(
    entry="null_entry",
    sizes=[{"n": 1}],
    args={"out": Out("float32", shape=1), "n": Scalar("int32")},
    reference=lambda: {"out": np.ones(1, dtype=np.float32)},
)
'''

# The fake GPU's cases: launchers written for the CPU (its "device" memory is host memory).
FAKE = {
    "scale_fp32.cu": """// y = 2 x, one element at a time (the fake GPU's original).
extern "C" void scale_fp32(const float* x, float* y, int n)
{
    for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];
}
""",
    "scale_fp32.rewrite.cu": """// y = 2 x, four elements a step (the fake GPU's rewrite).
extern "C" void scale_fp32(const float* x, float* y, int n)
{
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        y[i] = 2.0f * x[i];
        y[i + 1] = 2.0f * x[i + 1];
        y[i + 2] = 2.0f * x[i + 2];
        y[i + 3] = 2.0f * x[i + 3];
    }
    for (; i < n; ++i) y[i] = 2.0f * x[i];
}
""",
    "scale_fp32.spec.py": '''"""y = 2 x on the fake GPU (benchmarks/judged_vs_bench.py --fake)."""

from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    entry="scale_fp32",
    sizes=[{"n": 1}, {"n": 1000}],
    timing_sizes=[{"n": 1 << 16}],
    args={"x": In("float32", shape="n"), "y": Out("float32", shape="n"), "n": Scalar("int32")},
    reference=lambda x: {"y": 2.0 * x},
)
''',
    "null_entry.cu": """// The fake GPU's null entry: one element written.
extern "C" void null_entry(float* out, int n)
{
    out[0] = 1.0f;
}
""",
    "null_entry.spec.py": NULL_SPEC,
}


def substitute(text: str, dtype: str) -> str:
    t, dt, raw = TYPES[dtype]
    for key, value in {"@T@": t, "@R@": raw, "@DT@": dt, "@D@": dtype, **EXTRA[dtype]}.items():
        text = text.replace(key, value)
    return text


def files() -> dict[str, str]:
    """Every file of the folder: name -> text."""
    out: dict[str, str] = {}
    for op, (what, original, rewrite, spec) in OPS.items():
        for dtype in ("fp32", "bf16"):
            name = f"{op}_{dtype}"
            head = f"// {what} ({dtype}): the original (benchmarks/make_judged_cases.py).\n"
            helpers = BLOCK_SUM if "block_sum(" in original else ""
            out[f"{name}.cu"] = head + PRELUDE[dtype] + helpers + substitute(original, dtype)
            head = f"// {what} ({dtype}): the rewrite (benchmarks/make_judged_cases.py).\n"
            helpers = BLOCK_SUM if "block_sum(" in rewrite else ""
            out[f"{name}.rewrite.cu"] = head + PRELUDE[dtype] + helpers + substitute(rewrite, dtype)
            body = substitute(spec, dtype)
            out[f"{name}.spec.py"] = spec_head(what, dtype, body) + body
    out["null_entry.cu"] = NULL_ENTRY
    out["null_entry.spec.py"] = NULL_SPEC
    for name, text in FAKE.items():
        out[f"fake/{name}"] = text
    return out


def main() -> int:
    for name, text in files().items():
        path = FOLDER / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"wrote {len(files())} files to {FOLDER}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
