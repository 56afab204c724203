"""Keeps diagnostics true when files change on disk outside the editor (git checkouts, code
generators, another editor).

- A folder watcher (`Workspace.watch_folder`: watchdog, inotify) runs per workspace folder: started on `initialized`
  and on `workspace/didChangeWorkspaceFolders`, stopped on `shutdown`. Its debounced batches
  cross to the event loop with `call_soon_threadsafe`.
- A batch becomes work through the include graph (`Workspace.plan_changes`): changed files
  and every file that includes a changed header, directly or transitively, are re-checked
  (closed files from disk, their diagnostics published); deleted files are forgotten.
- A `compile_commands.json` written anywhere under a folder (build folders included, ignored or
  not) re-checks every checked file: flags may have changed for any of them.
- Open documents: the editor's text stays the truth. A disk change to an open file itself
  schedules nothing (the editor's diagnostics stay); a disk change to a header it includes
  re-checks it (its editor text, against the new header). A deleted file that is still open
  keeps its diagnostics.
- Bounded work: re-checks are fed to the Analysis at most `2 x workers` at a time, open
  documents first; the Analysis coalesces requests per file.
- Start-up: the include graph is built from a walk of each folder (off the loop); the files
  themselves are compiled at start-up only when a folder holds at most `startupCheckFiles` of
  them (a small project shows all its problems at once), and then in the background: after the
  open files' checks, one file at a time, in the pool's low-priority worker (a project of 35
  heavy files kept both cores busy for over 4 minutes when they were all checked at once).
  Past that, files are checked when opened or when they (or their headers) change.

`kernelLsp/watchStats` returns counters (compiles, batches, watched folders) for tests and
benchmarks.
"""

from __future__ import annotations

import asyncio
import glob
import logging
import os
import threading
from collections import deque
from typing import TYPE_CHECKING

from lsprotocol import types

from .uris import uri_to_path

if TYPE_CHECKING:
    from ..api.checks import Includer
    from ..api.watching import Batch, FolderWatch, IncludeGraph

# The engine's modules (the include graph, the checker, watchdog) are imported where they are
# used: registering the feature must not slow the server's answer to `initialize` (app.py).

log = logging.getLogger(__name__)

# A header opened in the editor: at most this many of the `.cu` files that include it are checked
# (nearest first), so that its templates show the resources of their instances.
INSTANCE_CHECK_LIMIT = int(os.environ.get("KERNEL_LSP_INSTANCE_CHECK_LIMIT", "32"))
SCAN_LIMIT = 100_000
STATS_REQUEST = "kernelLsp/watchStats"


