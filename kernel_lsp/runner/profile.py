"""A profile of a verified kernel, read by Nsight Compute (`ncu`): what limits it, and where.

When `ncu` is installed, kernel_lsp.gpu runs the largest timed case of a verified kernel once
more, in a fresh process under ncu, never on the timing path:

    ncu -f -o JOB_DIR/report --import-source yes --section SpeedOfLight ... --section SourceCounters
        --kernel-name-base mangled -k regex:^(sym1|sym2)$ python -m kernel_lsp.runner.one_launch JOB_DIR

That process (`one_launch.run_job`) opens the GPU, loads the CUBIN (NVRTC builds it with `-lineinfo`), makes the
timing case's buffers and inputs and launches the pipeline once; ncu replays each kernel to read
its counters. The parent (`profile_kernels`) then prints two pages of the report:

    ncu -i report.ncu-rep --page raw --csv --print-units base            -> per-kernel metrics
    ncu -i report.ncu-rep --page source --csv --print-source cuda,sass   -> per-line counters

and reads them (runner.ncu_pages) into a verdict per kernel (runner.limiter) and the hottest
source lines (runner.hot_lines). Any failure (no ncu, counters not permitted, a timeout, a metric
this ncu lacks) becomes a note or an entry of `missing`, never an exception.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kernel_lsp import tempdirs
from kernel_lsp.gpu_reports import ProfileReport
from kernel_lsp.procs import ToolRuns
from kernel_lsp.runner.hot_lines import hot_lines
from kernel_lsp.runner.limiter import kernel_profile
from kernel_lsp.runner.ncu_pages import parse_raw_page, parse_source_page
from kernel_lsp.runner.one_launch import tool_command, write_job

NCU_PLACES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
PROFILE_TIMEOUT_S = 120.0  # ncu replays each kernel ~34 times: GEMM of 16 ms took 14 s on an H200
PAGE_TIMEOUT_S = 60.0
PROFILE_LOCK = os.path.join(tempfile.gettempdir(), "kernel-lsp-ncu.lock")
SECTIONS = (
    "SpeedOfLight",
    "ComputeWorkloadAnalysis",
    "MemoryWorkloadAnalysis",
    "MemoryWorkloadAnalysis_Tables",
    "Occupancy",
    "LaunchStats",
    "WarpStateStats",
    "SchedulerStats",
    "SourceCounters",
)


def find_ncu() -> str | None:
    """`KERNEL_LSP_NCU`, else `ncu` on PATH, else CUDA's usual places."""
    chosen = os.environ.get("KERNEL_LSP_NCU")
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    return shutil.which("ncu") or next((p for p in NCU_PLACES if os.access(p, os.X_OK)), None)


def collect_command(ncu: str, symbols: list[str], report: str) -> list[str]:
    """ncu and its options; `one_launch.tool_command` adds the profiled launch."""
    pattern = "|".join(sorted({s.replace("$", r"\$") for s in symbols}))
    sections = [a for s in SECTIONS for a in ("--section", s)]
    return [
        ncu,
        "-f",
        "-o",
        report,
        "--import-source",
        "yes",
        *sections,
        "--kernel-name-base",
        "mangled",
        "-k",
        f"regex:^({pattern})$",
    ]


def page_command(ncu: str, report: str, page: str) -> list[str]:
    cmd = [ncu, "-i", report, "--print-kernel-base", "mangled", "--csv", "--page", page]
    return cmd + (["--print-units", "base"] if page == "raw" else ["--print-source", "cuda,sass"])


def build_report(
    raw_page: str,
    source_page: str,
    symbol_to_kernel: dict[str, str],
    main_path: str,
    case: str = "",
    main_text: str | None = None,
) -> ProfileReport:
    """The report from the two printed pages (pure: tests feed it recordings). `main_text`: the
    source that was compiled, for the hot lines' text."""
    kernels = [
        kernel_profile(_source_name(k.name, symbol_to_kernel), k.metrics, case)
        for k in parse_raw_page(raw_page)
    ]
    page = parse_source_page(source_page)
    names = {f: _source_name(f, symbol_to_kernel) for f in page.functions}
    report = ProfileReport(kernels, hot_lines(page, names, main_path, main_text), case)
    notes = []
    if not kernels:
        notes.append(_why_no_rows(raw_page))
    elif not page.lines:
        notes.append("no per-line counters (the SourceCounters section or -lineinfo is missing)")
    report.note = "; ".join(notes)
    return report


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
    return f"ncu gave no figures: {tail[:300]}" if tail else "ncu gave no output"


