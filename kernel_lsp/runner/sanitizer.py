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
from dataclasses import dataclass, field
from typing import Any

from kernel_lsp import tempdirs
from kernel_lsp.procs import ToolRuns
from kernel_lsp.runner.one_launch import SANDBOX_EXIT, in_bwrap, tool_command, write_job

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
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


# A finding's kind, from the tool's first line of it: the words a prompt gets (`summary`).
FINDING_KINDS = [
    (re.compile(r"Invalid __(global|shared|local)__ (read|write)"), "invalid {0} {1}"),
    (re.compile(r"Misaligned"), "misaligned access"),
    (re.compile(r"Race reported|[Hh]azard"), "race on shared memory"),
    (re.compile(r"Uninitialized __(global|shared)__ memory read"), "read of uninitialized {0} memory"),
    (re.compile(r"Barrier error|[Dd]ivergent"), "barrier in divergent code"),
    (re.compile(r"Leaked"), "device memory leaked"),
    (re.compile(r"Program hit|CUDA_ERROR|cudaError"), "a CUDA call failed"),
]


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

    @property
    def kind(self) -> str:
        """What the finding is, in words of kernel-lsp's own (FINDING_KINDS)."""
        for pattern, words in FINDING_KINDS:
            m = pattern.search(self.message)
            if m:
                return words.format(*m.groups())
        return "an error of another kind"

    def summary(self) -> str:
        """The finding for a prompt: its line, tool and kind, none of its text. The launch talks
        to the tool (its injected library shares the launch's process), so the report's text is
        the candidate's to steer; the tool and the kind come from fixed lists, the line is a line
        of the candidate's own file (its number only)."""
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.tool}: {self.kind}"


@dataclass
class SanitizerReport:
    findings: list[SanitizerFinding] = field(default_factory=list)
    tools: dict[str, float] = field(default_factory=dict)  # tool -> seconds it took
    case: str = ""
    note: str = ""  # why the gate was skipped or incomplete ("compute-sanitizer is not installed")
    unconfined: bool = False  # host code an LLM wrote could not be run confined: nothing proven
    incomplete: bool = False  # a tool's launch ended before its first CUDA call: nothing proven

    @property
    def ran(self) -> bool:
        return bool(self.tools)

    @property
    def blocks_offer(self) -> bool:
        """A finding blocks the offer; so does a launch that could not be confined or that never
        reached CUDA (fail closed: nothing was proven)."""
        return bool(self.findings) or self.unconfined or self.incomplete

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.__dict__ for f in self.findings],
            "tools": self.tools,
            "case": self.case,
            "note": self.note,
            "unconfined": self.unconfined,
            "incomplete": self.incomplete,
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
