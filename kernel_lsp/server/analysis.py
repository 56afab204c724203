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
  NVRTC loaded) and start again with the next check; all but one end after `WORKER_SHRINK_S`
  idle (jobs.py), and each gives its freed heap back after a job.
- Two phases for an open file: where NVRTC answers first (compile/verdict.py), the full check
  itself reports NVRTC's errors as a preview while nvcc decides (`report_preview`), published at
  once; where nvcc decides, a first look runs beside the full check: NVRTC's result where NVRTC
  sees what nvcc sees (a database entry running nvcc), else nvcc's front end alone, where it is
  well under the full compile (learned per file). Never one with an error only JIT mode gives.
  The full result (nvcc's verdict, resources, ptxas findings) replaces it, so no NVRTC-only error
  stands. `--check` uses the full result only.
- A newer text cancels the compile in flight: its token file is created and the worker kills
  nvcc's process group within a tenth of a second; the newest text is checked after the burst.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..api.checks import (
    CUDA_SUFFIXES,
    SPEC_SUFFIX,
    CheckScheduler,
    FileCheck,
    Includer,
    Settings,
    release_memory,
    spec_owners,
)
from ..api.model import CompileResult, Diagnostic, KernelResources
from ..api.sources import spec_path_for
from ..workspace import CheckRequest, Trigger, Workspace
from .packages import OnePerPackage

log = logging.getLogger(__name__)

WORKER_SHRINK_S = 20.0  # idle workers beyond one end after this
TRIM_AFTER_S = 5.0  # quiet this long: the server's freed heap goes back (malloc_trim)

