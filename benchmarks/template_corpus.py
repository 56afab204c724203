"""A template-heavy CUDA project written the way large real backends are (for the large-project
benchmark and the memory measurement): generic kernels in headers, many small `.cu` files that
only instantiate them, CUB-based reductions, `__device__` functions as template arguments,
headers that include each other (`#pragma once`), and CMake's `compile_commands.json` with nvcc
flags in `build/`.

    python benchmarks/template_corpus.py OUT_DIR [--files 150] [--heavy 12]

Layout:
    include/tk/config.cuh -> traits.cuh -> ops.cuh -> config.cuh   (a cycle, #pragma once)
    include/tk/elementwise.cuh   map<T, Op, UNROLL> (a __device__ function pointer argument),
                                 map_functor<T, F>, saxpy<T>
    include/tk/reduce.cuh        block_sum<T, BLOCK> (cub::BlockReduce), device_sum<T> (DeviceReduce)
    include/tk/gemm.cuh          gemm_tile<T, TM, TN, TK, THREADS> (unrolled register tiles)
    src/heavy/heavy.cu           many gemm_tile instances: the slow file
    src/reduce/reduce_*.cu       CUB reductions for one type each
    src/inst/inst_*.cu           explicit instances and their host launchers
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

HEADERS = {
    "config.cuh": """\
#pragma once
// Build configuration; pulls in the traits, which pull in the ops, which include this file back.
#include "traits.cuh"
#ifndef TK_BLOCK
#define TK_BLOCK 256
#endif
namespace tk {
constexpr int kWarp = 32;
inline int blocks_for(int n, int per_block) { return (n + per_block - 1) / per_block; }
}  // namespace tk
""",
    "traits.cuh": """\
#pragma once
#include "ops.cuh"
namespace tk {
template <typename T> struct Accum { using type = T; };
template <> struct Accum<int> { using type = long long; };
template <typename T> using accum_t = typename Accum<T>::type;
}  // namespace tk
""",
    "ops.cuh": """\
#pragma once
#include "config.cuh"
namespace tk {
template <typename T> __device__ T op_square(T x) { return x * x; }
template <typename T> __device__ T op_negate(T x) { return -x; }
template <typename T> __device__ T op_relu(T x) { return x > T(0) ? x : T(0); }
template <typename T> __device__ T op_twice(T x) { return x + x; }
struct Scale {
    float a;
    __device__ float operator()(float x) const { return a * x; }
};
}  // namespace tk
""",
    "elementwise.cuh": """\
#pragma once
#include "config.cuh"
namespace tk {
// A kernel templated on a __device__ function: its symbol carries the function's address.
template <typename T, T (*Op)(T), int UNROLL>
__global__ void map(T* __restrict__ x, int n)
{
    int base = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
        if (base + u < n) x[base + u] = Op(x[base + u]);
}

template <typename T, typename F>
__global__ void map_functor(T* x, int n, F f)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = f(x[i]);
}

template <typename T>
__global__ void saxpy(T a, const T* __restrict__ x, T* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

template <typename T, T (*Op)(T), int UNROLL>
void launch_map(T* x, int n)
{
    map<T, Op, UNROLL><<<blocks_for(n, TK_BLOCK * UNROLL), TK_BLOCK>>>(x, n);
}
}  // namespace tk
""",
    "reduce.cuh": """\
#pragma once
#include <cub/cub.cuh>
#include "traits.cuh"
namespace tk {
template <typename T, int BLOCK>
__global__ void block_sum(const T* __restrict__ x, accum_t<T>* __restrict__ out, int n)
{
    using Reduce = cub::BlockReduce<accum_t<T>, BLOCK>;
    __shared__ typename Reduce::TempStorage storage;
    int i = blockIdx.x * BLOCK + threadIdx.x;
    accum_t<T> v = i < n ? accum_t<T>(x[i]) : accum_t<T>(0);
    accum_t<T> total = Reduce(storage).Sum(v);
    if (threadIdx.x == 0) out[blockIdx.x] = total;
}

template <typename T>
size_t device_sum(T* in, T* out, int n)
{
    size_t bytes = 0;
    cub::DeviceReduce::Sum(nullptr, bytes, in, out, n);
    return bytes;
}

template <typename T>
size_t device_max(T* in, T* out, int n)
{
    size_t bytes = 0;
    cub::DeviceReduce::Max(nullptr, bytes, in, out, n);
    return bytes;
}
}  // namespace tk
""",
    "gemm.cuh": """\
