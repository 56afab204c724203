"""Runs checks off the event loop and publishes their diagnostics.

Invariants:
- NVRTC runs in worker processes (it serialises compiles inside one process), never on the loop,
  each check under its deadline and memory limit; a worker past its deadline is killed alone
  (with what it started) and the file is "not checked in time". Nothing that reads files or
  databases (the cache key: headers, compile_commands.json) runs on the loop either.
- At most one check per document is in flight; requests that arrive meanwhile collapse into one
  re-check of the newest text, so 50 saves in a second cost two compiles, not fifty.
- A result for an older document version than the editor's is dropped, never published.
- Identical text, settings and header stamps are served from a cache (the key is computed in a
  thread); a check that did not finish (deadline, memory, crash) is never cached.
- Findings a file's check makes on other files (errors inside a header) are published on those
  files too, merged with the findings of every other check that reached them.
- The compile workers end after `worker_idle_s` without a check (they hold ~130 MB each with
  NVRTC loaded) and start again with the next check.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from ..check import CUDA_SUFFIXES, SPEC_SUFFIX, FileCheck, Includer, failed_check, spec_owners
from ..compile import header_stamps, include_closure
from ..compile.compile_commands import Lookup, database_stamp
from ..compile.jobs import JobFailed, WorkerPool
from ..config import Settings
from ..model import Diagnostic
from ..spec import spec_path_for
from ..workspace import Workspace

log = logging.getLogger(__name__)

# How long requests must pause, during a burst, before the newest text is checked again.
BURST_QUIET_S = 0.15


def _check_job(
    text: str | None,
    path: str,
    workspace: Workspace,
    spec_text: str | None = None,
    includers: tuple[Includer, ...] = (),
    project: Lookup | None = None,
) -> FileCheck:
    return workspace.analyze(path, text, spec_text, includers, project)


def _warm_up() -> None:
    # Load NVRTC in the worker before the first real file arrives.
    from ..compile import CompileOptions, compile_source

    compile_source("", "warmup.cu", CompileOptions(), use_cache=False)


@dataclass
class Snapshot:
    """What one check saw: the text (None: read from disk) and the editor's version."""

    text: str | None
    version: int | None