# How long requests must pause, during a burst, before the newest text is checked again.
BURST_QUIET_S = 0.15
# A first look runs beside the full compile while the front end took under this share of it.
FIRST_LOOK_SHARE = 0.5


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
        on_definitions: Callable[[set[str]], None] = lambda headers: None,
    ) -> None:
        self._publish = publish
        self._snapshot = snapshot
        self._workspace = workspace
        self._on_busy = on_busy
        self._on_checked = on_checked
        self._may_run_spec = may_run_spec
        self._on_definitions = on_definitions
        # header -> {checked file -> the kernels it compiled that the header defines}: template
        # instances get their resources where the template is written.
        self._definitions: dict[str, dict[str, list[KernelResources]]] = {}
        # The compile workers, first looks, cancel tokens: the one scheduler of checks. The server
        # has threads: no fork. After a burst (the start-up check of a project) the workers beyond
        # one end after WORKER_SHRINK_S idle, the last after worker_idle_s.
        self._scheduler = CheckScheduler(workers, spawn=True, shrink_after_s=WORKER_SHRINK_S)
        self.results: dict[str, FileCheck] = {}
        self._keys: dict[str, str | None] = {}  # the cache key each result was checked with
        self._cache: dict[str, FileCheck] = {}
        self._running: dict[str, asyncio.Task] = {}
        self._again: set[str] = set()
        self._triggers: dict[str, Trigger] = {}  # what asked for each file's next check
        self._last_request: dict[str, float] = {}
        self._done: dict[str, asyncio.Event] = {}
        # target path -> {checked path -> findings on target}
        self._published: dict[str, dict[str, list[Diagnostic]]] = {}
        # A missing package's finding once among the files not open (server/packages.py).
        self._packages = OnePerPackage(lambda path: snapshot(path).text is not None)
        self._closed = False
        self._idle_timer: asyncio.TimerHandle | None = None
        self._trim_timer: asyncio.TimerHandle | None = None
        self.compiles = 0  # how many checks reached NVRTC (for tests and benchmarks)
        # The files a header is checked in the context of, best first (the watcher's include graph).
        self.includers: Callable[[str], tuple[Includer, ...]] = lambda path: ()
        self.idle_stops = 0  # how often idle workers were ended
        self.first_looks = 0  # how many front-end results were published (tests, benchmarks)
        self.cancels = 0  # how many compiles in flight a newer text cancelled
        # A check in flight: what it saw and the token that cancels its compiles.
        self._inflight: dict[str, tuple[Snapshot, str]] = {}
        # Files whose last check NVRTC answered first (its verdict, or its errors shown while nvcc
        # decided, `_publish_preview`): a first look of their own would say nothing sooner.
        self._nvrtc_only: set[str] = set()
        self._nvrtc_first: set[str] = set()  # of those, the ones whose last check had a preview
        # path -> (front end s, full compile s) of its last clean check: where the front end is
        # most of the compile (CUB's headers), a first look beside the full compile only slows it.
        self._phase_times: dict[str, tuple[float, float]] = {}
        self.nvrtc_used = False  # a check used NVRTC: workers started later load it at once

    # --- pool ---------------------------------------------------------------------------------

    def warm_up(self) -> None:
        self._scheduler.warm_up(self._workspace(), self.nvrtc_used)
        self._arm_idle_stop()  # a session that never checks a file must not keep them either

    def shutdown(self) -> None:
        self._closed = True  # checks still in flight must not write to a closed client
        self._cancel_idle_stop()
        for _, token in self._inflight.values():
            self._scheduler.cancel(token)
        self._scheduler.close()

    @property
    def workers_running(self) -> bool:
        return self._scheduler.running

    def _arm_idle_stop(self) -> None:
        self._cancel_idle_stop()
        idle_s = self._workspace().settings.worker_idle_s
        loop = asyncio.get_running_loop()
        if idle_s > 0 and self._scheduler.running and not self._closed:
            self._idle_timer = loop.call_later(idle_s, self._idle_stop)
        if not self._closed:
            # Quiet for a while: the heap the checks freed goes back (malloc_trim, off the loop).
            self._trim_timer = loop.call_later(
                TRIM_AFTER_S, lambda: loop.run_in_executor(None, release_memory, False)
            )

    def _cancel_idle_stop(self) -> None:
        if self._trim_timer is not None:
            self._trim_timer.cancel()
            self._trim_timer = None
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _idle_stop(self) -> None:
        self._idle_timer = None
        if self._running or not self._scheduler.running:
            return
        log.info(
            "compile workers idle for %s s: ending them (they start again on the next check)",
            self._workspace().settings.worker_idle_s,
        )
        self.idle_stops += 1
        end = self._scheduler.stop_workers()
        if end is not None:
            asyncio.get_running_loop().run_in_executor(None, end)  # joins processes: off the loop

    # --- scheduling ---------------------------------------------------------------------------

    def request(self, path: str, trigger: Trigger = "save") -> None:
        """Check `path` soon (its editor text if open, else the file on disk). A spec sidecar
        stands for its kernel file: the kernel file's check verifies it. A `batch` request (the
        start-up check of a workspace) runs after every other check, in the pool's low-priority
        worker; any other request for the file makes its next check a foreground one, and the
        latest request's trigger is the check's."""
        if path.endswith(SPEC_SUFFIX):
            for kernel_file in spec_owners(path):
                self.request(kernel_file, trigger)
            return
        if not path.endswith(CUDA_SUFFIXES):
            return
        self._triggers[path] = trigger
        self._done.setdefault(path, asyncio.Event()).clear()
        self._cancel_idle_stop()
        self._last_request[path] = asyncio.get_running_loop().time()
        if path in self._running:
            self._again.add(path)
            self._cancel_if_outdated(path)
            return
        self._running[path] = asyncio.ensure_future(self._run(path))
        if len(self._running) == 1:
            self._on_busy(True)

    def checked_paths(self) -> list[str]:
        """Every file with a result or a check in flight."""
        return sorted(set(self.results) | set(self._running))

    async def recheck_changed(self, paths: list[str]) -> None:
        """Check again each of `paths` whose inputs changed since its last check (its text, a
        header, its spec, its compile_commands.json: the cache key); one whose check is in
        flight is compared once that ends. An unchanged file is not published again."""
        loop = asyncio.get_running_loop()
        for path in paths:
            if path in self._running:
                await self.wait(path, timeout=120.0)
            if path not in self.results or self._closed:
                continue
            then = self._keys.get(path)
            if then is not None:
                snap, workspace, _, spec_path, spec_text, includers = self._inputs(path)
                now, _ = await loop.run_in_executor(
                    None, workspace.check_key, path, snap.text, spec_path, spec_text, includers
                )
                if now == then:
                    continue
            self.request(path, "watch")

    def _cancel_if_outdated(self, path: str) -> None:
        """A newer text makes the compile in flight worthless: stop it (a file on disk may have
        changed whenever it is asked for again)."""
        inflight = self._inflight.get(path)
        if inflight is None:
            return
        seen, token = inflight
        now = self._snapshot(path)
        if now.text is None or now != seen:
            log.debug(
                "cancelling the check of %s in flight (version %s, now %s)", path, seen.version, now.version
            )
            self.cancels += 1
            self._scheduler.cancel(token)

    def forget(self, path: str) -> None:
        """The file is gone: clear its findings everywhere."""
        self.results.pop(path, None)
        self._keys.pop(path, None)
        self._index_definitions(path, None)
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
                # After shutdown a cancelled check asks again: nothing may start then.
                if path not in self._again or self._closed:
                    break
                # A burst (saves while a check ran): wait for a quiet moment, then check the
                # newest text once. A lone save starts at once; 50 saves in a second cost a
                # handful of compiles instead of one per compile time.
                await self._quiet(path)
        except Exception:
            log.exception("check of %s failed", path)
        finally:
            self._running.pop(path, None)
            self._triggers.pop(path, None)
            self._done.setdefault(path, asyncio.Event()).set()
            if not self._running:
                self._on_busy(False)
                self._arm_idle_stop()

    async def _quiet(self, path: str) -> None:
        loop = asyncio.get_running_loop()
        while (left := self._last_request.get(path, 0.0) + BURST_QUIET_S - loop.time()) > 0:
            await asyncio.sleep(left)

    def _inputs(
        self, path: str
    ) -> tuple[Snapshot, Workspace, Settings, str, str | None, tuple[Includer, ...]]:
        """What a check of `path` reads now: its text, settings, spec and includers."""
        snap = self._snapshot(path)
        workspace = self._workspace()
        if workspace.settings_for(path).runs_specs and not self._may_run_spec(path):
            # Nobody opened or saved this file: its spec is read, not run (SECURITY.md).
            workspace = workspace.with_overrides(**{"specs.run": "never"})
        spec_path = spec_path_for(path)
        spec_text = self._snapshot(spec_path).text
        includers = self.includers(path) if not path.endswith(".cu") else ()
        return snap, workspace, workspace.settings_for(path), spec_path, spec_text, includers

    async def _check_once(self, path: str) -> None:
        if self._closed:  # no workers may start after shutdown
            return
        snap, workspace, _, spec_path, spec_text, includers = self._inputs(path)
        if snap.text is None and not os.path.exists(path):
            self.forget(path)
            return
        loop = asyncio.get_running_loop()
        # Reading headers and the project's database for the key: never on the loop (a large
        # compile_commands.json takes seconds, a header can be on a slow disk).
        key, project = await loop.run_in_executor(
            None, workspace.check_key, path, snap.text, spec_path, spec_text, includers
        )
        check = self._cache.get(key) if key else None
        if check is None:
            self.compiles += 1
            token = self._scheduler.new_token()
            self._inflight[path] = (snap, token)
            try:
                trigger = self._triggers.get(path, "save")
                request = CheckRequest(path, snap.text, spec_text, includers, project, token, trigger)
                check = await self._compile(path, snap, request, workspace)
            finally:
                # The token file (created only by a cancel) stays until shutdown: a first phase
                # still running must see it.
                self._inflight.pop(path, None)
            if check is None:  # cancelled by a newer text: the loop checks that one
                self._again.add(path)
                return
            said_nothing = check.incomplete or any(r.timed_out or r.cancelled for r in check.results)
            if key and check.checked and not said_nothing:
                if len(self._cache) > 512:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[key] = check
            if check.results:
                self.nvrtc_used = self.nvrtc_used or any(r.compiler == "nvrtc" for r in check.results)
                if all(r.compiler == "nvrtc" for r in check.results) or path in self._nvrtc_first:
                    self._nvrtc_only.add(path)
                else:
                    self._nvrtc_only.discard(path)
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
        self._keys[path] = key
        self._index_definitions(path, check)
        self.set_findings(path, check.diagnostics)
        self._on_checked(path, check, snap)

    async def _compile(
        self, path: str, snap: Snapshot, request: CheckRequest, workspace: Workspace
    ) -> FileCheck | None:
        """The full check in a worker, and beside it (for files whose verdict may be nvcc's) a
        first look, published as soon as it lands. None when a newer text cancelled it."""
        scheduler = self._scheduler
        # The first phase is queued first: with one free worker it still comes first. A first
        # look only where someone looks: an open document, not a project-wide check.
        first: asyncio.Future[FileCheck | None] | None = None
        if snap.version is not None and self._first_look_pays(path):
            first = asyncio.wrap_future(scheduler.first_look(request, workspace))
        loop = asyncio.get_running_loop()
        previews: list[CompileResult] = []

        def on_preview(found: object) -> None:  # the pool's thread; the result comes after it
            if isinstance(found, CompileResult) and snap.version is not None:
                loop.call_soon_threadsafe(self._publish_preview, path, snap, found, previews)

        full = asyncio.wrap_future(scheduler.check(request, workspace, on_preview))
        front_s = None
        if first is not None:
            either: list[asyncio.Future[Any]] = [first, full]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if first.done() and not full.done():
                preview = first.result()
                if preview is not None:
                    self._publish_first_look(path, snap, preview)
                    if preview.front_end_only:
                        front_s = sum(r.duration_s for r in preview.results)
            else:
                # The full result is in, no later than the first look: that said nothing sooner
                # and took a core from the compile. Learned as a front end as long as the compile,
                # so the next save runs none (learned only when it landed first, one that lost ran
                # beside every save: on 2 cores nvcc's front end of host_helpers_beside_kernels.cu
                # ended with its -cubin, each slowing the other; issue 45).
                front_s = sum(r.duration_s for r in full.result().results)
        result = await full
        if first is not None and not first.done() and request.cancel_token:
            scheduler.cancel(request.cancel_token)  # the full result is in: the first look would come too late
        if result.incomplete:  # a deadline or the memory limit: said, never a verdict
            return result
        if any(r.cancelled for r in result.results):
            return None
        self._time_phases(path, result, front_s)
        if previews:
            self._nvrtc_first.add(path)
        else:
            self._nvrtc_first.discard(path)
        return result

    def _publish_preview(
        self, path: str, snap: Snapshot, found: CompileResult, previews: list[CompileResult]
    ) -> None:
        """NVRTC's errors, reported by the full check while nvcc decides (compile_source): the
        first of a check, for the file itself (not an includer compiled for a header's context),
        and only for the text the editor still has; nvcc's verdict replaces it."""
        if previews or os.path.normpath(found.path) != os.path.normpath(path):
            return
        previews.append(found)
        if self._superseded(path, snap):
            return
        self.first_looks += 1
        self.set_findings(path, found.diagnostics)

    def _superseded(self, path: str, snap: Snapshot) -> bool:
        """Whether an early word of the check of `snap` would be stale: the editor's text moved
        on, or the file was asked for again since that check began (a save after its
        compile_commands.json was fixed: the check in flight still compiles with the old flags,
        and its NVRTC errors, published without the database's warning, read as the new verdict;
        CI, 2026-12-07). The check's full result still lands, then the next check's."""
        current = self._snapshot(path)
        if current.version != snap.version or (snap.text is not None and current.text != snap.text):
            return True
        return path in self._again

    def _first_look_pays(self, path: str) -> bool:
        """A first look is worth a worker and a core when it is well under the full check
        (templates that are slow to generate code for; NVRTC before nvcc), not when it is most of
        it (a file that includes CUB and instantiates little). A file NVRTC alone answered last
        time has none (its full check is as quick)."""
        if path in self._nvrtc_only:
            return False
        front_s, full_s = self._phase_times.get(path, (0.0, 0.0))
        return not full_s or front_s < FIRST_LOOK_SHARE * full_s

    def _time_phases(self, path: str, check: FileCheck, front_s: float | None) -> None:
        """Learn from clean checks only: a file with an error stops both phases at its front end."""
        if check.errors or check.incomplete or not check.results:
            return
        full_s = sum(r.duration_s for r in check.results)
        known_front_s = self._phase_times.get(path, (0.0, 0.0))[0]
        self._phase_times[path] = (front_s if front_s is not None else known_front_s, full_s)

    def _publish_first_look(self, path: str, snap: Snapshot, preview: FileCheck) -> None:
        """The front end's findings, while the full compile goes on; only for the text the editor
        still has."""
        if any(r.cancelled for r in preview.results) or self._superseded(path, snap):
            return
        self.first_looks += 1
        self.set_findings(path, preview.diagnostics)

    # --- where kernels are defined --------------------------------------------------------------

    def _index_definitions(self, checked: str, check: FileCheck | None) -> None:
        changed = {h for h, by_file in self._definitions.items() if by_file.pop(checked, None) is not None}
        for k in check.kernels if check is not None else ():
            if k.defined_in:
                header = os.path.normpath(k.defined_in)
                self._definitions.setdefault(header, {}).setdefault(checked, []).append(k)
                changed.add(header)
        for header in [h for h, by_file in self._definitions.items() if not by_file]:
            del self._definitions[header]
        if changed and not self._closed:
            self._on_definitions(changed)

    def instances_defined_in(self, path: str) -> list[tuple[str, KernelResources]]:
        """(checked file, kernel) for each kernel other files compiled whose definition is in
        `path` (a header's templates, instantiated by the files that include it)."""
        by_file = self._definitions.get(os.path.normpath(os.path.abspath(path)), {})
        return [(checked, k) for checked in sorted(by_file) for k in by_file[checked]]

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
        packages: set[str] = set()
        for target in touched:
            sources = self._published.setdefault(target, {})
            if target in by_target:
                sources[checked] = by_target[target]
            else:
                sources.pop(checked, None)
            packages |= self._packages.update(target, self._merged(target))
        # A file opened or closed moves a package's holder too: its check lands here.
        for target in sorted(touched | self._packages.moved(packages)):
            self._publish(target, self.findings_for(target))

    def findings_for(self, target: str) -> list[Diagnostic]:
        """The findings on `target` as the editor shows them: from every check that reached it,
        each once; a missing package on one closed file only."""
        return self._packages.shown(target, self._merged(target))

    def _merged(self, target: str) -> list[Diagnostic]:
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
