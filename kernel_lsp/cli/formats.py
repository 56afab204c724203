"""Printing check results: text (path:line:col: severity: message [code]), json, sarif, github.

Each formatter takes the checks after `report.prepare_report` (a header's finding once, with the
`#include` lines that lead to it as related locations; text: a missing package once; JSON and
SARIF: also each `#include` line a header's finding breaks, under its file) and a `View` (what
the text formats show besides findings: resources, the summary line)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from .. import __version__
from ..api.checks import FileCheck
from ..api.model import CudaVersions, Diagnostic, KernelResources, Severity, describe, format_bytes, rule_id
from ..api.sources import occupancy_summary


def _rel(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


@dataclass(frozen=True)
class View:
    """What a report shows besides the findings: each kernel's resources and GPU figures
    (`--show-resources`, `-v`), and the summary line (off with `--quiet`). JSON and SARIF are
    documents: they always hold everything."""

    resources: bool = False
    summary: bool = True
    # The NVRTC and nvcc the check used: in the summary line and in the JSON and SARIF documents
    # (None: not asked, as in tests of the formats alone).
    cuda: CudaVersions | None = None


def format_diagnostic(d: Diagnostic) -> str:
    tag = d.code or d.source
    return f"{_rel(d.path)}:{d.line}:{d.col}: {d.severity.label}: {d.message} [{tag}]"


def includers(d: Diagnostic) -> list[tuple[str, int, int, str]]:
    """The related locations in other files: the `#include` lines that lead to a header's finding."""
    return [r for r in d.related if not _same_path(r[0], d.path)]