#pragma once
#include "config.cuh"
namespace tk {
// Register-tiled GEMM: each thread keeps an RM x RN tile of C; ptxas works hard on these.
template <typename T, int TM, int TN, int TK, int THREADS>
__global__ void __launch_bounds__(THREADS)
gemm_tile(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N, int K)
{
    __shared__ T As[TK][TM];
    __shared__ T Bs[TK][TN];
    constexpr int RM = TM / 16;
    constexpr int RN = TN / 16;
    T acc[RM][RN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < RN; ++j) acc[i][j] = T(0);
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    for (int k0 = 0; k0 < K; k0 += TK) {
        for (int i = threadIdx.x; i < TK * TM; i += THREADS)
            As[i / TM][i % TM] = A[(blockIdx.y * TM + i % TM) * K + k0 + i / TM];
        for (int i = threadIdx.x; i < TK * TN; i += THREADS)
            Bs[i / TN][i % TN] = B[(k0 + i / TN) * N + blockIdx.x * TN + i % TN];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TK; ++k)
#pragma unroll
            for (int i = 0; i < RM; ++i)
#pragma unroll
                for (int j = 0; j < RN; ++j) acc[i][j] += As[k][ty * RM + i] * Bs[k][tx * RN + j];
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < RN; ++j)
            C[(blockIdx.y * TM + ty * RM + i) * N + blockIdx.x * TN + tx * RN + j] = acc[i][j];
}
}  // namespace tk
""",
}

TYPES = ("float", "double", "int")
OPS = ("op_square", "op_negate", "op_relu", "op_twice")
UNROLLS = (1, 2, 4, 8)
GEMM_SHAPES = list(itertools.product((32, 64, 128), (32, 64, 128), (8, 16, 32)))
GEMM_TYPES = ("float", "double", "int", "long long")
REDUCE_TYPES = ("float", "double", "int", "unsigned", "long long", "unsigned long long", "short", "char")


@dataclass
class Corpus:
    root: Path
    headers: list[Path] = field(default_factory=list)
    units: list[Path] = field(default_factory=list)  # .cu files
    heavy: Path | None = None
    database: Path | None = None

    @property
    def files(self) -> list[Path]:
        return self.headers + self.units


def _instance_file(i: int) -> str:
    t = TYPES[i % len(TYPES)]
    op = OPS[(i // len(TYPES)) % len(OPS)]
    unroll = UNROLLS[(i // (len(TYPES) * len(OPS))) % len(UNROLLS)]
    other = OPS[(i + 1) % len(OPS)]
    return f"""\
// Instances {i}: {t}, tk::{op} and tk::{other}, unrolled {unroll}x.
#include "tk/elementwise.cuh"

template __global__ void tk::map<{t}, tk::{op}<{t}>, {unroll}>({t}*, int);
template __global__ void tk::saxpy<{t}>({t}, const {t}*, {t}*, int);

void run_{i:03d}({t}* x, {t}* y, int n)
{{
    tk::launch_map<{t}, tk::{other}<{t}>, {unroll}>(x, n);
    tk::saxpy<<<tk::blocks_for(n, TK_BLOCK), TK_BLOCK>>>({t}(2), x, y, n);
}}
"""


def _reduce_file(t: str) -> str:
    return f"""\
// CUB reductions over {t}.
#include "tk/reduce.cuh"

template __global__ void tk::block_sum<{t}, 256>(const {t}*, tk::accum_t<{t}>*, int);

