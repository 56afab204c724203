"""Proof before an offer: a candidate runs once under compute-sanitizer before the optimizer offers
it, and any finding blocks the offer with the sanitizer's message at the source line.

One run per tool (compute-sanitizer runs one tool per process): memcheck (out-of-bounds and
misaligned accesses, device-side errors, leaks), racecheck (shared-memory hazards), initcheck
(reads of memory nothing wrote), synccheck (barriers in divergent code). Each run is a fresh
process (`kernel_lsp.runner.one_launch`) that launches the job's smallest non-trivial case once;
the sources are built with `-lineinfo`, so the sanitizer names `file.cu:line` and findings map to
the user's lines. Where compute-sanitizer is not installed the gate is skipped with a note that
says so (never silently).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from typing import Any

from kernel_lsp import tempdirs
from kernel_lsp.gpu_reports import TOOLS, SanitizerFinding, SanitizerReport
from kernel_lsp.procs import ToolRuns
from kernel_lsp.runner.one_launch import SANDBOX_EXIT, in_bwrap, tool_command, write_job

SANITIZER_PLACES = ("/usr/local/cuda/bin/compute-sanitizer",)
TOOL_TIMEOUT_S = 180.0
ERROR_EXIT = 86
_PREFIX = "========= "
_WHERE = re.compile(r"(?:^|\s)(/[^\s:]+|[\w.+-]+\.cuh?):(\d+)")
NOTHING_RAN = "Target application terminated before first instrumented API call"
_NOT_FINDINGS = (
    NOTHING_RAN,  # the gate's failure, not the candidate's bug (SanitizerReport.incomplete)
    "Error: " + NOTHING_RAN,
    "COMPUTE-SANITIZER",
    "ERROR SUMMARY",
    "LEAK SUMMARY",
    "RACECHECK SUMMARY",
    "Target application",
)


def find_sanitizer() -> str | None:
    """`KERNEL_LSP_COMPUTE_SANITIZER`, else `compute-sanitizer` on PATH, else CUDA's usual place."""
    chosen = os.environ.get("KERNEL_LSP_COMPUTE_SANITIZER")
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    return shutil.which("compute-sanitizer") or next(
        (p for p in SANITIZER_PLACES if os.access(p, os.X_OK)), None
    )


def parse_findings(tool: str, output: str) -> list[SanitizerFinding]:
    """The reports in compute-sanitizer's output: a line `========= <message>` starts one, the
    indented `=========     at ... in file.cu:23` lines that follow belong to it."""
    findings: list[SanitizerFinding] = []
    block: list[str] = []

    def close() -> None:
        if not block:
            return
        head, rest = block[0], block[1:]
        path, line = "", 0
        for text in [head, *rest]:  # racecheck names the first access on its first line
            m = _WHERE.search(text)
            if m:
                path, line = m.group(1), int(m.group(2))
                break
        findings.append(SanitizerFinding(tool, head, path, line, "\n".join(r.strip() for r in rest[:4])))
        block.clear()

    for raw in output.splitlines():
        if not raw.startswith(_PREFIX.rstrip()):
            continue
        text = raw[len(_PREFIX) :] if raw.startswith(_PREFIX) else ""
        if not text.strip():
            continue
        if text.startswith(" "):  # a detail line of the open report
            if block:
                block.append(text)
            continue
        close()
        if text.startswith(_NOT_FINDINGS) or text.startswith("Saved host backtrace"):
            continue
        block.append(text.strip())
    close()
    # One finding per (tool, message, line): racecheck and initcheck repeat per thread.
    unique: dict[tuple[str, str, int], SanitizerFinding] = {}
    for f in findings:
        unique.setdefault((f.tool, re.sub(r"0x[0-9a-f]+", "", f.message), f.line), f)
    return list(unique.values())


def sanitize(
    sanitizer: str,
    job: dict[str, Any],
    blob: bytes,
    tools: tuple[str, ...] = TOOLS,
    timeout_s: float = TOOL_TIMEOUT_S,
    runs: ToolRuns | None = None,
) -> SanitizerReport:
    """Run the job (spec desc, steps, sizes, device, fake) once under each tool. `runs`: the
    owner's running tools (ended when it closes). Never raises."""
    report = SanitizerReport(case=str(job.get("case", "")))
    # The tool's report goes to a file in a folder of its own, not beside the launch's output: what
    # the launched code prints (a candidate's text) never reads as a finding, reaches no note and
    # no prompt. Under bubblewrap the launch and the tool share one writable folder, so the
    # report is kept there (the launch could write it: see SECURITY.md).
    with (
        tempdirs.temporary("kernel-lsp-sanitizer-") as job_dir,
        tempdirs.temporary("kernel-lsp-sanitizer-log-") as log_dir,
    ):
        problem = write_job(job_dir, job, blob, runs)
        if problem:
            report.note = f"the proof gate did not run: {problem}"
            report.unconfined = True  # nothing proven: no offer
            return report
        logs = job_dir if in_bwrap(job) else log_dir
        for tool in tools:
            log = os.path.join(logs, f"{tool}.log")
            options = [sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXIT), "--print-limit", "20"]
            options += ["--log-file", log]
            cmd, env = tool_command(options, job, job_dir)
            start = time.perf_counter()
            try:
                code, _printed = (runs or ToolRuns()).run(cmd, timeout_s, env)
            except subprocess.TimeoutExpired:
                report.note += f"{tool} did not finish in {timeout_s:.0f} s; "
                continue
            except OSError as e:
                report.note = f"cannot run compute-sanitizer ({sanitizer}): {e}"
                return report
            report.tools[tool] = time.perf_counter() - start
            output = _read_log(log)
            found = parse_findings(tool, output)
            report.findings += found
            if NOTHING_RAN in output:  # the launch ended before CUDA started: nothing was proven
                report.unconfined |= code == SANDBOX_EXIT
                report.incomplete = True
                if code != SANDBOX_EXIT:
                    report.note += f"{tool}: the launch ended (exit code {code}) before its first CUDA call; "
            if code == SANDBOX_EXIT and not found:
                report.unconfined = True
                report.note += f"{tool}: the candidate's launch could not be confined here; "
            elif code not in (0, ERROR_EXIT) and not found:
                report.note += f"{tool} ended with exit code {code}; "
    report.note = report.note.rstrip("; ")
    return report


def _read_log(path: str, limit: int = 1 << 20) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return ""


def smallest_case(sizes: list[dict[str, int]]) -> dict[str, int]:
    """The smallest of the spec's sizes in which every size is above 1 (a case where blocks,
    warps and tails all exist), else the smallest."""
    import math

    def volume(s: dict[str, int]) -> int:
        return math.prod(max(1, int(v)) for v in s.values())

    real = [s for s in sizes if all(int(v) > 1 for v in s.values())]
    smallest = min(real or sizes, key=volume)
    return dict(smallest)
