"""A missing NVIDIA package once in the editor (issue 45: a library every file includes gave one
identical error per file in the Problems panel).

Among the files the editor has not opened, a missing package's finding is shown on one, the
*holder* (the first by path), worded with every file it breaks; the others show nothing of it. An
open file always shows its own: that is where the user is looking. The holder moves when files
open, close, or stop missing the package, and the files it leaves and reaches are published again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from ..api.model import Diagnostic, files_broken


class OnePerPackage:
    def __init__(self, is_open: Callable[[str], bool]) -> None:
        self._is_open = is_open
        self._files: dict[str, set[str]] = {}  # package -> the files with a finding of it
        self._holders: dict[str, str] = {}  # package -> the file it was last shown on

    def update(self, target: str, findings: Iterable[Diagnostic]) -> set[str]:
        """Record `target`'s findings; the packages it is missing now or was before."""
        now = {d.package for d in findings if d.package}
        before = {p for p, files in self._files.items() if target in files}
        for package in before - now:
            self._files[package].discard(target)
            if not self._files[package]:
                del self._files[package]
        for package in now - before:
            self._files.setdefault(package, set()).add(target)
        return now | before

    def _holder(self, package: str) -> str | None:
        closed = sorted(f for f in self._files.get(package, ()) if not self._is_open(f))
        return closed[0] if closed else None

    def moved(self, packages: Iterable[str]) -> set[str]:
        """After `update`s: the files to publish again for these packages (the holder, whose
        count changed, and a holder left behind)."""
        again: set[str] = set()
        for package in packages:
            holder, before = self._holder(package), self._holders.pop(package, None)
            if holder is not None:
                self._holders[package] = holder
            again |= {f for f in (holder, before) if f is not None}
        return again

    def shown(self, target: str, findings: list[Diagnostic]) -> list[Diagnostic]:
        """`target`'s findings as the editor shows them."""
        if not any(d.package for d in findings) or self._is_open(target):
            return findings
        out = []
        for d in findings:
            files = self._files.get(d.package, set())
            if not d.package or len(files) < 2:
                out.append(d)
            elif self._holder(d.package) == target:
                out.append(replace(d, message=f"{d.message} {files_broken(sorted(files))}"))
        return out
