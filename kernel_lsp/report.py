"""What a report of many checks shows (the CLI's formats, `--watch`): each finding once, a missing
package once in the text formats, and the archs the files were really compiled for. Plain
functions of the checks' results (`model.FileCheck`), shaped in place."""

from __future__ import annotations

import os
from dataclasses import replace

from .files import same_file
from .model import FileCheck, files_broken


def archs_checked(checks: list[FileCheck], default: list[str]) -> list[str]:
    """The archs the checks really compiled for (a file with a compile_commands.json entry is
    checked for its database's archs, not the default), in the default's order, then the rest;
    the default when nothing was compiled (every file skipped)."""
    used = {r.arch for c in checks for r in c.results}
    if not used:
        return list(default)
    return [a for a in default if a in used] + sorted(used - set(default))


def report_once(checks: list[FileCheck], per_file: bool = False) -> None:
    """Each finding once, for reports and their counts (the CLI's formats, --watch). A header's
    finding is reported at the header, once, however many checked files include it (and whether
    or not the header is checked itself), with the `#include` lines that lead to it as its related
    locations. Those lines are findings of their own only with `per_file` (JSON and SARIF, which
    a script reads file by file: each file the header breaks lists the error; the editor keeps
    them too, it shows each file's); the text formats show the header's finding alone."""
    # (header, line, col) -> (the finding's message, the #include line that leads to it)
    includes: dict[tuple, list[tuple[str, tuple[str, int, int, str]]]] = {}
    for c in checks:
        kept = []
        for d in c.diagnostics:
            if d.header_copy and d.related:
                header, line, col, message = d.related[0]
                where = (d.path, d.line, d.col, f"includes {os.path.basename(header)} here")
                includes.setdefault((os.path.abspath(header), line, col), []).append((message, where))
            if per_file or not (d.header_copy and d.related):
                kept.append(d)
        c.diagnostics = kept
    _drop_header_repeats(checks)
    attached: set[tuple] = set()
    for c in checks:
        for i, d in enumerate(c.diagnostics):
            pos = (os.path.abspath(d.path), d.line, d.col)
            lines = [w for m, w in includes.get(pos, ()) if d.message.startswith(m)]
            if lines and pos not in attached:
                attached.add(pos)
                more = tuple(dict.fromkeys(w for w in lines if w not in d.related))
                c.diagnostics[i] = replace(d, related=d.related + more)


def prepare_report(checks: list[FileCheck], per_file: bool) -> None:
    """The checks as a report shows them: `report_once`, then for the text formats (not
    `per_file`) `one_per_package`."""
    broken = packages_broken(checks)
    report_once(checks, per_file)
    if not per_file:
        one_per_package(checks, broken)


def packages_broken(checks: list[FileCheck]) -> dict[str, list[str]]:
    """package -> the checked files with a finding of it missing (through a header included)."""
    broken: dict[str, list[str]] = {}
    for c in checks:
        for package in dict.fromkeys(d.package for d in c.diagnostics if d.package):
            broken.setdefault(package, []).append(c.path)
    return broken


def one_per_package(checks: list[FileCheck], broken: dict[str, list[str]]) -> None:
    """A missing package once, for the text formats (after `report_once`; `broken` from
    `packages_broken` before it): the first finding of each package stays, worded with the files
    it breaks, and its other findings go (in another file, or another of its headers). Without
    this, a library every file includes gave one identical error per file."""
    kept_one: set[str] = set()
    for c in checks:
        kept = []
        for d in c.diagnostics:
            if not d.package or len(broken.get(d.package, ())) < 2:
                kept.append(d)
            elif d.package not in kept_one:
                kept_one.add(d.package)
                kept.append(replace(d, message=f"{d.message} {files_broken(broken[d.package])}"))
        c.diagnostics = kept


def _drop_header_repeats(checks: list[FileCheck]) -> None:
    """A header's own findings appear once even when it is checked alone and through each file
    that includes it."""
    seen: set[tuple] = set()
    for c in checks:
        kept = []
        for d in c.diagnostics:
            key = (
                (os.path.abspath(d.path), d.line, d.col, d.message) if not same_file(d.path, c.path) else None
            )
            if key is None or key not in seen:
                kept.append(d)
            if key:
                seen.add(key)
        c.diagnostics = kept
    # Then drop foreign copies of findings that the header's own check already reported.
    own = {
        (os.path.abspath(d.path), d.line, d.col, d.message)
        for c in checks
        for d in c.diagnostics
        if same_file(d.path, c.path)
    }
    for c in checks:
        c.diagnostics = [
            d
            for d in c.diagnostics
            if same_file(d.path, c.path) or (os.path.abspath(d.path), d.line, d.col, d.message) not in own
        ]
