"""Achieved occupancy, read by Nsight Compute (`ncu`).

The occupancy kernel-lsp shows after a compile is theoretical: what the registers, shared memory
and block size allow. What the SMs actually held (tails of the grid, imbalance, blocks that
finish early) is a hardware counter, `sm__warps_active`, and only a profiler reads it. When `ncu`
is installed, kernel_lsp.gpu runs the timing case of a verified kernel once more, in a fresh
process under ncu:

    ncu --csv --metrics <METRICS> --kernel-name-base mangled --print-kernel-base mangled
        -k regex:^(sym1|sym2)$ python -m kernel_lsp.runner.profile JOB_DIR

That process (`main`) opens the GPU, loads the CUBIN, makes the timing case's buffers and inputs
and launches the pipeline once; ncu replays each kernel to read its counters. The parent
(`profile_occupancy`) parses ncu's CSV. Any failure (no ncu, counters not permitted, a timeout)
becomes a note, never an exception: achieved occupancy is a figure, not a verdict.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any

ACHIEVED = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL = "sm__maximum_warps_per_active_cycle_pct"
METRICS = (ACHIEVED, THEORETICAL)
NCU_PLACES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
PROFILE_TIMEOUT_S = 120.0  # ncu start-up and replays take seconds; a hang must not hold the GPU


@dataclass(frozen=True)
class OccupancyFigure:
    """One kernel of a pipeline: the fraction of the SMs' warp slots in use, averaged over the
    cycles an SM was active (achieved), next to ncu's own theoretical figure."""

    kernel: str
    achieved: float  # 0..1
    theoretical: float  # 0..1
    case: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OccupancyFigure:
        return cls(str(d["kernel"]), float(d["achieved"]), float(d["theoretical"]), str(d["case"]))


@dataclass
class OccupancyReport:
    figures: list[OccupancyFigure] = field(default_factory=list)
    note: str = ""  # why there are no figures, in words a user can act on


def find_ncu() -> str | None:
    """`KERNEL_LSP_NCU`, else `ncu` on PATH, else CUDA's usual places."""
    chosen = os.environ.get("KERNEL_LSP_NCU")
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    return shutil.which("ncu") or next((p for p in NCU_PLACES if os.access(p, os.X_OK)), None)


