"""`kernel-lsp check samples/` on the GPU: wall time with 1, 2, ... GPUs, and each kernel's
verification time (median, p90, max), one table row printed as each run is measured.

    python3 benchmarks/check_gpu.py --gpus 1,2    # a machine with 2 GPUs
    python3 benchmarks/check_gpu.py --fake        # no GPU: the fake one (CI, a laptop)

Each row is one `python -m kernel_lsp check PATH -v --specs run` in a fresh process (with
--fake, `python tests/kernel_lsp_on_fake_gpu.py check ...`: the tests' launcher, which selects
the fake GPU in its process; kernel-lsp reads no setting for it), its GPUs
chosen with CUDA_VISIBLE_DEVICES (the first N of those visible; the fake GPU takes the same
variable as its device count). The per-kernel times are the `-v` lines' (`dot ok (4.21 s)`: the
kernel's verification and timing on its GPU, its compile not included); `GPUs used` counts the
distinct GPUs those lines name. On the fake GPU the samples' real CUBINs do not load (every
verdict is `failed`): the rows there time the pipeline, not the verification.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ON_FAKE_GPU = ROOT / "tests" / "kernel_lsp_on_fake_gpu.py"  # `python -m kernel_lsp` on the fake GPU
# `kernel-lsp: [4/39] samples/dot/dot_bf16.cu: GPU 0: dot ok (4.21 s), ...`
FILE_LINE = re.compile(r"^kernel-lsp: \[(\d+)/(\d+)\] (\S+): (?:((?:\S+ )?GPU \d+): )?(.*)$")
# The targets are 90 s on one H200 and 55 s on two; 110 s each leaves room to see by how much a
# run misses and still fits a 1- and a 2-GPU run in 4 minutes (`timeout 240 ... --gpus 1,2`).
DEFAULT_TIMEOUT_S = 110.0
KERNEL = re.compile(r"(\S+) (\w+) \((\d+\.\d+) s[:)]")
# `(4.21 s: inputs+reference 2.03, verify 0.61)`: the phases of each kernel's time
PHASES = re.compile(r"\((\d+\.\d+) s: ([^)]*)\)")
PHASE = re.compile(r"(\S.*?) (\d+\.\d+)$")


def visible_devices(fake: bool) -> list[str]:
    """The device ids this process may hand out: CUDA_VISIBLE_DEVICES's, else nvidia-smi's
    (the fake GPU: 0..7)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [v.strip() for v in visible.split(",") if v.strip() and v.strip() != "-1"]
    if fake:
        return [str(i) for i in range(8)]
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    out = subprocess.run([smi, "-L"], capture_output=True, text=True, check=False).stdout
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def device_name(fake: bool, device: str) -> str:
    if fake:
        return "Fake GPU (no-GPU mode)"
    smi = shutil.which("nvidia-smi")
    if not smi:
        return "?"
    out = subprocess.run(
        [smi, "--query-gpu=name", "--format=csv,noheader", "-i", device],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return out.splitlines()[0] if out else "?"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_check(
    path: str,
    devices: list[str],
    extra: list[str],
    timeout_s: float,
    echo: Callable[[str], None] | None = None,
    fake: bool = False,
) -> dict:
    """One `kernel-lsp check` run (`fake`: on the fake GPU): its per-file lines read as they come
    (a thread reads the child's stderr, so the timeout holds however quiet or chatty the child
    is), each echoed through `echo` with the seconds since the start; killed at `timeout_s`, what
    it streamed by then still counts (`timed_out`)."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(devices), PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    kernel_lsp = [str(ON_FAKE_GPU)] if fake else ["-m", "kernel_lsp"]
    command = [sys.executable, *kernel_lsp, "check", path, "-v", "--specs", "run", *extra]
    start = time.perf_counter()
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # killed with its workers at the timeout
    )
    files: list[tuple[float, str]] = []  # (seconds since start, path) as each file's line came
    kernels: list[tuple[str, str, float]] = []  # (kernel, status, seconds)
    gpus: set[str] = set()
    phases: dict[str, float] = {}  # seconds by phase, summed over the kernels
    stdout_parts: list[str] = []
    lock = threading.Lock()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            at = time.perf_counter() - start
            m = FILE_LINE.match(line.rstrip("\n"))
            if echo is not None and (m or line.startswith("kernel-lsp:")):
                echo(f"{at:7.1f}s {line.rstrip()}")
            if not m:
                continue
            with lock:
                files.append((at, m.group(3)))
                if m.group(4):
                    gpus.add(m.group(4))
                    kernels.extend((k, status, float(s)) for k, status, s in KERNEL.findall(m.group(5)))
                    for _, listed in PHASES.findall(m.group(5)):
                        for part in listed.split(", "):
                            pm = PHASE.match(part)
                            if pm:
                                phases[pm.group(1)] = phases.get(pm.group(1), 0.0) + float(pm.group(2))

    def read_stdout() -> None:
        assert proc.stdout is not None
        stdout_parts.append(proc.stdout.read())

    readers = [threading.Thread(target=f, daemon=True) for f in (read_stderr, read_stdout)]
    for t in readers:
        t.start()
    timed_out = False
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        proc.wait()
    wall = time.perf_counter() - start
    for t in readers:
        t.join(5.0)
    stdout = "".join(stdout_parts)
    summary = next((ln for ln in stdout.splitlines() if ln.startswith("checked ")), "")
    with lock:
        return {
            "wall": wall,
            "rc": proc.returncode,
            "timed_out": timed_out,
            "files": list(files),
            "kernels": list(kernels),
            "gpus": set(gpus),
            "phases": dict(phases),
            "summary": summary,
        }


def progress_printer(prefix: str) -> Callable[[str], None]:
    """Echoes a run's per-file lines on our stderr (the table stays alone on stdout)."""

    def echo(line: str) -> None:
        print(f"{prefix} {line}", file=sys.stderr, flush=True)

    return echo


def row(count: int, run: int, r: dict) -> str:
    """The table row of one run; a run killed at its timeout says so in `wall s` and `exit`."""
    times = [s for _, _, s in r["kernels"]]
    verdicts: dict[str, int] = {}
    for _, status, _ in r["kernels"]:
        verdicts[status] = verdicts.get(status, 0) + 1
    first = f"{r['files'][0][0]:.1f}" if r["files"] else "-"
    wall = f"{r['wall']:.1f}" + (" timed out" if r["timed_out"] else "")
    exit_code = "timed out" if r["timed_out"] else str(r["rc"])
    worst = f"{max(times):.2f}" if times else "nan"
    return (
        f"| {count} | {run} | {wall} | {first} | {len(r['files'])} | {len(times)} | "
        f"{percentile(times, 0.5):.2f} | {percentile(times, 0.9):.2f} | {worst} | "
        f"{len(r['gpus'])} | {' '.join(f'{k} {v}' for k, v in sorted(verdicts.items()))} | {exit_code} |"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", default="1,2", help="GPU counts to run with, comma-separated (default 1,2)")
    p.add_argument("--path", default="samples/", help="what to check (default samples/)")
    p.add_argument("--repeat", type=int, default=1, help="runs per GPU count (default 1)")
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds per run; a run killed then still prints its row (default {DEFAULT_TIMEOUT_S:.0f}:"
        " a 1- and a 2-GPU run fit in about 4 minutes)",
    )
    p.add_argument("--quiet", action="store_true", help="no per-file progress on stderr")
    p.add_argument("--fake", action="store_true", help="the fake GPU (no GPU needed: CI, a laptop)")
    p.add_argument("extra", nargs="*", help="more arguments for `kernel-lsp check` (after --)")
    args = p.parse_args(argv)
    fake = args.fake
    devices = visible_devices(fake)
    if not devices:
        print("no GPU visible (--fake for the fake one)", file=sys.stderr)
        return 2
    name = device_name(fake, devices[0])
    print(f"# `kernel-lsp check {args.path} -v --specs run`; device: {name}; visible: {','.join(devices)}")
    print(
        "| GPUs | run | wall s | first file s | files | kernels | verify median s | p90 s | max s | GPUs used | verdicts | exit |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for count in [int(c) for c in args.gpus.split(",") if c.strip()]:
        if count > len(devices):
            print(f"| {count} | - | skipped: {len(devices)} GPU(s) visible | | | | | | | | | |", flush=True)
            continue
        for run in range(1, args.repeat + 1):
            echo = None if args.quiet else progress_printer(f"[{count} GPU(s), run {run}]")
            r = run_check(args.path, devices[:count], args.extra, args.timeout, echo, fake)
            print(row(count, run, r), flush=True)
            if r["phases"]:
                spent = ", ".join(
                    f"{k} {v:.1f}" for k, v in sorted(r["phases"].items(), key=lambda kv: -kv[1])
                )
                print(f"<!-- seconds by phase, summed over the kernels: {spent} -->", flush=True)
            if r["summary"]:
                print(f"<!-- {r['summary']} -->", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
