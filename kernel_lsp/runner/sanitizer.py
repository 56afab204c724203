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

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from kernel_lsp import tempdirs
from kernel_lsp.procs import ToolRuns
from kernel_lsp.runner.one_launch import tool_command

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
SANITIZER_PLACES = ("/usr/local/cuda/bin/compute-sanitizer",)
TOOL_TIMEOUT_S = 180.0
ERROR_EXIT = 86
_PREFIX = "========= "
_WHERE = re.compile(r"(?:^|\s)(/[^\s:]+|[\w.+-]+\.cuh?):(\d+)")
_NOT_FINDINGS = (
    "COMPUTE-SANITIZER",
    "ERROR SUMMARY",
    "LEAK SUMMARY",
    "RACECHECK SUMMARY",
    "Target application",
)


@dataclass(frozen=True)
class SanitizerFinding:
    tool: str
    message: str  # the sanitizer's first line ("Uninitialized __shared__ memory read of size 4 bytes")
    path: str = ""  # the source file it names (empty: not known)
    line: int = 0
    detail: str = ""  # the next lines of its report (where, which thread)

    def describe(self) -> str:
        where = f"{os.path.basename(self.path)}:{self.line}: " if self.line else ""
        return f"{where}{self.tool}: {self.message}"


@dataclass
class SanitizerReport:
    findings: list[SanitizerFinding] = field(default_factory=list)
    tools: dict[str, float] = field(default_factory=dict)  # tool -> seconds it took
    case: str = ""
    note: str = ""  # why the gate was skipped or incomplete ("compute-sanitizer is not installed")

    @property
    def ran(self) -> bool:
        return bool(self.tools)

    @property
    def blocks_offer(self) -> bool:
        """A finding blocks the offer; so does a gate that could not run a tool it was asked to."""
        return bool(self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.__dict__ for f in self.findings],
            "tools": self.tools,
            "case": self.case,
            "note": self.note,
        }


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
        with open(os.path.join(job_dir, "job.json"), "w", encoding="utf-8") as f:
            json.dump(job, f)
        with open(os.path.join(job_dir, "kernel.cubin"), "wb") as f:
            f.write(blob)
        logs = job_dir if job.get("sandbox") == "bwrap" else log_dir
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
            if code not in (0, ERROR_EXIT) and not found:
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
