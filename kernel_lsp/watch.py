"""Watching a workspace for CUDA and spec files that change on disk (engine side; no LSP).

`WorkspaceWatcher` runs a watchdog observer on one folder (inotify on Linux: event-driven, so an
idle watcher costs no CPU) and hands out debounced batches: events are collected until none has
arrived for `debounce_s` (200 ms), or for at most `max_delay_s` while they keep coming, and then
delivered as one `Batch` of distinct paths. A `git checkout` of 500 files is one batch.

What is watched: `.cu`, `.cuh` and `X.spec.py` files. Skipped: `.git` and other dot folders,
build folders, whatever the `.gitignore` files on the way down exclude (pathspec), and the
`exclude` globs of the settings. Symlinked folders are not followed (a symlink loop is harmless);
folders that cannot be read are reported, not fatal.

`plan_batch` turns a batch into work with an `IncludeGraph`: the files to re-check (changed files
and everything that includes a changed header, transitively) and the files to forget (deleted).

`kernel_lsp.cli.watch` is `kernel-lsp --check --watch` on top of this.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

import pathspec
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from .compile.compile_commands import MAX_DATABASE_BYTES
from .files import SKIPPED_DIRS, SPEC_SUFFIX, is_cuda, read_regular, read_text_file, spec_owners
from .include_graph import IncludeGraph, normalize
from .model import Batch, ChangePlan, Scan

log = logging.getLogger(__name__)

DEBOUNCE_S = 0.2
MAX_DELAY_S = 2.0
# Folder names that hold build output or tools' state rather than the user's sources.
BUILD_DIRS = frozenset(SKIPPED_DIRS | {"_build", "out", "target", "site-packages", "CMakeFiles"})


def is_spec(path: str) -> bool:
    return path.endswith(SPEC_SUFFIX)


# CMake's compilation database: the flags of every file it lists. Usually in an ignored build
# folder, so a change to it counts wherever it is.
DATABASE_NAME = "compile_commands.json"


def is_watched_file(path: str) -> bool:
    return is_cuda(path) or is_spec(path)


def is_skipped_dir_name(name: str) -> bool:
    return name.startswith(".") or name in BUILD_DIRS or name.startswith("cmake-build-")


# --- what to ignore ---------------------------------------------------------------------------


class IgnoreRules:
    """Skipped folders, `.gitignore` files between the root and a path (deeper ones decide last,
    as in git), and the settings' `exclude` globs (absolute; a matching folder skips its subtree).
    `.gitignore` files are read lazily and cached per folder; `invalidate` after one changes."""

    def __init__(self, root: str, exclude: Iterable[str] = ()) -> None:
        self.root = normalize(root)
        self.exclude = tuple(exclude)
        self._specs: dict[str, pathspec.GitIgnoreSpec | None] = {}
        self._lock = threading.Lock()

    def invalidate(self) -> None:
        with self._lock:
            self._specs.clear()

    def _spec_for(self, folder: str) -> pathspec.GitIgnoreSpec | None:
        with self._lock:
            if folder in self._specs:
                return self._specs[folder]
        spec = None
        try:
            text = read_text_file(os.path.join(folder, ".gitignore"), errors="replace")  # a FIFO: no hang
            spec = pathspec.GitIgnoreSpec.from_lines(text.splitlines())
        except (OSError, ValueError):
            spec = None  # no .gitignore, or unreadable: nothing ignored by it
        with self._lock:
            self._specs[folder] = spec
        return spec

    def _excluded(self, path: str) -> bool:
        return any(fnmatch.fnmatch(path, pattern) for pattern in self.exclude)

    def ignored(self, path: str, is_dir: bool = False) -> bool:
        path = normalize(path)
        if path == self.root:
            return False
        rel = os.path.relpath(path, self.root)
        if rel.startswith(".."):
            return True  # outside this watcher's folder
        parts = rel.split(os.sep)
        dir_parts = parts if is_dir else parts[:-1]
        if any(is_skipped_dir_name(p) for p in dir_parts):
            return True
        if self.exclude:
            cur = self.root
            for p in parts:
                cur = os.path.join(cur, p)
                if self._excluded(cur):
                    return True
        # .gitignore: every folder from the root down to the path's folder may have one.
        decision = False
        folder = self.root
        for i in range(len(parts)):
            spec = self._spec_for(folder)
            if spec is not None:
                sub = "/".join(parts[i:]) + ("/" if is_dir else "")
                result = spec.check_file(sub)
                if result.include is not None:
                    decision = result.include
            folder = os.path.join(folder, parts[i])
        return decision


# --- walking a tree ---------------------------------------------------------------------------


def scan_tree(root: str, rules: IgnoreRules, limit: int = 100_000) -> Scan:
    """The watched files under `root` (symlinked folders not followed, so loops are harmless)."""
    out = Scan()

    def on_error(e: OSError) -> None:
        out.problems.append(f"cannot read folder {e.filename}: {e.strerror or e}")

    for folder, dirs, names in os.walk(root, onerror=on_error, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not rules.ignored(os.path.join(folder, d), is_dir=True))
        for n in sorted(names):
            if is_watched_file(n):
                p = os.path.join(folder, n)
                if not rules.ignored(p):
                    out.files.append(normalize(p))
                    if len(out.files) >= limit:
                        out.truncated = True
                        return out
    return out


# --- batches ----------------------------------------------------------------------------------


class BatchCollector:
    """Folds events into one pending batch and delivers it from its own thread after a quiet
    `debounce_s`, or `max_delay_s` after the first pending event at the latest. Per path the
    last event wins (delete then create is a change). Idle, the thread sleeps on a condition
    with no timeout: no wake-ups. A compilation database written in the batch counts as changed
    if `databases_differ` (given the paths, once the batch is due) says its text is new: read
    then, after the quiet, not at each event, when a writer may be half way through it."""

    def __init__(
        self,
        on_batch: Callable[[Batch], None],
        debounce_s: float = DEBOUNCE_S,
        max_delay_s: float = MAX_DELAY_S,
        databases_differ: Callable[[set[str]], bool] = bool,
    ) -> None:
        self._on_batch = on_batch
        self._databases_differ = databases_differ
        self.debounce_s = debounce_s
        self.max_delay_s = max_delay_s
        self._cond = threading.Condition()
        self._files: dict[str, bool] = {}  # path -> exists (False: deleted)
        self._dirs_gone: set[str] = set()
        self._rules_changed = False
        self._databases: set[str] = set()  # compilation databases written, moved or deleted
        self._events = 0
        self._first = 0.0
        self._last = 0.0
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="kernel-lsp-batches", daemon=True)
        self.batches = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def file_event(self, path: str, exists: bool) -> None:
        self._add(lambda: self._files.__setitem__(path, exists))

    def dir_gone(self, path: str) -> None:
        self._add(lambda: self._dirs_gone.add(path))

    def rules_changed(self) -> None:
        self._add(lambda: setattr(self, "_rules_changed", True))

    def database_touched(self, path: str) -> None:
        self._add(lambda: self._databases.add(path))

    def _add(self, record: Callable[[], None]) -> None:
        now = time.monotonic()
        with self._cond:
            if not self._events:
                self._first = now
            record()
            self._events += 1
            self._last = now
            self._cond.notify()

    def _take(self) -> tuple[Batch, set[str]]:
        batch = Batch(
            changed=frozenset(p for p, exists in self._files.items() if exists),
            deleted=frozenset(p for p, exists in self._files.items() if not exists),
            deleted_dirs=frozenset(self._dirs_gone),
            rules_changed=self._rules_changed,
            events=self._events,
        )
        databases = self._databases
        self._files, self._dirs_gone, self._events, self._databases = {}, set(), 0, set()
        self._rules_changed = False
        return batch, databases

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._events and not self._stopped:
                    self._cond.wait()  # idle: no timeout, no CPU
                if self._stopped:
                    return
                now = time.monotonic()
                due = min(self._last + self.debounce_s, self._first + self.max_delay_s)
                if now < due:
                    self._cond.wait(due - now)
                    continue
                batch, databases = self._take()
            if databases and self._databases_differ(databases):  # read outside the lock
                batch = replace(batch, database_changed=True)
            if batch:
                self.batches += 1
                try:
                    self._on_batch(batch)
                except Exception:
                    log.exception("watch batch handler failed")


# --- the watcher ------------------------------------------------------------------------------


class WorkspaceWatcher:
    """A watchdog observer on one folder, feeding a BatchCollector. `accept` narrows the files
    further (the CLI watching single files). `start` raises OSError when the folder itself cannot
    be watched (missing, unreadable, inotify watch limit); folders below it that cannot be read
    are skipped by watchdog and reported by `scan_tree`."""

    def __init__(
        self,
        root: str,
        on_batch: Callable[[Batch], None],
        exclude: Iterable[str] = (),
        debounce_s: float = DEBOUNCE_S,
        max_delay_s: float = MAX_DELAY_S,
        accept: Callable[[str], bool] | None = None,
    ) -> None:
        self.root = normalize(root)
        self.rules = IgnoreRules(self.root, exclude)
        self.collector = BatchCollector(on_batch, debounce_s, max_delay_s, self._databases_differ)
        self._accept = accept
        self._observer: BaseObserver | None = None
        self.events_seen = 0
        self._databases: dict[str, str | None] = {}  # path -> digest of its last text seen

    @property
    def exclude(self) -> tuple[str, ...]:
        return self.rules.exclude

    def start(self) -> None:
        if not os.path.isdir(self.root):
            raise OSError(f"not a folder: {self.root}")
        if not os.access(self.root, os.R_OK | os.X_OK):
            raise PermissionError(f"cannot read folder {self.root}")
        observer = Observer()
        # Only these events: opens, reads and attribute changes (our own compiles read files)
        # must not wake the watcher. The filter also narrows the inotify mask.
        wanted = [
            FileCreatedEvent,
            FileDeletedEvent,
            FileModifiedEvent,
            FileMovedEvent,
            FileClosedEvent,
            DirCreatedEvent,
            DirDeletedEvent,
            DirMovedEvent,
        ]
        observer.schedule(_Handler(self), self.root, recursive=True, event_filter=wanted)
        self.collector.start()
        try:
            observer.start()
        except Exception:
            self.collector.stop()
            raise
        self._observer = observer

    def _databases_differ(self, paths: set[str]) -> bool:
        """Whether any of these compilation databases holds new text. CMake rewrites them on
        every configure, mostly with the same text: only new text re-checks the workspace."""
        differ = False
        for path in paths:
            digest = _digest(path)
            if self._databases.get(path, "") != digest:
                self._databases[path] = digest
                differ = True
        return differ

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            if threading.current_thread() is not self._observer:
                self._observer.join(timeout=5)
            self._observer = None
        self.collector.stop()

    def scan(self, limit: int = 100_000) -> Scan:
        scan = scan_tree(self.root, self.rules, limit)
        if self._accept is not None:
            scan.files = [f for f in scan.files if self._accept(f)]
        return scan

    # Called from watchdog's thread.
    def on_event(self, kind: str, src: str, dest: str, is_dir: bool) -> None:
        self.events_seen += 1
        if is_dir:
            if kind in ("deleted", "moved"):
                self.collector.dir_gone(normalize(src))
            # A created or moved-in folder: watchdog reports the files inside it one by one.
            return
        if kind == "moved":
            self._file(src, exists=False)
            self._file(dest, exists=True)
        else:
            self._file(src, exists=kind != "deleted")

    def _file(self, path: str, exists: bool) -> None:
        if not path:
            return
        if os.path.basename(path) == ".gitignore":
            if not self.rules.ignored(path):
                self.rules.invalidate()
                self.collector.rules_changed()
            return
        if os.path.basename(path) == DATABASE_NAME:
            self.collector.database_touched(path)
            return
        if not is_watched_file(path) or self.rules.ignored(path):
            return
        path = normalize(path)
        if self._accept is not None and not self._accept(path):
            return
        self.collector.file_event(path, exists)


def _digest(path: str) -> str | None:
    try:
        return hashlib.sha256(read_regular(path, MAX_DATABASE_BYTES)).hexdigest()
    except OSError:
        return None  # deleted, or unreadable: either way what the flags come from changed


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: WorkspaceWatcher) -> None:
        super().__init__()
        self._watcher = watcher

    def on_any_event(self, event) -> None:
        kind = event.event_type
        if kind not in ("created", "deleted", "modified", "moved", "closed"):
            return
        try:
            self._watcher.on_event(
                kind, os.fsdecode(event.src_path), os.fsdecode(event.dest_path or ""), event.is_directory
            )
        except Exception:  # never let one odd path stop the observer thread
            log.exception("watch event %r failed", event)


# --- from a batch to work ---------------------------------------------------------------------


def plan_batch(batch: Batch, graph: IncludeGraph, known: Iterable[str] = ()) -> ChangePlan:
    """What a batch means for checks, updating `graph` on the way. `known` lists files the
    caller tracks beyond the graph (for folders deleted or moved away)."""
    plan = ChangePlan()
    deleted = set(batch.deleted)
    for folder in batch.deleted_dirs:
        prefix = folder + os.sep
        deleted |= graph.files_under(folder) | {k for k in known if k.startswith(prefix)}
    deleted -= set(batch.changed)
    for p in deleted:
        if is_spec(p):
            plan.dependents.update(spec_owners(p))
        elif is_cuda(p):
            plan.forget.add(p)
            # Before the graph drops the file: whoever included it must now report it missing.
            plan.dependents |= graph.dependents(p)
    for p in batch.changed:
        if is_spec(p):
            plan.dependents.update(spec_owners(p))
        elif is_cuda(p):
            plan.changed.add(p)
            plan.dependents |= graph.dependents(p)  # through the includes as they were
    for p in deleted:
        if is_cuda(p):
            graph.remove(p)
    for p in sorted(plan.changed):
        graph.update(p)
    for p in sorted(plan.changed):
        waiting = graph.waiting_for(p)  # a header that files were waiting for now exists
        for w in waiting:
            graph.update(w)
        plan.dependents |= waiting | graph.dependents(p)  # and through the includes as they are
    if batch.database_changed:
        # Which files a database covers, and which database a file finds, depends on the
        # settings: every checked file is asked again. One whose database did not change hits
        # the check cache (the key holds the stamp of the database the file uses).
        plan.dependents |= {k for k in known if is_cuda(k)}
    plan.dependents -= plan.forget
    return plan
