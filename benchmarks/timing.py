"""How far our latency figures can be trusted (needs a GPU).

For a few kernels (samples where present, else the test fixtures), at the spec's timing size:
- our median (cold L2, and warm), next to cupyx.profiler.benchmark (warm L2), Triton's do_bench
  (it clears L2 like we do) and Nsight Compute's gpu__time_duration (--cache-control all,
  --clock-control none) for the same CUBIN, launch configuration and inputs;
- the coefficient of variation of our median over 5 separate processes (target <= 1%);
- our agreement with ncu (target within 3%);
- the wall time of one verify-and-measure on a warm session (target <= 1 s for a small kernel),
  and per kernel what the timing part of a check costs (check with timing minus check without,
  warm session): the price of fresh state, rotating input sets and poisoned outputs (issue 12).

    python benchmarks/timing.py            # prints the table; writes $OUT/timing.md when OUT is set
    python benchmarks/timing.py --only-ours --label before   # no cupyx, do_bench or ncu columns
    python benchmarks/timing.py --only transpose --no-alt    # some kernels; ncu kept
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernel_lsp.compile import CompileOptions, compile_source  # noqa: E402
from kernel_lsp.gpu import GpuCheckRequest, GpuSession, entry_symbols  # noqa: E402
from kernel_lsp.model import TimingSettings  # noqa: E402
from kernel_lsp.source import find_kernels, parse_directives  # noqa: E402
from kernel_lsp.spec import (  # noqa: E402
    DTYPES,
    Scalar,
    eval_shape,
    launch_dims,
    load_specs,
    make_inputs,
    source_constants,
    spec_path_for,
)

FIXTURES = REPO / "tests" / "gpu" / "fixtures"
CANDIDATES = [
    (FIXTURES / "good.cu", FIXTURES / "vadd.spec.py"),
    (REPO / "samples/vector_add/vector_add_fp32.cu", None),
    (REPO / "samples/vector_add/vector_add_bf16.cu", None),
    (REPO / "samples/transpose/transpose_fp32.cu", None),
    (REPO / "samples/softmax/softmax_fp32.cu", None),
]
PROCESSES = 5


def kernels(only: list[str] | None = None) -> list[tuple[Path, Path]]:
    out = []
    for cu, spec in CANDIDATES:
        if only and not any(o in str(cu) for o in only):
            continue
        spec = spec or Path(spec_path_for(str(cu)))
        if cu.exists() and spec.exists():
            loaded = load_specs(str(spec))
            if loaded.ok and loaded.specs and not loaded.specs[0].pipeline:
                out.append((cu, spec))
    return out


# --- one launch outside our runner (cupy), for cupyx, do_bench and ncu ----------------------------


class ExternalLaunch:
    """The same CUBIN, launch line and timing-size inputs, launched through cupy."""

    def __init__(self, cu: Path, spec_path: Path, arch: str):
        import cupy

        source = cu.read_text()
        spec = load_specs(str(spec_path)).specs[0]
        result = compile_source(source, str(cu), CompileOptions(arch=arch))
        assert result.ok, result.diagnostics
        self.name = self.__name__ = spec.kernel  # cupyx.profiler.benchmark wants __name__
        symbols = {k.name: k.mangled for k in result.kernels}
        symbols.update(entry_symbols(result.cubin, [spec.kernel]) if spec.kernel not in symbols else {})
        symbol = symbols[spec.kernel]
        self._tmp = tempfile.NamedTemporaryFile(suffix=".cubin", delete=False)  # noqa: SIM115
        self._tmp.write(result.cubin)
        self._tmp.close()
        self.fn = cupy.RawModule(path=self._tmp.name).get_function(symbol)
        sizes = spec.timing_cases()[-1]
        self.case = ", ".join(f"{k}={v}" for k, v in sizes.items())
        inputs = make_inputs(spec, sizes, 1234, 0)
        sig = next(k for k in find_kernels(source) if k.name == spec.kernel)
        d = parse_directives(source).launches_of(spec.kernel)[0]
        names = {**source_constants(source), **sizes}
        self.grid, self.block, self.smem = launch_dims(d.grid, d.block, d.smem, names)
        self.args = []
        self.buffers = {}
        for p in sig.params:
            arg = spec.args[p.name]
            if isinstance(arg, Scalar):
                self.args.append(spec.scalar_value(p.name, sizes))
                continue
            nbytes = int(np.prod(eval_shape(arg.shape, sizes))) * DTYPES[arg.dtype].itemsize
            buf = cupy.empty(max(1, nbytes), dtype=cupy.uint8)
            if p.name in inputs:
                buf.set(np.ascontiguousarray(inputs[p.name]).view(np.uint8).reshape(-1))
            else:
                buf.fill(0)
            self.buffers[p.name] = buf
            self.args.append(buf)

    def __call__(self) -> None:
        self.fn(self.grid, self.block, tuple(self.args), shared_mem=self.smem)


def cupyx_median(launch: ExternalLaunch) -> float:
    from cupyx.profiler import benchmark

    r = benchmark(launch, n_repeat=200, n_warmup=20)
    return float(np.median(r.gpu_times[0]))


def do_bench_median(cu: Path, spec: Path, arch: str) -> float | None:
    """Triton's do_bench in its own process: torch must be imported before cupy there."""
    out = subprocess.run(
        [sys.executable, __file__, "--do-bench", str(cu), str(spec), arch],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    try:
        return float(json.loads(out.stdout.strip().splitlines()[-1])["median_s"])
    except Exception:
        print(f"do_bench unavailable: {(out.stdout + out.stderr)[-600:]}", file=sys.stderr)
        return None


def do_bench_here(cu: Path, spec: Path, arch: str) -> float:
    import torch  # noqa: F401  (before cupy; do_bench times on torch's stream)
    from triton.testing import do_bench

    launch = ExternalLaunch(cu, spec, arch)
    return float(do_bench(launch, warmup=25, rep=100, return_mode="median")) * 1e-3


def ncu_median(cu: Path, spec: Path, arch: str) -> float | None:
    ncu = shutil.which("ncu") or next(
        (p for p in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu") if os.path.exists(p)),
        None,
    )
    if not ncu:
        return None
    name = load_specs(str(spec)).specs[0].kernel
    cmd = [
        ncu,
        "--metrics",
        "gpu__time_duration.sum",
        "--csv",
        "--cache-control",
        "all",
        "--clock-control",
        "none",
        "-k",
        f"regex:^{name}$",
        "--launch-skip",
        "3",
        "--launch-count",
        "15",
        sys.executable,
        __file__,
        "--launch-only",
        str(cu),
        str(spec),
        arch,
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
    except subprocess.TimeoutExpired:
        return None
    out = proc.stdout
    values = []
    for line in out.splitlines():
        if "gpu__time_duration.sum" in line:
            cells = [c.strip('"') for c in line.split('","')]
            unit, value = cells[-2], cells[-1].strip('"').replace(",", "")
            scale = {
                "ns": 1e-9,
                "nsecond": 1e-9,
                "us": 1e-6,
                "usecond": 1e-6,
                "ms": 1e-3,
                "msecond": 1e-3,
                "s": 1.0,
                "second": 1.0,
            }.get(unit)
            if scale and re.fullmatch(r"[0-9.]+", value):
                values.append(float(value) * scale)
    if not values:
        print(f"ncu gave no gpu__time_duration: {(proc.stdout + proc.stderr)[-600:]}", file=sys.stderr)
    return statistics.median(values) if values else None


# --- our figures ----------------------------------------------------------------------------------


def ours_once(cu: Path, spec: Path, cold: bool = True) -> float:
    with GpuSession(timing=TimingSettings(cold_l2=cold)) as gpu:
        r = gpu.check(GpuCheckRequest(cu.read_text(), str(cu), spec=str(spec)))
        assert r.ok, r.message
        return r.timings[-1].measurement.median_s


def fmt_us(s: float | None) -> str:
    return "n/a" if s is None else f"{s * 1e6:.2f}"


def check_costs(gpu: GpuSession, cu: Path, spec: Path, repeats: int = 2) -> tuple[float, float]:
    """(seconds of a whole check, seconds of its timing part), medians over `repeats` on a warm
    session: the timing part is a check with timing minus one without."""
    request = GpuCheckRequest(cu.read_text(), str(cu), spec=str(spec))
    gpu.check(request)  # compiles and warms up
    whole, verify_only = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = gpu.check(request)
        whole.append(time.perf_counter() - t0)
        assert r.ok, r.message
        t0 = time.perf_counter()
        gpu.check(replace(request, measure=False))
        verify_only.append(time.perf_counter() - t0)
    return statistics.median(whole), statistics.median(whole) - statistics.median(verify_only)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launch-only", nargs=3, metavar=("CU", "SPEC", "ARCH"))
    parser.add_argument("--ours-once", nargs=2, metavar=("CU", "SPEC"))
    parser.add_argument("--do-bench", nargs=3, metavar=("CU", "SPEC", "ARCH"))
    parser.add_argument("--only-ours", action="store_true", help="no cupyx, do_bench or ncu columns")
    parser.add_argument("--no-alt", action="store_true", help="no cupyx or do_bench columns (ncu kept)")
    parser.add_argument("--processes", type=int, default=PROCESSES)
    parser.add_argument("--label", default="", help="names the output: timing-<label>.md")
    parser.add_argument("--only", action="append", default=[], help="only kernels whose path has this")
    args = parser.parse_args()
    if args.do_bench:
        cu, spec, arch = args.do_bench
        print(json.dumps({"median_s": do_bench_here(Path(cu), Path(spec), arch)}))
        return 0
    if args.launch_only:  # the process ncu profiles
        cu, spec, arch = args.launch_only
        launch = ExternalLaunch(Path(cu), Path(spec), arch)
        import cupy

        for _ in range(20):
            launch()
        cupy.cuda.runtime.deviceSynchronize()
        return 0
    if args.ours_once:
        print(json.dumps({"median_s": ours_once(Path(args.ours_once[0]), Path(args.ours_once[1]))}))
        return 0

    rows, notes = [], []
    costs: dict[Path, tuple[float, float]] = {}
    with GpuSession() as gpu:
        assert gpu.available, gpu.reason
        dev = gpu.device
        arch = dev.arch
        # Verify-and-measure wall time on a warm session (the first call pays compile + device).
        small = (FIXTURES / "good.cu", FIXTURES / "vadd.spec.py")
        gpu.check(GpuCheckRequest(small[0].read_text(), str(small[0]), spec=str(small[1])))
        t0 = time.perf_counter()
        r = gpu.check(GpuCheckRequest(small[0].read_text(), str(small[0]), spec=str(small[1])))
        per_check = time.perf_counter() - t0
        notes.append(
            f"verify-and-measure, warm session, fixture vadd (4 cases + timing n=4194304): "
            f"{per_check:.2f} s (target <= 1 s) ok={r.ok}"
        )
        for cu, spec in kernels(args.only):
            costs[cu] = check_costs(gpu, cu, spec)
            print(f"cost {cu.name}: check {costs[cu][0]:.3f} s, timing part {costs[cu][1]:.3f} s", flush=True)
    for cu, spec in kernels(args.only):
        name = f"{cu.parent.name}/{cu.name}" if cu.parent != FIXTURES else f"fixture/{cu.name}"
        medians = []
        for _ in range(args.processes):
            out = subprocess.run(
                [sys.executable, __file__, "--ours-once", str(cu), str(spec)],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            try:
                medians.append(json.loads(out.stdout.strip().splitlines()[-1])["median_s"])
            except Exception:
                print(f"{name}: --ours-once failed: {out.stderr[-800:]}", file=sys.stderr)
        if not medians:
            continue
        ours = statistics.median(medians)
        cv = statistics.stdev(medians) / statistics.mean(medians) if len(medians) > 1 else 0.0
        warm = ours_once(cu, spec, cold=False)
        case = ", ".join(f"{k}={v}" for k, v in load_specs(str(spec)).specs[0].timing_cases()[-1].items())
        cpx = tdb = ncu = None
        if not args.only_ours:
            ncu = ncu_median(cu, spec, arch)
            if not args.no_alt:
                launch = ExternalLaunch(cu, spec, arch)
                cpx = cupyx_median(launch)
                tdb = do_bench_median(cu, spec, arch)
        agree = f"{(ours / ncu - 1) * 100:+.1f}%" if ncu else "n/a"
        whole, timing_part = costs.get(cu, (0.0, 0.0))
        print(name, case, ours, warm, cpx, tdb, ncu, f"cv={cv:.4f}", flush=True)
        rows.append(
            [
                name,
                case,
                fmt_us(ours),
                fmt_us(warm),
                fmt_us(cpx),
                fmt_us(tdb),
                fmt_us(ncu),
                agree,
                f"{cv * 100:.2f}%",
                f"{whole:.2f}",
                f"{timing_part:.2f}",
            ]
        )
    head = [
        "kernel",
        "case",
        "ours cold us",
        "ours warm us",
        "cupyx (warm) us",
        "do_bench us",
        "ncu us",
        "ours vs ncu",
        f"CV over {args.processes} procs",
        "check s",
        "timing s",
    ]
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    lines = [
        f"device: {dev.name} ({arch}, {dev.sm_count} SMs, L2 {dev.l2_bytes >> 20} MiB, "
        f"memory {dev.bandwidth_Bps / 1e9:.0f} GB/s, copy {dev.copy_bandwidth_Bps / 1e9:.0f} GB/s, fp32 "
        f"{dev.peak_flops.get('float32', 0) / 1e12:.1f} TFLOP/s measured)"
    ]
    lines += ["  ".join(str(c).ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in [head, *rows]]
    lines += notes
    text = "\n".join(lines)
    print(text)
    if os.environ.get("OUT"):
        name = f"timing-{args.label}.md" if args.label else "timing.md"
        Path(os.environ["OUT"], name).write_text(text + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # cupy's teardown after cuda.bindings can segfault; everything is written


if __name__ == "__main__":
    sys.exit(main())