def _run(
    cmd: list[str], timeout_s: float, env: dict[str, str] | None = None, runs: ToolRuns | None = None
) -> tuple[int, str]:
    """(exit code, stdout + stderr); raises only TimeoutExpired and OSError."""
    return (runs or ToolRuns()).run(cmd, timeout_s, env)


@contextlib.contextmanager
def one_profile_at_a_time(timeout_s: float, runs: ToolRuns | None = None) -> Iterator[str]:
    """Held while ncu collects: one profile at a time on this machine, from any kernel-lsp
    process (two replaying at once disturb each other's counters). Yields
    "" once held (or where there is no lock to take), else why not: waited out, or its owner
    closed while it waited."""
    try:
        fd = os.open(PROFILE_LOCK, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError:  # another user's file we cannot read, a link: profile without it
        yield ""
        return
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if runs is not None and runs.ended:
                    yield "not profiled: closed while another profile ran"
                    return
                if time.monotonic() >= deadline:
                    yield f"not profiled: another profile held this machine's GPU for {timeout_s:.0f} s"
                    return
                time.sleep(0.1)
        yield ""
    finally:
        os.close(fd)  # and with it the lock


def profile_kernels(
    ncu: str,
    job: dict[str, Any],
    cubin: bytes,
    symbol_to_kernel: dict[str, str],
    main_path: str,
    timeout_s: float = PROFILE_TIMEOUT_S,
    main_text: str | None = None,
    runs: ToolRuns | None = None,
) -> ProfileReport:
    """Run the job (spec desc, steps, sizes, device index) once under ncu (twice when ncu could
    not read some counters) and read its report. `runs`: the owner's running tools (ended when it closes). Never raises."""
    case = str(job.get("case", ""))
    start = time.perf_counter()

    def done(report: ProfileReport) -> ProfileReport:
        report.case, report.wall_s = case, time.perf_counter() - start
        return report

    with tempdirs.temporary("kernel-lsp-ncu-") as job_dir:
        problem = write_job(job_dir, job, cubin, runs)
        if problem:
            return done(ProfileReport(note=f"no profile: {problem}"))
        report_base = os.path.join(job_dir, "report")
        cmd, env = tool_command(collect_command(ncu, list(symbol_to_kernel), report_base), job, job_dir)
        pages = _collect(ncu, cmd, env, report_base, timeout_s, runs)
        if isinstance(pages, tuple) and any(k.unread for k in parse_raw_page(pages[0])):
            # Counters ncu could not read (`nan`: seen on an H100 busy with 7 other processes'
            # work): once more, and what is still unread is listed as missing.
            pages = _collect(ncu, cmd, env, report_base, timeout_s, runs)
    if isinstance(pages, str):
        return done(ProfileReport(note=pages))
    try:
        return done(build_report(*pages, symbol_to_kernel, main_path, case, main_text))
    except Exception as e:  # a page this reader does not understand: said in the hover, not lost in a log
        return done(ProfileReport(note=f"kernel-lsp could not read ncu's report: {type(e).__name__}: {e}"))


def _collect(
    ncu: str, cmd: list[str], env: dict[str, str], report_base: str, timeout_s: float, runs: ToolRuns | None
) -> tuple[str, str] | str:
    """ncu's raw and source pages of one collecting run, or why there are none."""
    report_file = report_base + ".ncu-rep"
    for attempt in range(2):
        with one_profile_at_a_time(timeout_s, runs) as busy:
            if busy:
                return busy
            try:
                code, output = _run(cmd, timeout_s, env, runs)
            except subprocess.TimeoutExpired:
                return f"ncu did not finish in {timeout_s:.0f} s"
            except OSError as e:
                return f"cannot run ncu ({ncu}): {e}"
        if os.path.exists(report_file):
            break
        # "Failed to profile ... The application returned an error code (9)": seen once on an
        # H200 beside other processes' GPU work (a GPU test suite), and not in four other runs;
        # once more before saying so.
        if attempt == 0 and "Failed to profile" in output and not (runs is not None and runs.ended):
            continue
        return _why_no_rows(output) + (f" (ncu exit {code})" if code else "")
    # Each `ncu -i` loads the report on its own (about a second): both pages at once.
    with ThreadPoolExecutor(2) as pool:
        raw, source = pool.map(lambda page: _print_page(ncu, report_file, page, runs), ("raw", "source"))
    return raw, source


def _print_page(ncu: str, report_file: str, page: str, runs: ToolRuns | None) -> str:
    try:
        return _run(page_command(ncu, report_file, page), PAGE_TIMEOUT_S, None, runs)[1]
    except (subprocess.TimeoutExpired, OSError) as e:
        return f"ncu could not print the {page} page: {e}"
