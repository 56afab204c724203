"""`kernel-lsp --check --watch`: one full check, then only what changed (the Workspace's folder
watchers and the include graph decide what that is)."""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import TextIO

from ..api.checks import CheckRequest, CheckScheduler, FileCheck
from ..api.model import CudaVersions
from ..api.watching import Batch, FolderWatch, IncludeGraph, is_cuda, normalize
from ..workspace import Workspace

log = logging.getLogger(__name__)


def _block(check: FileCheck) -> list[str]:
    """A file's findings and kernel resources as the text format prints them."""
    from .formats import _rel, format_finding, format_resources

    lines = [
        line
        for d in sorted(check.diagnostics, key=lambda d: (d.path != check.path, d.path, d.line, d.col))
        for line in format_finding(d)
    ]
    lines += [f"{_rel(check.path)}: {format_resources(k)}" for k in check.kernels]
    return lines


class _WatchSession:
    """The state of `--check --watch`: the files followed, their last output, the include graph."""

    def __init__(self, paths: list[str], workspace: Workspace, fmt: str, out: TextIO) -> None:
        self.workspace = workspace
        self.settings = settings = workspace.settings_for(os.path.abspath(paths[0]))
        self.fmt = fmt
        self.out = out
        self.archs = settings.archs()
        files = workspace.select_files(paths).files
        self.files = {normalize(f) for f in files}
        self.explicit = {normalize(p) for p in paths if os.path.isfile(p)}
        self.folders = sorted({normalize(p) for p in paths if os.path.isdir(p)})
        roots = self.folders or sorted({os.path.dirname(p) for p in self.explicit})
        self.graph = IncludeGraph(workspace.graph_include_dirs(roots, os.path.abspath(paths[0])))
        self.last: dict[str, list[str]] = {}
        self.state: dict[str, FileCheck] = {}
        self.batches: queue.Queue[Batch | None] = queue.Queue()
        # Each file under its deadline and memory limit, in workers that die with this process.
        self.scheduler = CheckScheduler(max(1, min(len(self.files) or 1, os.cpu_count() or 1)))
        self.watchers: list[FolderWatch] = []
        self.cuda: CudaVersions | None = None  # the CUDA the first report named

    def follows(self, path: str) -> bool:
        if path in self.explicit or any(path.startswith(f + os.sep) for f in self.folders):
            return True
        return path in self.graph  # a header one of the files includes

    def check(self, paths: Iterable[str]) -> list[FileCheck]:
        paths = sorted(paths)
        ws = self.workspace
        futures = [
            self.scheduler.check(
                CheckRequest(
                    p,
                    includers=self._includers(p),
                    project=ws.settings_for(p).project_flags(p, ws.root),
                    trigger="watch",
                ),
                ws,
            )
            for p in paths
        ]
        checks = [f.result() for f in futures]
        for c in checks:
            self.state[c.path] = c
        return checks

    def _includers(self, path: str) -> tuple:
        """The `.cu` files that include a header, nearest first: the first is the context it is
        checked in when it fails on its own, and their launches give its kernels' blocks."""
        if path.endswith(".cu"):
            return ()
        return tuple((p, None) for p in self.workspace.includers(self.graph, path))

    def shown_checks(self) -> list[FileCheck]:
        """The checks as --check prints them: a header's findings once, not once per includer
        (in JSON and SARIF also under each file it breaks)."""
        from ..api.checks import prepare_report

        copies = [
            replace(self.state[p], diagnostics=list(self.state[p].diagnostics)) for p in sorted(self.state)
        ]
        prepare_report(copies, per_file=self.fmt in ("json", "sarif"))
        return copies

    def first_run(self) -> None:
        from .formats import FORMATTERS, View

        # The graph first: a header that fails alone is checked through its includer.
        for f in sorted(self.files):
            self.graph.update(f)
        self.check(self.files)
        shown = self.shown_checks()
        self.last = {c.path: _block(c) for c in shown}
        # --watch's later blocks show each file's resources: its first report does too.
        self.cuda = self.workspace.cuda_versions()  # asked once: each later report names the same
        view = View(resources=True, cuda=self.cuda)
        print(FORMATTERS[self.fmt](shown, self.archs_used(), view), file=self.out, flush=True)

    def start_watching(self) -> None:
        parents = {os.path.dirname(p) for p in self.explicit}
        roots = sorted(set(self.folders) | parents)
        # A folder inside another watched folder needs no observer of its own.
        roots = [r for r in roots if not any(r.startswith(o + os.sep) for o in roots if o != r)]
        for root in roots:
            w = self.workspace.watch_folder(
                root, self.batches.put, self.settings.exclude, accept=self.follows
            )
            w.start()
            self.watchers.append(w)

    def apply(self, batch: Batch) -> None:
        from .formats import FORMATTERS, View, _rel

        plan = self.workspace.plan_changes(batch, self.graph, self.files)
        for p in plan.changed:
            if is_cuda(p) and (p in self.explicit or any(p.startswith(f + os.sep) for f in self.folders)):
                self.files.add(p)
        gone = sorted(p for p in plan.forget if p in self.files)
        self.files -= set(gone)
        for p in gone:
            self.state.pop(p, None)
        self.check(p for p in plan.check if p in self.files)
        shown = self.shown_checks()
        now = {c.path: _block(c) for c in shown}
        changed = [c for c in shown if now[c.path] != self.last.get(c.path)]
        gone = [p for p in gone if p in self.last]
        self.last = now
        if not changed and not gone:
            return
        if self.fmt == "text":
            lines = []
            for c in changed:
                lines += now[c.path] or [f"{_rel(c.path)}: no findings"]
            lines += [f"{_rel(p)}: deleted" for p in gone]
            errors = sum(c.errors for c in shown)
            warnings = sum(c.warnings for c in shown)
            lines.append(
                f"[{time.strftime('%H:%M:%S')}] {len(changed) + len(gone)} file(s) changed; "
                f"now {errors} error(s), {warnings} warning(s) in {len(shown)} file(s)"
            )
            print("\n".join(lines), file=self.out, flush=True)
        else:
            gone_checks = [FileCheck(p, [], checked=False, missing=True) for p in gone]
            view = View(cuda=self.cuda)
            print(
                FORMATTERS[self.fmt](changed + gone_checks, self.archs_used(), view),
                file=self.out,
                flush=True,
            )

    def archs_used(self) -> list[str]:
        """The archs the files were checked for: a file with a compile_commands.json entry is
        checked for its database's, and the report names those, not the default."""
        from ..api.checks import archs_checked

        return archs_checked(list(self.state.values()), self.archs)

    def exit_code(self) -> int:
        return 1 if any(c.errors for c in self.state.values()) else 0

    def close(self) -> None:
        for w in self.watchers:
            w.stop()
        self.scheduler.close()


