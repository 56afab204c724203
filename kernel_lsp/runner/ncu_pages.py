"""Nsight Compute's printed report pages, read into plain data. Never raises on odd text: rows it
cannot read are skipped and counted.

raw page (`ncu -i R --page raw --csv --print-units base`): a header row of metric names, a row of
units, then one row per profiled launch ("Kernel Name" names the kernel).

source page (`ncu -i R --page source --csv --print-source cuda,sass`): per function, a block
    "File Path","/abs/path/file.cu"
    "Function Name","kernel"
    "Line No","Source","Address","Source","Warp Stall Sampling (All Samples)",...,"stall_long_sb",...
    "35","<the line's text>","-","-","9624",...        <- one row per source line: its counters
    "","","0x7f58397a00a0","  LDS R5, [R2]","6",...     <- the SASS of that line
A header file the kernel uses appears as its own block with its own "File Path".
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field

SAMPLES_ALL = "Warp Stall Sampling (All Samples)"
SAMPLES_NOT_ISSUED = "Warp Stall Sampling (Not-issued Samples)"
INSTRUCTIONS = "Instructions Executed"
L2_SECTORS_EXCESSIVE = "L2 Theoretical Sectors Global Excessive"
SHARED_WAVEFRONTS_EXCESSIVE = "L1 Wavefronts Shared Excessive"


@dataclass
class RawKernel:
    """One kernel of the raw page; several launches of it are averaged."""

    name: str
    metrics: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    launches: int = 1
    # Metrics (unit__counter names) ncu printed as `nan`: counters it could not read on this run.
    # Its own helper columns (derived_*) are `nan` on any run and are not listed.
    unread: set[str] = field(default_factory=set)


def number(text: str) -> float | None:
    """ncu's numbers: thousands separators, `-` or `n/a` for none. `nan` (a counter ncu could
    not read, as on a GPU busy with other processes' work) is none too."""
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _csv_rows(text: str) -> list[list[str]]:
    # ncu's own `==PROF==`/`==WARNING==` lines and the program's output can surround the table.
    lines = [line for line in text.splitlines() if line.startswith('"')]
    try:
        return list(csv.reader(lines))
    except csv.Error:
        return []


def parse_raw_page(text: str) -> list[RawKernel]:
    """Kernels in launch order (first launch of each)."""
    rows = _csv_rows(text)
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if start is None:
        return []
    head = rows[start]
    name_at = head.index("Kernel Name")
    units_row: list[str] = []
    kernels: dict[str, RawKernel] = {}
    sums: dict[str, dict[str, list[float]]] = {}
    for r in rows[start + 1 :]:
        if len(r) != len(head):
            continue
        if not r[name_at] and not units_row:  # the units row has no kernel name
            units_row = r
            continue
        name = r[name_at]
        if name not in kernels:
            kernels[name] = RawKernel(
                name, units=dict(zip(head, units_row or [""] * len(head), strict=False))
            )
            sums[name] = {}
        else:
            kernels[name].launches += 1
        for metric, cell in zip(head, r, strict=False):
            value = number(cell)
            if value is not None:
                sums[name].setdefault(metric, []).append(value)
            elif "__" in metric and cell.strip().lower() in ("nan", "-nan"):
                kernels[name].unread.add(metric)
    for name, k in kernels.items():
        k.metrics = {m: sum(v) / len(v) for m, v in sums[name].items()}
    return list(kernels.values())


@dataclass
class SourceLine:
    """One source line's counters, summed over its SASS instructions by ncu."""

    path: str
    function: str
    line: int
    text: str
    samples: int  # warp stall samples, all
    not_issued: int  # samples where the warp did not issue
    instructions: int  # warp-level instructions executed
    stalls: dict[str, int] = field(default_factory=dict)  # column name (stall_long_sb) -> samples
    counters: dict[str, float] = field(default_factory=dict)  # other numeric columns


@dataclass
class SourcePage:
    lines: list[SourceLine] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    skipped_rows: int = 0


_LINE_ROW = re.compile(r'^"(\d+)","(.*?)","-","-",(.*)$')


def _source_rows(text: str) -> list[list[str]]:
    """CSV rows, except that ncu does not escape quotes inside a line's source text (`extern "C"`):
    a line row (its SASS address and text are `-`) is split around its text by hand."""
    rows = []
    for raw in text.splitlines():
        if not raw.startswith('"'):
            continue
        m = _LINE_ROW.match(raw)
        try:
            if m:
                rows.append([m.group(1), m.group(2), "-", "-", *next(csv.reader([m.group(3)]))])
            else:
                rows.append(next(csv.reader([raw])))
        except (csv.Error, StopIteration):
            continue
    return rows


def parse_source_page(text: str) -> SourcePage:
    page = SourcePage()
    path = function = ""
    head: list[str] = []
    for r in _source_rows(text):
        if len(r) >= 2 and r[0] == "File Path":
            path, head = r[1], []
            continue
        if len(r) >= 2 and r[0] == "Function Name":
            function, head = r[1], []
            if function not in page.functions:
                page.functions.append(function)
            continue
        if r and r[0] == "Line No":
            head = r
            continue
        if not head or not r or not r[0]:
            continue  # SASS rows and rows before a header
        line = number(r[0])
        if line is None or len(r) != len(head):
            page.skipped_rows += 1
            continue
        cells = dict(zip(head[4:], r[4:], strict=False))
        values = {k: number(v) for k, v in cells.items()}
        stalls = {
            k: int(v)
            for k, v in values.items()
            if k.startswith("stall_") and not k.endswith("(Not Issued)") and v is not None
        }
        page.lines.append(
            SourceLine(
                path=path,
                function=function,
                line=int(line),
                text=r[1],
                samples=int(values.get(SAMPLES_ALL) or 0),
                not_issued=int(values.get(SAMPLES_NOT_ISSUED) or 0),
                instructions=int(values.get(INSTRUCTIONS) or 0),
                stalls=stalls,
                counters={k: v for k, v in values.items() if v is not None and not k.startswith("stall_")},
            )
        )
    return page