size_t workspace_{t.replace(" ", "_")}({t}* in, {t}* out, int n)
{{
    return tk::device_sum(in, out, n) + tk::device_max(in, out, n);
}}
"""


def _heavy_file(instances: int) -> str:
    lines = [
        "// The slow file: register-tiled GEMMs for many shapes and types (code generation is",
        "// most of its compile time; the CUB files are the ones whose front end is slow).",
        '#include "tk/gemm.cuh"',
        "",
    ]
    # Tiles of 8-byte types that need over 48 KB of static shared memory do not build (ptxas).
    shapes = [
        (t, (tm, tn, tk))
        for t, (tm, tn, tk) in itertools.product(GEMM_TYPES, GEMM_SHAPES)
        if tk * (tm + tn) * (8 if t in ("double", "long long") else 4) <= 48 * 1024
    ]
    for t, (tm, tn, tk) in shapes[:instances]:
        lines.append(
            f"template __global__ void tk::gemm_tile<{t}, {tm}, {tn}, {tk}, 256>"
            f"(const {t}*, const {t}*, {t}*, int, int, int);"
        )
    return "\n".join(lines) + "\n"


def write_corpus(root: Path, files: int = 150, heavy: int = 108, arch: str = "90") -> Corpus:
    """Write the project under `root` (created): `files` CUDA files in all, headers included."""
    corpus = Corpus(root)
    include = root / "include" / "tk"
    include.mkdir(parents=True, exist_ok=True)
    for name, text in HEADERS.items():
        (include / name).write_text(text)
        corpus.headers.append(include / name)
    left = max(0, files - len(corpus.headers))
    if heavy and left:
        path = root / "src" / "heavy" / "heavy.cu"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_heavy_file(heavy))
        corpus.units.append(path)
        corpus.heavy = path
        left -= 1
    reduce_count = min(len(REDUCE_TYPES), left // 16)
    for t in REDUCE_TYPES[:reduce_count]:
        path = root / "src" / "reduce" / f"reduce_{t.replace(' ', '_')}.cu"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_reduce_file(t))
        corpus.units.append(path)
    for i in range(left - reduce_count):
        path = root / "src" / "inst" / f"inst_{i:03d}.cu"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_instance_file(i))
        corpus.units.append(path)
    corpus.database = write_database(root, corpus.units, arch)
    return corpus


def nvcc_arguments(root: Path, unit: Path, arch: str = "90") -> list[str]:
    """What CMake 3.2x writes for a CUDA target built with nvcc."""
    rel = unit.relative_to(root)
    return [
        "nvcc",
        "-forward-unknown-to-host-compiler",
        "-DTK_BLOCK=256",
        f"-I{root / 'include'}",
        "-O3",
        "-DNDEBUG",
        "-std=c++17",
        f"--generate-code=arch=compute_{arch},code=[compute_{arch},sm_{arch}]",
        "-Xcompiler=-fPIC",
        "--expt-relaxed-constexpr",
        "-x",
        "cu",
        "-c",
        str(unit),
        "-o",
        f"CMakeFiles/tk.dir/{rel}.o",
    ]


def write_database(root: Path, units: list[Path], arch: str = "90") -> Path:
    build = root / "build"
    build.mkdir(exist_ok=True)
    entries = [
        {"directory": str(build), "file": str(u), "arguments": nvcc_arguments(root, u, arch)} for u in units
    ]
    path = build / "compile_commands.json"
    path.write_text(json.dumps(entries, indent=1))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out")
    parser.add_argument("--files", type=int, default=150)
    parser.add_argument("--heavy", type=int, default=108, help="gemm_tile instances in the slow file")
    args = parser.parse_args()
    corpus = write_corpus(Path(args.out).resolve(), args.files, args.heavy)
    print(
        f"{len(corpus.files)} files under {corpus.root} ({len(corpus.headers)} headers); database {corpus.database}"
    )


if __name__ == "__main__":
    main()