def _same_path(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


def format_finding(d: Diagnostic) -> list[str]:
    """A finding's line, then one indented line per `#include` that leads to it (a header's)."""
    return [format_diagnostic(d)] + [f"    {_rel(p)}:{ln}:{c}: {m}" for p, ln, c, m in includers(d)]


def format_resources(k: KernelResources) -> str:
    parts = [
        f"{k.registers} registers",
        f"{format_bytes(k.shared_bytes)} static smem",
        f"{format_bytes(k.stack_bytes)} stack",
        f"spills {k.spill_store_bytes} B stored / {k.spill_load_bytes} B loaded",
    ]
    parts.append(occupancy_summary(k))
    return f"kernel {k.qualified_name} [{k.arch}]: " + ", ".join(parts)


def format_gpu_check(g) -> str:
    """One line per spec'd kernel: verdict, then per timed case median (p10-p90, n) and roofline."""
    if not g.ok:
        return f"kernel {g.kernel or '?'} on GPU: {g.status}: {g.message}"
    parts = [f"kernel {g.kernel} on GPU: verified on {len(g.cases)} case(s)"]
    for t in g.timings:
        m = t.measurement
        cache = "cold L2" if m.cold_l2 else "warm L2"
        fig = f"{t.case}: {m.median_s * 1e3:.4f} ms (p10-p90 {m.spread}, n={m.n}, {cache})"
        if t.bandwidth_Bps:
            fig += f", {t.bandwidth_Bps / 1e9:.0f} GB/s"
        if t.over_bound:
            fig += f", {t.roofline_text} roofline: {t.over_bound}"
        elif t.roofline:
            fig += f", {t.roofline:.0%} of {t.bound} roofline"
        if t.bound_note:
            fig += f" ({t.bound_note})"
        parts.append(fig)
    parts += [
        f"occupancy of {o.kernel}: achieved {o.achieved:.0%} of theoretical {o.theoretical:.0%} (ncu)"
        for o in g.occupancy
    ]
    profile = getattr(g, "profile", None)
    if profile is not None:
        parts += [f"limiter of {k.kernel}: {k.headline} (ncu)" for k in profile.kernels]
    if g.device:
        where = f" (GPU {g.device_index})" if getattr(g, "device_index", None) is not None else ""
        parts.append(g.device.name + where)
    return "; ".join(parts)


def summary_line(checks: list[FileCheck], archs: Iterable[str], cuda: CudaVersions | None = None) -> str:
    errors = sum(c.errors for c in checks)
    warnings = sum(c.warnings for c in checks)
    kernels = sum(len(c.kernels) for c in checks)
    skipped = sum(1 for c in checks if not c.checked)
    text = (
        f"checked {len(checks) - skipped} file(s) for {', '.join(archs)}: "
        f"{errors} error(s), {warnings} warning(s), {kernels} kernel(s)"
    )
    text += f", {skipped} skipped" if skipped else ""
    if cuda is not None:  # what compiled them, before what the GPU made of them
        text += f"; {cuda.summary()}"
    verified = sum(1 for c in checks for g in c.gpu_checks if g.ok)
    if verified:
        text += f"; {verified} kernel(s) verified on a GPU"
    unverified = [c.unverified for c in checks if c.unverified]
    if unverified:
        reasons = ", ".join(sorted(set(unverified)))
        text += f"; {len(unverified)} file(s) with a spec not verified on a GPU ({reasons})"
    return text


def as_text(checks: list[FileCheck], archs: list[str], view: View = View()) -> str:
    lines = []
    for c in checks:
        for d in sorted(c.diagnostics, key=lambda d: (d.path != c.path, d.path, d.line, d.col)):
            lines += format_finding(d)
        if view.resources:
            lines += [f"{_rel(c.path)}: {format_resources(k)}" for k in c.kernels]
            lines += [f"{_rel(c.path)}: {format_gpu_check(g)}" for g in c.gpu_checks]
    if view.summary:
        lines.append(summary_line(checks, archs, view.cuda))
    return "\n".join(lines)


def _diag_json(d: Diagnostic) -> dict:
    return {
        "path": _rel(d.path),
        "line": d.line,
        "column": d.col,
        "endColumn": d.end_col or None,
        "severity": d.severity.label,
        "code": d.code,
        "source": d.source,
        "message": d.message,
        "related": [{"path": _rel(p), "line": ln, "column": c, "message": m} for p, ln, c, m in d.related],
    }


def _kernel_json(k: KernelResources) -> dict:
    o = k.occupancy
    return {
        "name": k.qualified_name,
        "function": k.source_function,
        "mangled": k.mangled,
        "arch": k.arch,
        "line": k.line,
        "registers": k.registers,
        "sharedBytes": k.shared_bytes,
        "stackBytes": k.stack_bytes,
        "spillStoreBytes": k.spill_store_bytes,
        "spillLoadBytes": k.spill_load_bytes,
        "blockSize": k.block_size,
        "occupancy": None
        if o is None
        else {
            "fraction": round(o.fraction, 4),
            "activeWarpsPerSM": o.active_warps_per_sm,
            "maxWarpsPerSM": o.max_warps_per_sm,
            "activeBlocksPerSM": o.active_blocks_per_sm,
            "limiter": o.limiter,
        },
        "launches": [
            {
                "origin": c.origin,
                "where": c.where,
                "blockSize": c.block_size,
                "occupancy": round(c.occupancy.fraction, 4) if c.occupancy else None,
                "note": c.note or None,
            }
            for c in k.launches
        ],
    }


def gpu_json(g) -> dict:
    return {
        "kernel": g.kernel,
        "status": g.status,
        "ok": g.ok,
        "message": g.message,
        "device": g.device.name if g.device else None,
        "device_index": getattr(g, "device_index", None),
        "host": getattr(g, "host", ""),
        "cases": g.cases,
        "timings": [
            {
                "case": t.case,
                **t.measurement.to_dict(),
                "bandwidthBps": t.bandwidth_Bps,
                "flopsPerS": t.flops_per_s,
                "roofline": t.roofline,
                "bound": t.bound,
                "suspicious": t.suspicious,
                "overBound": t.over_bound,
                "boundNote": t.bound_note or None,
            }
            for t in g.timings
        ],
        "occupancy": [
            {"kernel": o.kernel, "case": o.case, "achieved": o.achieved, "theoretical": o.theoretical}
            for o in g.occupancy
        ],
        "occupancyNote": g.occupancy_note or None,
        "profile": g.profile.to_dict() if getattr(g, "profile", None) else None,
    }


def as_json(checks: list[FileCheck], archs: list[str], view: View = View()) -> str:
    return json.dumps(
        {
            "version": __version__,
            "cuda": view.cuda.to_dict() if view.cuda else None,
            "archs": archs,
            "files": [
                {
                    "path": _rel(c.path),
                    "checked": c.checked,
                    "unverified": c.unverified or None,
                    "diagnostics": [_diag_json(d) for d in c.diagnostics],
                    "kernels": [_kernel_json(k) for k in c.kernels],
                    "gpu": [gpu_json(g) for g in c.gpu_checks],
                }
                for c in checks
            ],
            "summary": {
                "errors": sum(c.errors for c in checks),
                "warnings": sum(c.warnings for c in checks),
                "files": len(checks),
                "kernels": sum(len(c.kernels) for c in checks),
                "unverified": sum(1 for c in checks if c.unverified),
            },
        },
        indent=2,
    )


_SARIF_LEVEL = {
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.INFO: "note",
    Severity.HINT: "note",
}


def sarif_uri(path: str) -> str:
    """A percent-encoded uri-reference: relative to the run's folder, or a file: URI."""
    rel = _rel(path)
    if os.path.isabs(rel):
        return Path(rel).as_uri()
    return quote(rel.replace(os.sep, "/"), safe="/")


def _sarif_location(path: str, line: int, col: int, end_col: int = 0) -> dict:
    region = {"startLine": max(1, line), "startColumn": max(1, col)}
    if end_col > col:
        region["endColumn"] = end_col
    return {"physicalLocation": {"artifactLocation": {"uri": sarif_uri(path)}, "region": region}}


def sarif_rules(diagnostics: Iterable[Diagnostic]) -> dict[str, dict]:
    """One rule per diagnostic code, described by what the code means (kernel_lsp/codes.py),
    never by one result's message. Compile errors have no number: they share their compiler's
    rule (`nvrtc-error`), whose description says so, and each result's message says which error
    it is. A rule per message would make up ids that change with every identifier in a message,
    and code scanning tracks alerts by rule id."""
    rules: dict[str, dict] = {}
    for d in diagnostics:
        rule = rule_id(d)
        if rule not in rules:
            rules[rule] = {
                "id": rule,
                "name": rule,
                "shortDescription": {"text": describe(rule, d.message)},
                "properties": {"source": d.source},
            }
    return rules


def as_sarif(checks: list[FileCheck], archs: list[str], view: View = View()) -> str:
    found = [d for c in checks for d in c.diagnostics]
    rules = sarif_rules(found)
    index = {rule: i for i, rule in enumerate(rules)}
    results = []
    for d in found:
        rule = rule_id(d)
        result = {
            "ruleId": rule,
            "ruleIndex": index[rule],
            "level": _SARIF_LEVEL[d.severity],
            "message": {"text": d.message},
            "locations": [_sarif_location(d.path, d.line, d.col, d.end_col)],
        }
        if d.related:
            result["relatedLocations"] = [
                {"id": i, **_sarif_location(p, ln, c), "message": {"text": m or "related"}}
                for i, (p, ln, c, m) in enumerate(d.related, start=1)
            ]
        results.append(result)
    return json.dumps(
        {
            "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
            "version": "2.1.0",
            "runs": [
                {
                    "tool": {
                        "driver": {
                            "name": "kernel-lsp",
                            "version": __version__,
                            "informationUri": "https://github.com/kernel-lsp/kernel-lsp",
                            "rules": list(rules.values()),
                        }
                    },
                    "properties": {
                        "archs": archs,
                        "cuda": view.cuda.to_dict() if view.cuda else None,
                        "unverified": [
                            {"uri": sarif_uri(c.path), "reason": c.unverified} for c in checks if c.unverified
                        ],
                    },
                    "results": results,
                }
            ],
        },
        indent=2,
    )


def _gh_escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def _github_message(d: Diagnostic) -> str:
    via = includers(d)
    if not via:
        return d.message
    return f"{d.message} (included from {', '.join(f'{_rel(p)}:{ln}' for p, ln, _, _ in via)})"


def as_github(checks: list[FileCheck], archs: list[str], view: View = View()) -> str:
    kind = {
        Severity.ERROR: "error",
        Severity.WARNING: "warning",
        Severity.INFO: "notice",
        Severity.HINT: "notice",
    }
    lines = [
        f"::{kind[d.severity]} file={_gh_escape(_rel(d.path), True)},line={d.line},col={d.col},"
        f"title={_gh_escape('kernel-lsp ' + (d.code or d.source), True)}::{_gh_escape(_github_message(d))}"
        for c in checks
        for d in c.diagnostics
    ]
    if view.summary:
        lines.append(summary_line(checks, archs, view.cuda))
    return "\n".join(lines)


FORMATTERS = {"text": as_text, "json": as_json, "sarif": as_sarif, "github": as_github}