class Watching:
    def __init__(self, server) -> None:
        self.server = server
        self.loop: asyncio.AbstractEventLoop | None = None
        self.watchers: dict[str, FolderWatch] = {}
        # The graph is filled by the start-up walk (a thread) and by the loop: one lock.
        self._graph: IncludeGraph | None = None
        self.graph_lock = threading.Lock()
        self.problems: list[str] = []
        self.batches = 0
        self.events = 0
        self.requested = 0
        self._queue: deque[str] = deque()
        self._queued: set[str] = set()
        self._draining = False
        self._startup: deque[str] = deque()  # the start-up check's files, checked in the background
        self._starting = False
        self._slots: asyncio.Semaphore | None = None
        self._stopped = False
        self._tasks: set[asyncio.Future] = set()
        self.ready: set[str] = set()  # folders watched and walked

    @property
    def graph(self) -> IncludeGraph:
        """Who includes whom (built on first use, under `graph_lock` like every use)."""
        if self._graph is None:
            from ..api.watching import IncludeGraph

            self._graph = IncludeGraph(read=self._read)
        return self._graph

    # --- helpers ------------------------------------------------------------------------------

    def _is_open(self, path: str) -> bool:
        try:
            return self.server.open_document(path) is not None
        except Exception:  # no workspace yet
            return False

    def _read(self, path: str) -> str | None:
        # The editor's text for open documents (its includes are what the user sees).
        if threading.current_thread() is threading.main_thread():
            snap = self.server.snapshot(path)
            if snap.text is not None:
                return snap.text
        from ..api.watching import read_text

        return read_text(path)

    def _include_dirs(self) -> tuple[str, ...]:
        return self.server.engine.graph_include_dirs(self.folders())

    def includers_of(self, path: str) -> tuple[Includer, ...]:
        """The `.cu` files that include a header, nearest first, with their editor text when
        open: the first is the context it is checked in, the first that launches one of its
        kernels gives that kernel's block."""
        with self.graph_lock:
            ranked = self.server.engine.includers(self.graph, path)
        return tuple((p, self.server.snapshot(p).text) for p in ranked)

    def check_instances(self, header: str) -> int:
        """Check the `.cu` files that include `header` and have no result yet (nearest first, at
        most INSTANCE_CHECK_LIMIT): their template instances get their resources at the header's
        definitions. Returns how many were queued."""
        with self.graph_lock:
            ranked = self.server.engine.includers(self.graph, header, limit=None)
        results = self.server.analysis.results
        todo = [f for f in ranked if f not in results][:INSTANCE_CHECK_LIMIT]
        self._enqueue(todo)
        return len(todo)

    def folders(self) -> list[str]:
        from ..api.watching import normalize

        ws = self.server.workspace
        out = []
        for folder in ws.folders.values() if ws else ():
            p = uri_to_path(folder.uri)
            if p:
                out.append(normalize(p))
        if not out and (root := self.server.root_path()):
            out.append(normalize(root))
        # A folder inside another one is watched through its parent.
        return [f for f in sorted(set(out)) if not any(f.startswith(o + os.sep) for o in out if o != f)]

    # --- starting and stopping ----------------------------------------------------------------

    async def sync_folders(self) -> None:
        """Watch exactly the workspace's folders: start new ones, stop removed ones."""
        if self._stopped:
            return
        self.loop = asyncio.get_running_loop()
        if self._slots is None:
            workers = getattr(self.server.analysis, "_workers", 2)
            self._slots = asyncio.Semaphore(max(2, 2 * workers))
        wanted = self.folders()
        for root in list(self.watchers):
            if root not in wanted:
                self.watchers.pop(root).stop()
                self.ready.discard(root)
        for root in wanted:
            if root not in self.watchers:
                await self._start(root)

    def _exclude_for(self, root: str) -> tuple[str, ...]:
        """The settings' `exclude` globs as absolute patterns: relative ones are the workspace's.
        The server's own log file (`--log-file`) is never watched."""
        patterns = tuple(os.path.normpath(os.path.join(root, e)) for e in self.server.settings.exclude)
        log_file = self.server.log_file
        return patterns + ((glob.escape(log_file),) if log_file else ())

    async def settings_changed(self) -> None:
        """Watchers built with other `exclude` globs start again with the new ones."""
        stale = [r for r, w in self.watchers.items() if w.exclude != self._exclude_for(r)]
        for root in stale:
            self.watchers.pop(root).stop()
            self.ready.discard(root)
        if stale:
            await self.sync_folders()

    async def _start(self, root: str) -> None:
        watcher = self.server.engine.watch_folder(root, self._from_thread, self._exclude_for(root))
        self.watchers[root] = watcher
        loop = asyncio.get_running_loop()
        try:
            # Registering inotify watches walks the tree: off the loop.
            await loop.run_in_executor(None, watcher.start)
        except OSError as e:
            self.watchers.pop(root, None)
            self._problem(f"cannot watch {root} for changes on disk: {e}", popup=True)
            return
        # A check that ran before inotify watched the folder may have read a header or a
        # compile_commands.json that changed before the watch saw it (a build writing its
        # database as the editor opens): those whose inputs changed are checked again.
        analysis, inside = self.server.analysis, root + os.sep
        earlier = [p for p in analysis.checked_paths() if p.startswith(inside)]
        if earlier:
            self._keep(asyncio.ensure_future(analysis.recheck_changed(earlier)))
        scan = await loop.run_in_executor(None, self._scan, watcher)
        for problem in scan.problems:
            self._problem(f"{problem}; changes there are not seen")
        if scan.truncated:
            self._problem(
                f"{root}: more than {SCAN_LIMIT} CUDA files; headers are followed for the first ones"
            )
        if len(scan.files) <= self.server.settings.startup_check_files:
            self._check_at_startup(scan.files)
        self.ready.add(root)
        log.info("watching %s (%d CUDA/spec files)", root, len(scan.files))

    def _check_at_startup(self, files) -> None:
        """The files of a small folder, one at a time in the background (the pool runs them after
        every other check, at low priority)."""
        self._startup.extend(sorted(files))
        if not self._starting:
            self._starting = True
            self._keep(asyncio.ensure_future(self._drain_startup()))

    async def _drain_startup(self) -> None:
        analysis = self.server.analysis
        try:
            while self._startup and not self._stopped:
                path = self._startup.popleft()
                # Files the editor has open are checked with its text on didOpen, and a file
                # that changed since was checked by its batch: neither is checked again here.
                if self._is_open(path) or path in analysis.results:
                    continue
                self.requested += 1
                analysis.request(path, "batch")
                await analysis.wait(path, timeout=600.0)
        finally:
            self._starting = False

    def _scan(self, watcher: FolderWatch):
        from ..api.watching import is_cuda, read_text

        scan = watcher.scan(SCAN_LIMIT)
        with self.graph_lock:
            self.graph.include_dirs = self._include_dirs()
        for f in scan.files:
            if is_cuda(f):
                text = read_text(f)
                with self.graph_lock:
                    if f not in self.graph:
                        self.graph.update(f, text)
        return scan

    def stop(self) -> None:
        self._stopped = True
        for watcher in self.watchers.values():
            watcher.stop()
        self.watchers.clear()
        self._queue.clear()
        self._queued.clear()
        self._startup.clear()

    def _problem(self, message: str, popup: bool = False) -> None:
        """A problem for the editor's log (the server's log goes there as window/logMessage), and
        with `popup` shown to the user too."""
        self.problems.append(message)
        if not popup:
            log.warning("kernel-lsp: %s", message)
            return
        try:
            self.server.show_warning(f"kernel-lsp: {message}")  # logs it too
        except Exception:
            log.debug("could not tell the client", exc_info=True)

    # --- batches ------------------------------------------------------------------------------

    def _from_thread(self, batch: Batch) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed() and not self._stopped:
            # The project's include folders come from compile_commands.json, which can take
            # seconds to read: here, in the batch's thread, not on the loop.
            try:
                dirs = self._include_dirs()
            except Exception:
                log.exception("include folders for the include graph")
                dirs = None
            loop.call_soon_threadsafe(self.handle_batch, batch, dirs)

    def handle_batch(self, batch: Batch, include_dirs: tuple[str, ...] | None = None) -> None:
        """On the loop: turn a batch into re-checks and forgotten files."""
        if self._stopped:
            return
        self.batches += 1
        self.events += batch.events
        analysis = self.server.analysis
        with self.graph_lock:
            if include_dirs is not None:
                self.graph.include_dirs = include_dirs
            plan = self.server.engine.plan_changes(batch, self.graph, list(analysis.results))
        for path in sorted(plan.forget):
            if not self._is_open(path):  # an open buffer still holds the text
                analysis.forget(path)
        # An open file that changed on disk keeps the editor's diagnostics; one that reads a
        # changed header is re-checked with its editor text.
        todo = {p for p in plan.changed if not self._is_open(p)} | plan.dependents
        self._enqueue(todo - plan.forget)
        log.debug("batch of %d events: %d to check, %d forgotten", batch.events, len(todo), len(plan.forget))

    def after_check(self, path, check, snap) -> None:
        """Every check (editor or watcher) refreshes the file's includes in the graph."""
        from ..api.watching import is_cuda

        if not is_cuda(path):
            return
        text = snap.text if snap is not None and snap.text is not None else None
        with self.graph_lock:
            self.graph.update(path, text)

    # --- bounded feeding ----------------------------------------------------------------------

    def _enqueue(self, paths) -> None:
        fresh = [p for p in paths if p not in self._queued]
        # Open documents first: that is where the user is looking.
        fresh.sort(key=lambda p: (not self._is_open(p), p))
        for p in fresh:
            self._queued.add(p)
            self._queue.append(p)
        if self._queue and not self._draining:
            self._draining = True
            self._keep(asyncio.ensure_future(self._drain()))

    def _keep(self, task: asyncio.Future) -> None:
        # The loop holds tasks weakly: keep a reference until each is done.
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self) -> None:
        assert self._slots is not None
        try:
            while self._queue and not self._stopped:
                await self._slots.acquire()
                if not self._queue:
                    self._slots.release()
                    break
                path = self._queue.popleft()
                self._queued.discard(path)
                self.requested += 1
                self.server.analysis.request(path, "watch")
                self._keep(asyncio.ensure_future(self._release_when_done(path)))
        finally:
            self._draining = False

    async def _release_when_done(self, path: str) -> None:
        try:
            await self.server.analysis.wait(path, timeout=120.0)
        finally:
            assert self._slots is not None
            self._slots.release()

    def stats(self) -> dict:
        return {
            "compiles": self.server.analysis.compiles,
            "batches": self.batches,
            "events": self.events,
            "requested": self.requested,
            "queued": len(self._queue) + len(self._startup),
            "folders": sorted(self.ready),
            "graphFiles": len(self.graph),
            "problems": list(self.problems),
        }


def register(server) -> None:
    watching = Watching(server)
    server.watch_with(watching)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def did_change_workspace_folders(ls, params: types.DidChangeWorkspaceFoldersParams) -> None:
        await watching.sync_folders()

    @server.feature(STATS_REQUEST)
    def watch_stats(ls, params=None) -> dict:
        return watching.stats()
