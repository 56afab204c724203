"""The sample suite on a GPU: for each kernel in samples/, the naive latency, the tuned latency (best
point of its `// kernel-lsp: tune` space), the library's latency where a library has the kernel,
and the % of the roofline bound of each. Prints the table, and writes suite.md, suite.json and
suite.png (a chart) under --out (default: $OUT, else benchmarks/out).

    python benchmarks/suite.py [--only softmax] [--max-points 16] [--deadline 480]

Correctness goes through kernel_lsp.gpu.GpuSession (the worker verifies the naive kernel and the
tuned winner against the spec on every verification size). The latencies of all three columns are
taken here with one method, so they compare, and it is the GPU worker's (kernel_lsp.runner.device):
CUDA events around each launch (a pipeline counts as one), the L2 evicted before each sample by
a kernel that READS a buffer twice its size (a memset flush would leave the L2 dirty, and the
timed kernel would pay the write-back), a spin kernel ahead of each batch so that no launch waits
on Python, median of the samples.
The tuner here is a plain loop over the tune space (all of it up to --max-points, else the
defaults, each tunable varied alone, and random points), every point compiled ahead in a process
pool; the fastest points are then verified through the worker in order of speed (--verify-top),
and the fastest that verifies is the tuned one. (The optimizer's FSR tuner verifies every
candidate, which costs too much device time for 32 kernels in one run.)

Roofline: the bound of a kernel is max(bytes / memory bandwidth (the best of a
copy and the stream kernels, kernel_lsp.runner.hardware), flops / fp32 peak) from the spec's
work model and the device's measured figures (kernel_lsp.runner.hardware); % roofline is bound /
latency. cuBLAS's BF16 GEMM is measured against the BF16 tensor peak instead.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernel_lsp.compile import CompileOptions, compile_source  # noqa: E402
from kernel_lsp.source import find_kernels, parse_directives  # noqa: E402
from kernel_lsp.spec import (  # noqa: E402
    Scalar,
    Spec,
    eval_shape,
    launch_dims,
    load_specs,
    make_inputs,
    source_constants,
    spec_path_for,
)

MEMORY, COMPUTE = "memory", "compute"
BOUND = {"gemm": COMPUTE, "monte_carlo": COMPUTE}


@dataclass
class Row:
    kernel: str  # "softmax_bf16"
    family: str
    dtype: str
    bound: str
    naive_s: float = math.nan
    tuned_s: float = math.nan
    tuned_config: str = ""
    points: int = 0
    library: str = ""
    library_s: float = math.nan
    naive_roofline: float = math.nan
    tuned_roofline: float = math.nan
    library_roofline: float = math.nan
    naive_verified: str = ""
    tuned_verified: str = ""
    naive_check_s: float = math.nan  # the same points timed by the check (verify())
    tuned_check_s: float = math.nan
    notes: list[str] = field(default_factory=list)


# --- timing -------------------------------------------------------------------------------------


class Timer:
    """CUDA events around each call, cold L2 as the GPU worker makes it (see the module doc)."""

    BATCH = 10  # samples queued back to back behind one spin kernel

    def __init__(
        self,
        l2_bytes: int,
        sm_count: int,
        arch: str,
        budget_s: float,
        min_samples: int = 10,
        max_samples: int = 200,
    ):
        import cupy as cp

        from kernel_lsp.runner.device import TIMING_HELPERS

        self.cp = cp
        helpers = compile_source(TIMING_HELPERS, "kernel_lsp_timing.cu", CompileOptions(arch=arch))
        if not helpers.ok or helpers.cubin is None:
            raise RuntimeError(
                "the timing helpers do not compile: " + "; ".join(d.message for d in helpers.diagnostics)
            )
        path = os.path.join(tempfile.mkdtemp(prefix="suite-timer-"), "helpers.cubin")
        Path(path).write_bytes(helpers.cubin)
        module = cp.RawModule(path=path)
        self.flush_fn, self.spin_fn = module.get_function("kl_flush"), module.get_function("kl_spin")
        nbytes = max(2 * l2_bytes, 64 << 20)
        self.flush_buf = cp.full(nbytes // 4, 0x5A5A5A5A, dtype=cp.uint32)
        self.flush_args = (self.flush_buf, np.uint64(nbytes // 16), cp.zeros(4, dtype=cp.uint32))
        self.flush_blocks = 4 * sm_count
        self.budget_s, self.min_samples, self.max_samples = budget_s, min_samples, max_samples

    def __call__(self, fn) -> float:
        cp = self.cp
        for _ in range(3):  # warm-up: module load, caches of the libraries' own
            fn()
        cp.cuda.Device().synchronize()
        pairs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(self.BATCH)]
        samples: list[float] = []
        t0 = time.perf_counter()
        while len(samples) < self.max_samples and (
            len(samples) < self.min_samples or time.perf_counter() - t0 < self.budget_s
        ):
            # ~40 us of host work per sample: the spin covers it, so no timed launch waits on Python.
            self.spin_fn((1,), (1,), (np.uint64(40_000 * self.BATCH),))
            for start, end in pairs:
                self.flush_fn((self.flush_blocks,), (256,), self.flush_args)
                start.record()
                fn()
                end.record()
            pairs[-1][1].synchronize()
            samples += [cp.cuda.get_elapsed_time(start, end) / 1e3 for start, end in pairs]
        return float(np.median(samples))


# --- running a sample's kernels directly ----------------------------------------------------------


class Launcher:
    """The spec's buffers on the device (made once at the timing size) and the kernel's launches,
    for any point of the tune space."""

    def __init__(self, spec: Spec, source: str, path: str, sizes: dict[str, int], arch: str):
        import cupy as cp

        self.cp, self.spec, self.source, self.path, self.sizes, self.arch = (
            cp,
            spec,
            source,
            path,
            sizes,
            arch,
        )
        self.host = make_inputs(spec, sizes, seed=7, run=0)
        self.dev: dict[str, Any] = {}
        for name, arg in spec.buffers().items():
            shape = eval_shape(arg.shape, sizes)
            if name in self.host:
                a = self.host[name]
                self.dev[name] = cp.asarray(a.view(np.uint16) if str(a.dtype) == "bfloat16" else a)
            else:
                nbytes = math.prod(shape) * (
                    2 if arg.dtype in ("bfloat16", "float16") else np.dtype(arg.dtype).itemsize
                )
                self.dev[name] = cp.zeros(max(1, nbytes), dtype=cp.uint8)
        self.scalars = {n: spec.scalar_value(n, sizes) for n, a in spec.args.items() if isinstance(a, Scalar)}
        self.signatures = {k.name: k for k in find_kernels(source)}
        self.directives = parse_directives(source)
        self._tmp = tempfile.mkdtemp(prefix="suite-")

    def build(self, config: dict[str, str], result=None):
        """A callable that runs the pipeline once, or None with the reason. `result`: this point's
        compile, when it was made ahead."""
        cp = self.cp
        defines = tuple(f"{k}={v}" for k, v in config.items())
        if result is None:
            result = compile_source(self.source, self.path, CompileOptions(arch=self.arch, defines=defines))
        if not result.ok or result.cubin is None:
            return None, "does not compile"
        cubin_path = os.path.join(self._tmp, f"k{abs(hash(defines))}.cubin")
        with open(cubin_path, "wb") as f:
            f.write(result.cubin)
        module = cp.RawModule(path=cubin_path)
        symbols = {k.name: k.mangled for k in result.kernels}
        constants = source_constants(self.source, defines)
        steps = []
        seen: dict[str, int] = {}
        for kname in self.spec.kernels:
            i = seen.get(kname, 0)
            seen[kname] = i + 1
            d = self.directives.launches_of(kname)[i]
            try:
                grid, block, smem = launch_dims(d.grid, d.block, d.smem, {**self.sizes, **constants})
            except Exception as e:
                return None, f"launch: {e}"
            if math.prod(block) > 1024:
                return None, "block over 1024 threads"
            fn = module.get_function(symbols.get(kname, kname))
            args = tuple(
                self.dev[p.name] if p.name in self.dev else self.scalars[p.name]
                for p in self.signatures[kname].params
            )
            steps.append((fn, grid, block, smem, args))

        def run() -> None:
            for fn, grid, block, smem, args in steps:
                fn(grid, block, args, shared_mem=smem)

        return run, ""


def tune_points(space: dict[str, tuple[str, ...]], max_points: int, seed: int = 0) -> list[dict[str, str]]:
    """The defaults first (each tunable's first value), then the whole space if it is small, else
    each tunable varied alone and random points up to max_points."""
    names = list(space)
    default = {n: space[n][0] for n in names}
    every = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(space[n] for n in names))]
    if len(every) <= max_points:
        return [default] + [p for p in every if p != default]
    points = [default]
    for n in names:
        points += [{**default, n: v} for v in space[n][1:]]
    rng = random.Random(seed)
    rest = [p for p in every if p not in points]
    rng.shuffle(rest)
    return (points + rest)[: max(max_points, len(points))]


# --- libraries ----------------------------------------------------------------------------------


def library_call(family: str, dtype: str, launcher: Launcher):
    """(name, callable) for the library version of a sample on the same inputs, or (None, None)."""
    import cupy as cp
    import torch
    import torch.nn.functional as F

    h, s = launcher.host, launcher.sizes
    tdt = torch.bfloat16 if dtype == "bf16" else torch.float32

    def t(name: str):
        a = h[name]
        if str(a.dtype) == "bfloat16":
            return torch.from_numpy(a.view(np.int16)).cuda().view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(a)).cuda()

    if family == "vector_add":
        a, b = t("a"), t("b")
        c = torch.empty_like(a)
        return "torch.add", lambda: torch.add(a, b, out=c)
    if family == "dot":
        a, b = t("a"), t("b")
        return "torch.dot", lambda: torch.dot(a, b)
    if family == "reduce_sum":
        x = t("x")
        return "torch.sum", lambda: torch.sum(x)
    if family == "transpose":
        src = t("src")
        dst = torch.empty((s["cols"], s["rows"]), dtype=tdt, device="cuda")
        return "torch copy_(src.T)", lambda: dst.copy_(src.t())
    if family == "gemm":
        A, B = t("A"), t("B")
        C = torch.empty((s["M"], s["N"]), dtype=tdt, device="cuda")
        return "cuBLAS (torch.matmul)", lambda: torch.matmul(A, B, out=C)
    if family == "scan":
        x = t("x")
        y = torch.empty_like(x)
        return "torch.cumsum", lambda: torch.cumsum(x, 0, out=y)
    if family == "softmax":
        x = t("x")
        return "torch.softmax", lambda: torch.softmax(x, dim=-1)
    if family == "rmsnorm":
        x, w = t("x"), t("weight")
        return "F.rms_norm", lambda: F.rms_norm(x, (s["cols"],), w, 1e-6)
    if family == "layernorm":
        x, w, b = t("x"), t("weight"), t("bias")
        return "F.layer_norm", lambda: F.layer_norm(x, (s["cols"],), w, b, 1e-5)
    if family == "silu_and_mul":
        x, d = t("x"), s["d"]
        return "F.silu(g) * u", lambda: F.silu(x[:, :d]) * x[:, d:]
    if family in ("spmv_csr", "spmv_ell"):
        import cupyx.scipy.sparse as sp

        rows = s["rows"]
        if family == "spmv_csr":
            row_ptr, col_idx, values = h["row_ptr"], h["col_idx"], h["values"]
        else:  # the same matrix in CSR, without the ELL padding
            width = int(launcher.scalars["width"])
            cols = h["col_idx"].reshape(width, rows).T
            vals = h["values"].reshape(width, rows).T
            keep = cols >= 0
            row_ptr = np.concatenate([[0], np.cumsum(keep.sum(1))]).astype(np.int32)
            col_idx, values = cols[keep].astype(np.int32), vals[keep]
        if dtype == "bf16":
            crow = torch.from_numpy(row_ptr.astype(np.int64)).cuda()
            col = torch.from_numpy(col_idx.astype(np.int64)).cuda()
            val = torch.from_numpy(values.astype(np.float32)).cuda().to(torch.bfloat16)
            m = torch.sparse_csr_tensor(crow, col, val, (rows, rows))
            x = t("x").unsqueeze(1)
            m @ x  # raises here if this torch has no bf16 sparse matmul
            return "torch sparse CSR (bf16)", lambda: m @ x
        m = sp.csr_matrix(
            (cp.asarray(values.astype(np.float32)), cp.asarray(col_idx), cp.asarray(row_ptr)),
            shape=(rows, rows),
        )
        x = cp.asarray(h["x"])
        return "cuSPARSE (cupyx CSR)" + (" of the ELL matrix" if family == "spmv_ell" else ""), lambda: m @ x
    return None, None


# --- the suite ----------------------------------------------------------------------------------


def samples(root: Path, only: list[str]) -> list[Path]:
    # The suite's families are `<family>/<family>_{fp32,bf16}.cu` with a spec; the real-project
    # samples (host_program, cmake_project, torch_extension) are not part of it.
    files = sorted(
        p
        for p in root.rglob("*.cu")
        if p.stem in (f"{p.parent.name}_fp32", f"{p.parent.name}_bf16") and p.with_suffix(".spec.py").exists()
    )
    return [p for p in files if not only or any(o in p.stem for o in only)]


def roofline(work: dict[str, float], seconds: float, bandwidth: float, peak: float) -> float:
    if not seconds or math.isnan(seconds):
        return math.nan
    bound = max(
        work.get("bytes", 0.0) / bandwidth if bandwidth else 0.0,
        work.get("flops", 0.0) / peak if peak else 0.0,
    )
    return bound / seconds


def compile_point(source: str, path: str, arch: str, config: dict[str, str]):
    """One tune point's compile, in a pool process (the result travels back pickled)."""
    defines = tuple(f"{k}={v}" for k, v in config.items())
    return compile_source(source, path, CompileOptions(arch=arch, defines=defines))


def plan(cu: Path, max_points: int) -> tuple[str, list[dict[str, str]]]:
    source = cu.read_text()
    space = parse_directives(source).tune_space
    return source, (tune_points(space, max_points) if space else [{}])


def verify(
    gpu, source: str, path: Path, spec_path: str, config: dict[str, str], sizes: dict[str, Any]
) -> tuple[str, float]:
    """The worker's verdict on one point, and its median at `sizes` as a check times it: fresh
    module state, rotating input sets and poisoned outputs (issue 12). A time over the roofline
    fails the check, so an honest point that the bound called suspicious shows here as FAILED."""
    from kernel_lsp.compile import CompileOptions as Opts
    from kernel_lsp.gpu import GpuCheckRequest

    defines = tuple(f"{k}={v}" for k, v in config.items())
    request = GpuCheckRequest(source, str(path), spec=spec_path, artifact=Opts(defines=defines), measure=True)
    check = gpu.check(request)
    same = [t for t in check.timings if t.sizes == sizes]
    if not same and len(check.timings) == 1:
        same = check.timings
    median = same[0].measurement.median_s if same else math.nan
    return ("ok" if check.ok else f"FAILED: {check.message[:160]}"), median


def run_suite(args: argparse.Namespace) -> list[Row]:
    from kernel_lsp.gpu import GpuSession

    deadline = time.monotonic() + args.deadline
    gpu = GpuSession(launch_timeout_s=10.0)
    if not gpu.available:
        print(f"no GPU: {gpu.reason}", file=sys.stderr)
        sys.exit(2)
    dev = gpu.device
    assert dev is not None
    bandwidth = dev.bandwidth_Bps
    fp32_peak = dev.peak_flops.get("float32", 0.0)
    print(
        f"device: {dev.name} ({dev.arch}, {dev.sm_count} SMs), memory bandwidth {bandwidth / 1e9:.0f} GB/s ({dev.memory_bandwidth_source}), "
        f"fp32 peak {fp32_peak / 1e12:.1f} TFLOP/s, bf16 peak {dev.peak_flops.get('bfloat16', 0) / 1e12:.0f} TFLOP/s",
        flush=True,
    )
    timer = Timer(dev.l2_bytes or (50 << 20), dev.sm_count, dev.arch, args.budget)
    rows: list[Row] = []
    files = samples(ROOT / args.samples, args.only)
    # Every point of every kernel compiles ahead, in parallel, while the GPU times earlier kernels.
    from kernel_lsp.compile import compile_pool, end_pool

    pool = compile_pool(max(1, (os.cpu_count() or 2) - 1))
    compiles = {}
    for cu in files:
        source, points = plan(cu, args.max_points)
        compiles[cu] = [pool.submit(compile_point, source, str(cu), dev.arch, c) for c in points]
    for cu in files:
        if time.monotonic() > deadline:
            print(f"deadline reached: {cu.name} and later not run", flush=True)
            break
        family, dtype = cu.parent.name, cu.stem.rsplit("_", 1)[-1]
        row = Row(cu.stem, family, dtype, BOUND.get(family, MEMORY))
        rows.append(row)
        t_start = time.monotonic()
        try:
            spec_path = spec_path_for(str(cu))
            spec = load_specs(spec_path).specs[0]
            source, points = plan(cu, args.max_points)
            sizes = spec.timing_cases()[0]
            work = spec.work_for(sizes)
            launcher = Launcher(spec, source, str(cu), sizes, dev.arch)
            timed: list[tuple[float, int]] = []
            for i, (config, done) in enumerate(zip(points, compiles.pop(cu), strict=True)):
                try:
                    result = done.result(timeout=600)
                except Exception as e:  # a compile that died takes only its point with it
                    row.notes.append(f"{config}: compile: {type(e).__name__}")
                    continue
                run, _why = launcher.build(config, result)
                if run is None:
                    continue
                seconds = timer(run)
                row.points += 1
                if i == 0:
                    row.naive_s = seconds
                timed.append((seconds, i))
            timed.sort()
            try:
                name, fn = library_call(family, dtype, launcher)
            except Exception as e:  # a library without this dtype or op: say so, carry on
                name, fn = None, None
                row.notes.append(f"library: {type(e).__name__}: {str(e)[:80]}")
            if fn is not None:
                row.library = name or ""
                row.library_s = timer(fn)
                peak = (
                    dev.peak_flops.get("bfloat16", fp32_peak)
                    if family == "gemm" and dtype == "bf16"
                    else fp32_peak
                )
                row.library_roofline = roofline(work, row.library_s, bandwidth, peak)
            # The tuned point: the fastest that verifies (or, with --no-verify, the fastest).
            if not args.no_verify:
                row.naive_verified, row.naive_check_s = verify(gpu, source, cu, spec_path, points[0], sizes)
            for seconds, i in timed[: 1 if args.no_verify else args.verify_top]:
                if args.no_verify:
                    verdict, check_s = "", math.nan
                elif i == 0:
                    verdict, check_s = row.naive_verified, row.naive_check_s
                else:
                    verdict, check_s = verify(gpu, source, cu, spec_path, points[i], sizes)
                if verdict.startswith("FAILED"):
                    row.notes.append(f"{' '.join(f'{k}={v}' for k, v in points[i].items())} {verdict}")
                    continue
                row.tuned_s, row.tuned_verified, row.tuned_check_s = seconds, verdict, check_s
                row.tuned_config = " ".join(f"{k}={v}" for k, v in points[i].items()) or "—"
                break
            row.naive_roofline = roofline(work, row.naive_s, bandwidth, fp32_peak)
            row.tuned_roofline = roofline(work, row.tuned_s, bandwidth, fp32_peak)
        except Exception as e:  # one broken sample must not lose the others' results
            row.notes.append(f"{type(e).__name__}: {str(e)[:200]}")
        print(format_row(row) + f"   ({time.monotonic() - t_start:.1f} s)", flush=True)
        write_outputs(rows, dev, Path(args.out))
    end_pool(pool)
    gpu.close()
    return rows


# --- output -------------------------------------------------------------------------------------

HEAD = ["kernel", "bound", "naive", "tuned", "speedup", "tuned config", "library", "library time",
        "naive %RL", "tuned %RL", "library %RL", "check naive", "check tuned", "verified"]  # fmt: skip


def ms(s: float) -> str:
    return "—" if s is None or math.isnan(s) else (f"{s * 1e3:.3f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us")


def pct(f: float) -> str:
    return "—" if f is None or math.isnan(f) else f"{f * 100:.0f}%"


def ratio(check_s: float, timer_s: float) -> str:
    """The check's median against this script's, e.g. `65.1 us (1.004)`."""
    if check_s is None or math.isnan(check_s) or not timer_s or math.isnan(timer_s):
        return "—"
    return f"{ms(check_s)} ({check_s / timer_s:.3f})"


def cells(r: Row) -> list[str]:
    speed = r.naive_s / r.tuned_s if r.tuned_s and not math.isnan(r.tuned_s) else math.nan
    verified = (
        r.tuned_verified
        if r.tuned_verified == r.naive_verified
        else f"{r.naive_verified} / {r.tuned_verified}"
    )
    if r.notes:
        verified = (verified + " " if verified else "") + "; ".join(r.notes)
    return [r.kernel, r.bound, ms(r.naive_s), ms(r.tuned_s), "—" if math.isnan(speed) else f"{speed:.2f}x",
            r.tuned_config, r.library or "—", ms(r.library_s), pct(r.naive_roofline), pct(r.tuned_roofline),
            pct(r.library_roofline), ratio(r.naive_check_s, r.naive_s), ratio(r.tuned_check_s, r.tuned_s),
            verified or "not verified"]  # fmt: skip


def format_row(r: Row) -> str:
    return " | ".join(cells(r))


def markdown(rows: list[Row], dev: Any) -> str:
    lines = [
        f"Device: **{dev.name}** ({dev.arch}), measured memory bandwidth {dev.bandwidth_Bps / 1e9:.0f} GB/s (copy {dev.copy_bandwidth_Bps / 1e9:.0f} GB/s), "
        f"fp32 peak {dev.peak_flops.get('float32', 0) / 1e12:.1f} TFLOP/s. Latency: median, cold L2. "
        "%RL: % of the roofline bound (memory: minimal bytes / memory bandwidth; compute: flops / peak). "
        "check naive / check tuned: the same point timed by the verifying check (fresh module state, "
        "rotating input sets, poisoned outputs), and its ratio to this script's time.",
        "",
        "| " + " | ".join(HEAD) + " |",
        "|" + "---|" * len(HEAD),
    ]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    mem = [r for r in rows if r.bound == MEMORY and not math.isnan(r.tuned_roofline)]
    if mem:
        hit = [r for r in mem if r.tuned_roofline >= 0.8]
        lines += ["", f"Memory-bound kernels at >= 80% of memory bandwidth after tuning: {len(hit)} of {len(mem)}"
                  f" (below: {', '.join(r.kernel for r in mem if r.tuned_roofline < 0.8) or 'none'})."]  # fmt: skip
    pairs = [(c, t) for r in rows for c, t in ((r.naive_check_s, r.naive_s), (r.tuned_check_s, r.tuned_s))]
    ratios = sorted(c / t for c, t in pairs if not math.isnan(c) and t and not math.isnan(t))
    if ratios:
        lines += [f"Check time / suite time over {len(ratios)} points: median {np.median(ratios):.3f}, "
                  f"range {ratios[0]:.3f}-{ratios[-1]:.3f}."]  # fmt: skip
    return "\n".join(lines) + "\n"


def chart(rows: list[Row], dev: Any, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r.kernel for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(10, len(rows) * 0.45), 5.5))
    w = 0.28
    for k, (label, key) in enumerate(
        [("naive", "naive_roofline"), ("tuned", "tuned_roofline"), ("library", "library_roofline")]
    ):
        vals = [0 if math.isnan(getattr(r, key)) else getattr(r, key) * 100 for r in rows]
        ax.bar(x + (k - 1) * w, vals, w, label=label)
    ax.axhline(80, color="gray", linestyle="--", linewidth=1)
    ax.set_xticks(x, names, rotation=75, ha="right", fontsize=8)
    ax.set_ylabel("% of roofline bound")
    ax.set_title(f"kernel-lsp samples on {dev.name}: naive, tuned and library vs roofline")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(rows: list[Row], dev: Any, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "suite.md").write_text(markdown(rows, dev))
    (out / "suite.json").write_text(
        json.dumps({"device": dev.name, "rows": [asdict(r) for r in rows]}, indent=1)
    )
    try:
        chart(rows, dev, out / "suite.png")
    except Exception as e:  # no matplotlib: the table still stands
        print(f"chart skipped: {e}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", default="samples", help="folder of samples (relative to the repository)")
    p.add_argument("--only", action="append", default=[], help="only samples whose name contains this")
    p.add_argument("--max-points", type=int, default=32, help="tune points timed per kernel at most")
    p.add_argument("--verify-top", type=int, default=3, help="fastest points verified until one passes")
    p.add_argument("--budget", type=float, default=0.08, help="seconds of samples per timing")
    p.add_argument("--deadline", type=float, default=480.0, help="stop starting new kernels after this")
    p.add_argument("--no-verify", action="store_true", help="skip the verification through the worker")
    p.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "benchmarks" / "out"))
    args = p.parse_args(argv)
    rows = run_suite(args)
    print()
    print(" | ".join(HEAD))
    for r in rows:
        print(format_row(r))
    return 0 if all("FAILED" not in r.naive_verified + r.tuned_verified and not r.notes for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
