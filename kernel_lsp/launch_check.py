"""Mistakes in `// kernel-lsp: launch|tune` comments, as findings at the comment.

A launch comment that names no kernel of the file, a misspelled directive, an expression that
does not parse, or a block no GPU of the arch can launch used to be dropped without a word: the
occupancy vanished and verification said nothing. Every front end shows these (they come from
`check_source`), each saying what is wrong and what is expected."""

from __future__ import annotations

import difflib
import math

from .archs import limits_for
from .compile.artifact import literal_launch_value
from .model import Diagnostic, Severity
from .safe_expr import expression_problem
from .source import Directives, find_kernels, parse_directives

CODE = "launch-comment"
LAUNCH_FORM = "`// kernel-lsp: launch <kernel> grid=<expr> block=<expr> [smem=<expr>]`"
# CUDA's per-dimension block limits, the same on every arch since sm_20.
MAX_BLOCK_DIMS = (1024, 1024, 64)


def _at_comment(path: str, lines: list[str], line: int, severity: Severity, message: str) -> Diagnostic:
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    col = text.find("//") + 1 or 1
    return Diagnostic(
        path, line, col, severity, message, code=CODE, source="kernel-lsp", end_col=len(text.rstrip()) + 1
    )


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""


def launch_findings(
    source: str,
    path: str,
    archs: list[str],
    defines: tuple[str, ...] = (),
    directives: Directives | None = None,
) -> list[Diagnostic]:
    lines = source.splitlines()
    directives = directives or parse_directives(source)
    found: list[Diagnostic] = []

    def warn(line: int, message: str) -> None:
        found.append(_at_comment(path, lines, line, Severity.WARNING, message))

    for p in directives.problems:
        message = p.message
        if message.startswith("unknown kernel-lsp directive"):
            verb = message.split("`")[1]
            message = (
                f"unknown kernel-lsp directive `{verb}`{_suggest(verb, ['launch', 'tune'])}; expected "
                f"{LAUNCH_FORM} or `// kernel-lsp: tune NAME=v1,v2,...`"
            )
        warn(p.line, message)
    kernels = sorted({k.name for k in find_kernels(source)})
    for d in directives.launches:
        if d.kernel not in kernels:
            known = f"; the file's kernels: {', '.join(kernels)}" if kernels else "; the file has no kernel"
            warn(
                d.line,
                f"launch comment names `{d.kernel}`, which is no __global__ function of this file"
                f"{_suggest(d.kernel, kernels)}{known}",
            )
        unreadable = False
        for field_name, expr in (("grid", d.grid), ("block", d.block), ("smem", d.smem)):
            # Read, never run: the comment is the workspace's text (safe_expr.py).
            problem = expression_problem(expr)
            if problem:
                unreadable = True
                warn(
                    d.line,
                    f"cannot read {field_name}=`{expr}` ({problem}); expected an expression "
                    "over the spec's sizes, e.g. grid=(cdiv(n, 16), cdiv(m, 16)) block=(16, 16)",
                )
        if unreadable:
            continue
        found += _block_limits(path, lines, d.line, d.block, archs, defines, source)
    return found


def _block_limits(
    path: str,
    lines: list[str],
    line: int,
    expr: str,
    archs: list[str],
    defines: tuple[str, ...],
    source: str,
) -> list[Diagnostic]:
    value = literal_launch_value(expr, defines, source)
    if value is None:
        return []  # sizes known only at run time: the spec's cases check those
    dims = value if isinstance(value, tuple) else (value,)
    threads = math.prod(dims)
    for axis, (n, most) in enumerate(zip(dims, MAX_BLOCK_DIMS, strict=False)):
        if n > most:
            return [
                _at_comment(
                    path,
                    lines,
                    line,
                    Severity.ERROR,
                    f"block=`{expr}` has {n} threads along {'xyz'[axis]}; CUDA allows at most {most}",
                )
            ]
    if threads <= 0:
        return [
            _at_comment(
                path, lines, line, Severity.ERROR, f"block=`{expr}` is {threads} threads; expected at least 1"
            )
        ]
    for arch in archs:
        lim = limits_for(arch)
        if lim is not None and threads > lim.max_threads_per_block:
            return [
                _at_comment(
                    path,
                    lines,
                    line,
                    Severity.ERROR,
                    f"block=`{expr}` is {threads} threads; {arch} launches at most "
                    f"{lim.max_threads_per_block} per block, so this launch would fail",
                )
            ]
    return []