def watch_check_main(paths: list[str], workspace: Workspace, fmt: str, out: TextIO | None = None) -> int:
    """Check everything once, then re-check what changes and print only that, until Ctrl-C (or
    SIGTERM). Exit code: 1 when the files last checked have errors, else 0; 2 when a folder
    cannot be watched."""
    import signal

    out = out or sys.stdout
    session = _WatchSession(paths, workspace, fmt, out)
    previous_term = None
    if threading.current_thread() is threading.main_thread():
        # SIGTERM ends the watch the way Ctrl-C does (process managers, test harnesses).
        previous_term = signal.signal(signal.SIGTERM, lambda *_: session.batches.put(None))
    try:
        session.first_run()
        try:
            session.start_watching()
        except OSError as e:
            print(f"kernel-lsp: cannot watch: {e}", file=sys.stderr)
            return 2
        for w in session.watchers:
            for problem in w.scan().problems:
                print(f"kernel-lsp: {problem}; not watched", file=sys.stderr)
        print(
            f"kernel-lsp: watching {', '.join(w.root for w in session.watchers)}; Ctrl-C to stop",
            file=sys.stderr,
            flush=True,
        )
        while (batch := session.batches.get()) is not None:
            session.apply(batch)
    except KeyboardInterrupt:
        pass
    finally:
        session.close()
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
    return session.exit_code()