def ncu_command(ncu: str, symbols: list[str], job_dir: str) -> list[str]:
    pattern = "|".join(sorted({s.replace("$", r"\$") for s in symbols}))
    return [
        ncu,
        "--csv",
        "--metrics",
        ",".join(METRICS),
        "--kernel-name-base",
        "mangled",
        "--print-kernel-base",
        "mangled",
        "-k",
        f"regex:^({pattern})$",
        sys.executable,
        "-m",
        "kernel_lsp.runner.profile",
        job_dir,
    ]


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse_ncu_csv(output: str, symbol_to_kernel: dict[str, str], case: str) -> OccupancyReport:
    """ncu's `--csv` details page: one row per (launch, metric) under a header row naming
    "Kernel Name", "Metric Name" and "Metric Value"; `==PROF==` lines and the program's own output
    around it. Figures come in launch order; a kernel launched twice gets the mean of its launches."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if '"Metric Name"' in line), None)
    if start is None:
        return OccupancyReport(note=_why_no_rows(output))
    rows = csv.DictReader(line for line in lines[start:] if line.startswith('"'))
    values: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        name, metric = row.get("Kernel Name") or "", row.get("Metric Name") or ""
        value = _number(row.get("Metric Value") or "")
        if metric in METRICS and value is not None:
            values.setdefault(name, {}).setdefault(metric, []).append(value)
    figures = []
    for name, metrics in values.items():
        if ACHIEVED not in metrics:
            continue
        kernel = _source_name(name, symbol_to_kernel)
        achieved = sum(metrics[ACHIEVED]) / len(metrics[ACHIEVED]) / 100.0
        theo = metrics.get(THEORETICAL) or [0.0]
        figures.append(OccupancyFigure(kernel, achieved, sum(theo) / len(theo) / 100.0, case))
    return OccupancyReport(figures, "" if figures else _why_no_rows(output))


def _source_name(name: str, symbol_to_kernel: dict[str, str]) -> str:
    """ncu prints the mangled symbol when asked to, the demangled signature otherwise."""
    if name in symbol_to_kernel:
        return symbol_to_kernel[name]
    for kernel in symbol_to_kernel.values():
        if name == kernel or re.search(rf"(^|[\s:]){re.escape(kernel)}[(<]", name):
            return kernel
    return name


def _why_no_rows(output: str) -> str:
    if "ERR_NVGPUCTRPERM" in output:
        return (
            "ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM): an admin "
            "must allow them (NVreg_RestrictProfilingToAdminUsers=0)"
        )
    if "No kernels were profiled" in output:
        return "ncu profiled no kernel (the launch did not run under it)"
    tail = " ".join(line for line in output.strip().splitlines()[-3:] if line.strip())
    return f"ncu gave no occupancy figures: {tail[:300]}" if tail else "ncu gave no output"


def profile_occupancy(
    ncu: str,
    job: dict[str, Any],
    cubin: bytes,
    symbol_to_kernel: dict[str, str],
    timeout_s: float = PROFILE_TIMEOUT_S,
) -> OccupancyReport:
    """Run the job (spec desc, steps, sizes, device index) once under ncu. Never raises."""
    case = str(job.get("case", ""))
    with tempfile.TemporaryDirectory(prefix="kernel-lsp-ncu-") as job_dir:
        with open(os.path.join(job_dir, "job.json"), "w", encoding="utf-8") as f:
            json.dump(job, f)
        with open(os.path.join(job_dir, "kernel.cubin"), "wb") as f:
            f.write(cubin)
        cmd = ncu_command(ncu, list(symbol_to_kernel), job_dir)
        env = dict(os.environ, PYTHONPATH=_package_root() + os.pathsep + os.environ.get("PYTHONPATH", ""))
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout_s, check=False, env=env
            )
        except subprocess.TimeoutExpired:
            return OccupancyReport(note=f"ncu did not finish in {timeout_s:.0f} s")
        except OSError as e:
            return OccupancyReport(note=f"cannot run ncu ({ncu}): {e}")
    report = parse_ncu_csv(proc.stdout, symbol_to_kernel, case)
    if not report.figures and proc.returncode != 0:
        report.note += f" (ncu exit {proc.returncode}; {proc.stderr.strip()[-300:]})"
    return report


def _package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --- the profiled process -----------------------------------------------------------------------


def main(argv: list[str]) -> int:
    """Launch the job's pipeline once on its timing inputs (ncu reads the counters)."""
    from kernel_lsp.runner.device import CudaDevice
    from kernel_lsp.runner.fake import FakeDevice
    from kernel_lsp.runner.verify import TIMING_SEED, Buffers, launcher
    from kernel_lsp.runner.worker import build_steps, load_spec
    from kernel_lsp.spec import make_inputs

    job_dir = argv[0]
    with open(os.path.join(job_dir, "job.json"), encoding="utf-8") as f:
        job = json.load(f)
    with open(os.path.join(job_dir, "kernel.cubin"), "rb") as f:
        cubin = f.read()
    fake = job.get("fake") or os.environ.get("KERNEL_LSP_FAKE_GPU", "") not in ("", "0")
    device = FakeDevice(job["device"]) if fake else CudaDevice(job["device"])
    spec = load_spec(job["spec"])
    steps = build_steps(device, cubin, job["steps"], [], [])
    sizes = {k: int(v) for k, v in job["sizes"].items()}
    bufs = Buffers(device, spec, sizes)
    for name, array in make_inputs(spec, sizes, TIMING_SEED + spec.seed, 0).items():
        bufs.upload(name, array)
    bufs.poison(0xFF)
    launcher(device, steps, bufs)()
    device.sync()
    bufs.free()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
