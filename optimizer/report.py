"""Every run leaves a report: JSON (everything) and Markdown (for people) under
`<workspace>/.kernel-lsp/reports/`: the candidates with their outcomes and figures, the rounds,
the A/B, the verdict and the final diff. Secrets are never written (and are redacted should one
ever slip into a message)."""

from __future__ import annotations

import difflib
import json
import os
import re
import time
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from kernel_lsp.profile_text import profile_lines
from kernel_lsp.safe_write import create_in_workspace
from kernel_lsp.stats import format_seconds

from .model import Figures, Outcome, RunResult, Status

REPORT_DIR = (".kernel-lsp", "reports")


def unified_diff(original: str, new: str, path: str) -> str:
    name = os.path.basename(path)
    return "".join(
        difflib.unified_diff(
            original.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
    )


def final_source(result: RunResult) -> str | None:
    return result.accepted.source if result.accepted else None


def _us(s: float | None) -> str:
    return format_seconds(s) if s else "-"


def _first_line(text: str, limit: int = 90) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _occupancy(o: Outcome) -> str:
    return (
        ", ".join(
            f"{r.kernel}: {r.registers} regs"
            + (f", {r.occupancy * 100:.0f}% occ" if r.occupancy is not None else "")
            for r in o.resources
        )
        or "-"
    )


def _roofline(f: Figures | None) -> str:
    if f is None:
        return "-"
    return f.roofline_text + (f" ({f.bound_note})" if f.bound_note else "")


def _limiter(o: Outcome) -> str:
    """`memory-bound (L1/shared at 87% of peak)` per kernel, or why there is none."""
    p = o.profile
    if p is None:
        return "-"
    if not p.kernels:
        return f"none: {p.note}" if p.note else "-"
    if len(p.kernels) == 1:
        return p.kernels[0].headline
    return "; ".join(f"{k.kernel}: {k.headline}" for k in p.kernels)


def before_after_rows(result: RunResult) -> list[tuple[str, str, str]]:
    """(figure, before, after) for the table the CLI prints and the report shows."""
    b = result.baseline
    a = result.accepted or result.best
    rows = [
        ("latency (median)", _us(b.latency_s), _us(a.latency_s) if a else "-"),
        (
            "p10-p90",
            f"{_us(b.figures.p10_s)}-{_us(b.figures.p90_s)}" if b.figures else "-",
            f"{_us(a.figures.p10_s)}-{_us(a.figures.p90_s)}" if a and a.figures else "-",
        ),
        (
            "roofline",
            _roofline(b.figures),
            _roofline(a.figures) if a else "-",
        ),
        ("resources", _occupancy(b), _occupancy(a) if a else "-"),
        ("limiter (ncu)", _limiter(b), _limiter(a) if a else "-"),
    ]
    c = result.comparison
    if c is not None:
        rows.append(
            (
                "A/B speedup (95% CI)",
                "1.00x",
                f"{c.speedup:.3f}x ({c.ci_low:.3f}-{c.ci_high:.3f}, n={c.samples})",
            )
        )
    return rows


def markdown(result: RunResult) -> str:
    lines = [
        f"# FSR run: `{result.kernel}` in `{os.path.basename(result.path)}`",
        "",
        f"- file: `{result.path}`",
        f"- device: {result.device or 'unknown'}",
        f"- proposer: {result.proposer}; settings: `{json.dumps(result.settings, sort_keys=True)}`",
        f"- stopped: {result.stop_reason or '-'}; wall time {result.seconds:.1f} s",
        *([f"- host code an LLM wrote ran in {result.sandbox}"] if result.sandbox else []),
        "",
        f"**Verdict:** {result.verdict}",
        "",
        "## Before / after",
        "",
        "| figure | before | after |",
        "|---|---|---|",
    ]
    lines += [f"| {f} | {b} | {a} |" for f, b, a in before_after_rows(result)]
    lines += [
        "",
        "## Rounds",
        "",
        "| round | proposed | compiled | correct | best | improved |",
        "|---|---|---|---|---|---|",
    ]
    for r in result.rounds:
        lines.append(
            f"| {r.round} | {r.proposed} | {r.compiled} | {r.correct} | "
            f"{(r.best_id or '-') + (' ' + _us(r.best_latency_s) if r.best_latency_s else '')} | {'yes' if r.improved else 'no'} |"
        )
    lines += [
        "",
        "## Candidates",
        "",
        "| id | origin | change | outcome | latency | speedup | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in [result.baseline, *result.outcomes]:
        mark = " **(offered)**" if result.accepted is o else ""
        speed = f"{o.speedup:.2f}x" if o.speedup else "-"
        lines.append(
            f"| {o.id}{mark} | {o.origin} | {(o.note or '-').replace('|', '/')} | {o.status.label}"
            f"{' (cached)' if o.cached else ''} | {_us(o.latency_s)} | {speed} | "
            f"{_first_line(o.message).replace('|', '/') or '-'} |"
        )
    timed = [o for o in result.outcomes if o.speedup and o.status is Status.CORRECT]
    if timed:
        lines += ["", "## Speedup of each correct candidate (check timing)", "", "```"]
        top = max(o.speedup or 0 for o in timed)
        for o in timed:
            bar = "#" * max(1, round(40 * (o.speedup or 0) / top))
            lines.append(f"{o.id:>8} {o.speedup:5.2f}x {bar}")
        lines.append("```")
    failed = [o for o in result.outcomes if o.status not in (Status.CORRECT, Status.DUPLICATE) and o.message]
    if failed:
        lines += ["", "## Why candidates failed", ""]
        for o in failed:
            lines += [f"### {o.id}: {o.status.label}", "", "```", o.message.strip(), "```", ""]
    extracted = [o for o in result.outcomes if o.extraction and o.status is not Status.DUPLICATE]
    if extracted:
        lines += ["", "## What extraction changed in the answers", ""]
        lines += [f"- {o.id} ({o.status.label}): {o.extraction}" for o in extracted]
    lines += ["", "## Proof gate (compute-sanitizer)", ""]
    proved = [o for o in result.outcomes if o.proof is not None]
    for o in proved:
        assert o.proof is not None
        ran = ", ".join(f"{t} {sec:.1f} s" for t, sec in o.proof.tools.items()) or "no tool ran"
        lines.append(f"- {o.id} ({o.status.label}; {o.proof.case or 'no case'}; {ran})")
        lines += [f"  - {f.describe()}" for f in o.proof.findings]
        if o.proof.note:
            lines.append(f"  - note: {o.proof.note}")
    if result.proof_note:
        lines.append(f"- {result.proof_note}")
    elif not proved:
        lines.append("- not run: nothing was about to be offered")
    looked = [o for o in result.outcomes if o.findings and o.status is not Status.DUPLICATE]
    if looked:
        lines += ["", "## Static checks (new mutable globals, clock-steered control flow, asm)", ""]
        for o in looked:
            lines += [f"- {o.id} ({o.status.label}): " + "; ".join(o.findings)]
    profiled = [(o.id, o.profile) for o in [result.baseline, *result.outcomes] if o.profile is not None]
    if profiled:
        lines += ["", "## What limits them (Nsight Compute)", ""]
        for oid, profile in profiled:
            lines += [f"### {oid}", "", "```", *profile_lines(profile), "```", ""]
    diff = unified_diff(result.original, final_source(result) or result.original, result.path)
    lines += ["", "## Final diff", ""]
    lines += ["```diff", diff.rstrip(), "```"] if diff else ["(none: nothing offered)"]
    if result.features:
        lines += ["", "## Features given to the proposer (round 1)", "", result.features]
    return "\n".join(lines) + "\n"


def to_json(result: RunResult) -> dict[str, Any]:
    d = {
        "path": result.path,
        "kernel": result.kernel,
        "device": result.device,
        "proposer": result.proposer,
        "settings": result.settings,
        "verdict": result.verdict,
        "stop_reason": result.stop_reason,
        "seconds": result.seconds,
        "accepted": result.accepted.id if result.accepted else None,
        "best": result.best.id if result.best else None,
        "comparison": asdict(result.comparison) if result.comparison else None,
        "baseline": result.baseline.to_dict(with_source=False),
        "rounds": [asdict(r) for r in result.rounds],
        "candidates": [o.to_dict() for o in result.outcomes],
        "failures": result.failures(),
        "before_after": [list(r) for r in before_after_rows(result)],
        "diff": unified_diff(result.original, final_source(result) or result.original, result.path),
        "features": result.features,
        "proof_note": result.proof_note,
        "sandbox": result.sandbox,
    }
    return d


def redact(text: str, secrets: Iterable[str | None]) -> str:
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "***")
    return text


def write_report(result: RunResult, workspace: str, secrets: Iterable[str | None] = ()) -> list[str]:
    """Write `<stamp>-<file>-<kernel>.json` and `.md` under `<workspace>/.kernel-lsp/reports/`;
    returns their paths (and records them). Never through a link (safe_write.py): UnsafeWrite."""
    stem = re.sub(
        r"[^A-Za-z0-9_.-]+",
        "_",
        f"{time.strftime('%Y%m%d-%H%M%S')}-{os.path.basename(result.path)}-{result.kernel}",
    )
    names = [f"{stem}.json"] + [f"{stem}-{n}.json" for n in range(2, 1000)]
    json_path, json_file = create_in_workspace(workspace, REPORT_DIR, names)
    secrets = list(secrets)
    with json_file:
        md_name = os.path.basename(json_path).removesuffix(".json") + ".md"
        md_path, md_file = create_in_workspace(workspace, REPORT_DIR, [md_name])
        with md_file:
            result.report_paths = [json_path, md_path]
            json_file.write(redact(json.dumps(to_json(result), indent=1, default=str), secrets))
            md_file.write(redact(markdown(result), secrets))
    return result.report_paths