class Analysis:
    def __init__(
        self,
        publish: Callable[[str, list[Diagnostic]], None],
        snapshot: Callable[[str], Snapshot],
        workspace: Callable[[], Workspace],
        on_busy: Callable[[bool], None] = lambda busy: None,
        on_checked: Callable[[str, FileCheck, Snapshot], None] = lambda path, check, snap: None,
        workers: int | None = None,
        may_run_spec: Callable[[str], bool] = lambda path: False,
    ) -> None:
        self._publish = publish
        self._snapshot = snapshot
        self._workspace = workspace
        self._on_busy = on_busy
        self._on_checked = on_checked
        self._may_run_spec = may_run_spec
        self._workers = workers or max(1, min(4, os.cpu_count() or 1))
        self._pool: WorkerPool | None = None
        self.results: dict[str, FileCheck] = {}
        self._cache: dict[str, FileCheck] = {}
        self._running: dict[str, asyncio.Task] = {}
        self._again: set[str] = set()
        self._last_request: dict[str, float] = {}
        self._done: dict[str, asyncio.Event] = {}
        # target path -> {checked path -> findings on target}
        self._published: dict[str, dict[str, list[Diagnostic]]] = {}
        self._closed = False
        self._idle_timer: asyncio.TimerHandle | None = None
        self.compiles = 0  # how many checks reached NVRTC (for tests and benchmarks)
        # The files a header is checked in the context of, best first (the watcher's include graph).
        self.includers: Callable[[str], tuple[Includer, ...]] = lambda path: ()
        self.idle_stops = 0  # how often idle workers were ended

    # --- pool ---------------------------------------------------------------------------------

    def _executor(self) -> WorkerPool:
        if self._pool is None:
            self._pool = WorkerPool(self._workers, "spawn")  # the server has threads: no fork
        return self._pool

    def warm_up(self) -> None:
        pool = self._executor()
        settings = self._workspace().settings
        for _ in range(self._workers):
            pool.submit(_warm_up, (), settings.check_timeout_s, settings.compile_memory_bytes)
        self._arm_idle_stop()  # a session that never checks a file must not keep them either

    def shutdown(self) -> None:
        self._closed = True  # checks still in flight must not write to a closed client
        self._cancel_idle_stop()
        self._end_workers()

    @property
    def workers_running(self) -> bool:
        return self._pool is not None

    def _arm_idle_stop(self) -> None:
        self._cancel_idle_stop()
        idle_s = self._workspace().settings.worker_idle_s
        if idle_s > 0 and self._pool is not None and not self._closed:
            self._idle_timer = asyncio.get_running_loop().call_later(idle_s, self._idle_stop)

    def _cancel_idle_stop(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _idle_stop(self) -> None:
        self._idle_timer = None
        if self._running or self._pool is None:
            return
        log.info(
            "compile workers idle for %s s: ending them (they start again on the next check)",
            self._workspace().settings.worker_idle_s,
        )
        self.idle_stops += 1
        if self._pool is not None:
            pool, self._pool = self._pool, None
            asyncio.get_running_loop().run_in_executor(None, pool.close)  # joins processes: off the loop

    def _end_workers(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.close()

    # --- scheduling ---------------------------------------------------------------------------

    def request(self, path: str) -> None:
        """Check `path` soon (its editor text if open, else the file on disk). A spec sidecar
        stands for its kernel file: the kernel file's check verifies it."""
        if path.endswith(SPEC_SUFFIX):
            for kernel_file in spec_owners(path):
                self.request(kernel_file)
            return
        if not path.endswith(CUDA_SUFFIXES):
            return
        self._done.setdefault(path, asyncio.Event()).clear()
        self._cancel_idle_stop()
        self._last_request[path] = asyncio.get_running_loop().time()
        if path in self._running:
            self._again.add(path)
            return
        self._running[path] = asyncio.ensure_future(self._run(path))
        if len(self._running) == 1:
            self._on_busy(True)

    def forget(self, path: str) -> None:
        """The file is gone: clear its findings everywhere."""
        self.results.pop(path, None)
        self._again.discard(path)
        self.set_findings(path, [])
        ev = self._done.get(path)
        if ev:
            ev.set()

    async def latest(self, path: str, timeout: float = 10.0) -> FileCheck | None:
        """The last result at once when there is one (a hover must not wait for a re-check in
        flight); else wait for the first."""
        return self.results.get(path) or await self.wait(path, timeout)

    async def wait(self, path: str, timeout: float = 60.0) -> FileCheck | None:
        """The newest result for `path`, waiting for a check in flight."""
        ev = self._done.get(path)
        if ev is not None and not ev.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(ev.wait(), timeout)
        return self.results.get(path)

    async def _run(self, path: str) -> None:
        try:
            while True:
                self._again.discard(path)
                await self._check_once(path)
                if path not in self._again:
                    break
                # A burst (saves while a check ran): wait for a quiet moment, then check the
                # newest text once. A lone save starts at once; 50 saves in a second cost a
                # handful of compiles instead of one per compile time.
                await self._quiet(path)
        except Exception:
            log.exception("check of %s failed", path)
        finally:
            self._running.pop(path, None)
            self._done.setdefault(path, asyncio.Event()).set()
            if not self._running:
                self._on_busy(False)
                self._arm_idle_stop()

    async def _quiet(self, path: str) -> None:
        loop = asyncio.get_running_loop()
        while (left := self._last_request.get(path, 0.0) + BURST_QUIET_S - loop.time()) > 0:
            await asyncio.sleep(left)

    async def _check_once(self, path: str) -> None:
        snap = self._snapshot(path)
        workspace = self._workspace()
        if workspace.settings_for(path).runs_specs and not self._may_run_spec(path):
            # Nobody opened or saved this file: its spec is read, not run (SECURITY.md).
            workspace = workspace.with_overrides(**{"specs.run": "never"})
        settings, base_dir = workspace.settings_for(path), workspace.root
        if snap.text is None and not os.path.exists(path):
            self.forget(path)
            return
        spec_path = spec_path_for(path)
        spec_text = self._snapshot(spec_path).text
        includers = self.includers(path) if not path.endswith(".cu") else ()
        loop = asyncio.get_running_loop()
        # Reading headers and the project's database for the key: never on the loop (a large
        # compile_commands.json takes seconds, a header can be on a slow disk).
        key, project = await loop.run_in_executor(
            None, self._prepare, path, snap.text, settings, spec_path, spec_text, includers, base_dir
        )
        check = self._cache.get(key) if key else None
        if check is None:
            self.compiles += 1
            job = (snap.text, path, workspace, spec_text, includers, project)
            result = await asyncio.wrap_future(
                self._executor().submit(
                    _check_job, job, settings.check_timeout_s, settings.compile_memory_bytes
                )
            )
            if isinstance(result, JobFailed):
                log.error(
                    "checking %s did not finish: %s %s (%s)", path, result.reason, result.phase, result.detail
                )
                check = failed_check(path, result, settings)
            else:
                check = result
            if key and check.checked:
                if len(self._cache) > 512:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[key] = check
        current = self._snapshot(path)
        if current.version != snap.version or (snap.text is not None and current.text != snap.text):
            log.debug(
                "dropping stale result for %s (version %s, now %s)", path, snap.version, current.version
            )
            self._again.add(path)
            return
        if check.missing and snap.text is None:
            self.forget(path)
            return
        self.results[path] = check
        self.set_findings(path, check.diagnostics)
        self._on_checked(path, check, snap)

    @classmethod
    def _prepare(
        cls,
        path: str,
        text: str | None,
        settings: Settings,
        spec_path: str,
        spec_text: str | None,
        includers: tuple[Includer, ...],
        base_dir: str | None,
    ) -> tuple[str | None, Lookup]:
        """In a thread: the cache key and the file's database flags (handed to the worker, which
        then need not read the database itself)."""
        project = settings.project_flags(path, base_dir)
        return cls._cache_key(path, text, settings, spec_path, spec_text, includers, base_dir), project

    @staticmethod
    def _cache_key(
        path: str,
        text: str | None,
        settings: Settings,
        spec_path: str = "",
        spec_text: str | None = None,
        includers: tuple[Includer, ...] = (),
        base_dir: str | None = None,
    ) -> str | None:
        if text is None:
            return None  # files on disk are re-read each time: the watcher says when they change
        if len(text) > settings.max_file_bytes:
            return None  # not compiled anyway; scanning it for includes would block the loop
        ident = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        # Headers found through the project's -I folders too (not its -isystem ones: torch's or a
        # toolkit's headers change with an install, and scanning them here would block the loop).
        project = settings.project_flags(path, base_dir).flags
        dirs = tuple(settings.include_dirs) + (project.include_dirs if project else ())
        try:
            headers = include_closure(text, path, dirs)
        except Exception:
            headers = {}
        # The spec sidecar's findings are part of the result: its text, or its stamp on disk.
        spec = spec_text if spec_text is not None else header_stamps([spec_path])
        # The project's flags (compile_commands.json) and a header's includer are inputs too.
        database = database_stamp(path, base_dir, settings.compile_commands)
        context = [(p, t if t is not None else header_stamps([p])) for p, t in includers]
        raw = repr((path, ident, settings, header_stamps(headers), spec, database, context))
        return hashlib.sha256(raw.encode()).hexdigest()

    # --- publishing ---------------------------------------------------------------------------

    def set_findings(self, checked: str, diagnostics: list[Diagnostic]) -> None:
        """Publish what the check of `checked` found (on it and on other files). Other producers
        (GPU verification) use their own `checked` key, e.g. "gpu:<path>"."""
        if self._closed:
            return
        by_target: dict[str, list[Diagnostic]] = {}
        for d in diagnostics:
            target = os.path.normpath(os.path.abspath(d.path)) if os.path.isabs(d.path) else checked
            by_target.setdefault(target, []).append(d)
        touched = {t for t, sources in self._published.items() if checked in sources} | set(by_target)
        if os.path.isabs(checked):
            touched.add(checked)
        for target in touched:
            sources = self._published.setdefault(target, {})
            if target in by_target:
                sources[checked] = by_target[target]
            else:
                sources.pop(checked, None)
            self._publish(target, self.findings_for(target))

    def findings_for(self, target: str) -> list[Diagnostic]:
        """The findings on `target` from every check that reached it, each once."""
        seen, out = set(), []
        sources = self._published.get(target, {})
        # The file's own check first: it is the most direct view.
        for source in sorted(sources, key=lambda s: s != target):
            for d in sources[source]:
                key = (d.line, d.col, d.message)
                if key not in seen:
                    seen.add(key)
                    out.append(d)
        return out
