"""The server object and its state: settings, the analysis, how diagnostics reach the client.
Every attribute of the server is declared in `KernelLanguageServer.__init__`; the feature modules
change it through the server's methods (tests/unit/test_architecture.py: no other module assigns
an attribute of the server).

The engine (the Workspace, the analysis and its workers, the GPU feature) is imported and built on
first use, not when the server starts: an editor waits for the answer to `initialize`, and the
engine's modules (the compilers' bindings, numpy) would double that wait."""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import sys
import threading
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from .. import __version__
from .convert import to_lsp
from .uris import path_to_uri, uri_to_path

if TYPE_CHECKING:
    from ..api.checks import FileCheck, Settings
    from ..api.model import Diagnostic
    from ..workspace import Trigger, Workspace
    from .analysis import Analysis, Snapshot
    from .gpu_feature import GpuFeature
    from .logs import ClientLogHandler
    from .snapshot import DocumentSnapshot, GpuFigures
    from .watching import Watching

log = logging.getLogger(__name__)

STATUS_NOTIFICATION = "kernelLsp/status"
# How long the server may take to end its workers and watchers once told to exit (the process
# ends after it either way; a compile worker's own stop is 2 s, the pool's join 30 s at most).
CLOSE_DEADLINE_S = 10.0


@dataclass
class FsrState:
    """The editor's FSR runs (requests/execute_command.py): one at a time."""

    running: bool = False
    last_report: str | None = None  # the URI of the last run's Markdown report
    session: Any = None  # a GpuSession of the runs' own when the GPU feature has none to share


class KernelLanguageServer(LanguageServer):
    def __init__(self, log_file: str | None = None) -> None:
        super().__init__("kernel-lsp", __version__)
        # --- the engine and its settings
        self._engine: Workspace | None = None  # `engine`, built on first use
        self._deferred_settings: tuple[Any, str] | None = None  # applied on the engine's first use
        self._settings_logged = False
        # --- the editor's session (`initialize`)
        self.init_options: Any = None
        self.pull_diagnostics = False
        # Files the user opened or saved in the editor: only their specs may run (SECURITY.md).
        self.acted_on: set[str] = set()
        self.log_file = log_file  # the server's own log (--log-file): never watched
        self.client_log: ClientLogHandler | None = None  # the log as window/logMessage, once serving
        self.exit_code = 0
        # --- what the client is told
        self._last_status: dict | None = None  # kernelLsp/status goes out only when it changes
        self._publishes: dict[str, int] = {}  # path -> its latest publishDiagnostics' turn
        # --- the GPU (gpu_feature.py): the feature once a GPU answered, else why there is none,
        # worded by kernel_lsp.gpu.no_gpu_message (one wording everywhere; the driver's raw text
        # only in the log)
        self.gpu: GpuFeature | None = None
        self.device_name: str | None = None
        self.gpu_absent_reason = "no GPU: the GPU probe has not answered yet"
        self.fsr = FsrState()
        # --- features: hooks run after each check, each with (path, check, snapshot); features
        # that start after `initialized` (async, no arguments) and stop on `shutdown`
        self.after_check_hooks: list = []
        self.initialized_hooks: list = []
        self.shutdown_hooks: list = []
        self.watching: Watching | None = None  # the workspace's file watcher (watching.py)
        self.after_check_hooks.append(
            lambda path, check, snap: self.gpu_feature.after_check(path, check, snap)
        )
        from .clangd.proxy import ClangdProxy

        self.clangd = ClangdProxy(self)  # navigation and completion, from a clangd child process

    # --- state the features change --------------------------------------------------------------

    def new_session(self, pull_diagnostics: bool, init_options: Any) -> None:
        """An editor sent `initialize` (over --tcp, perhaps after another): nothing acted on yet."""
        self.pull_diagnostics = pull_diagnostics
        self.init_options = init_options
        self.acted_on.clear()

    def log_to_client(self) -> None:
        """Route the log's records below ERROR to the editor as window/logMessage."""
        from .logs import send_log_to_client

        self.client_log = send_log_to_client(self)

    def watch_with(self, watching: Watching) -> None:
        """The workspace's file watcher: it hears of each check, starts after `initialized`,
        stops on `shutdown`, and tells the analysis which files include a header."""
        self.watching = watching
        self.after_check_hooks.append(watching.after_check)
        self.initialized_hooks.append(watching.sync_folders)
        self.shutdown_hooks.append(watching.stop)

    def gpu_up(self, feature: GpuFeature, device_name: str) -> None:
        self.gpu, self.device_name = feature, device_name

    def gpu_down(self, reason: str | None = None) -> None:
        """No GPU figures from here on; `reason` (when given) says why, to hover and lenses."""
        self.gpu, self.device_name = None, None
        if reason is not None:
            self.gpu_absent_reason = reason

    # --- the engine, built on first use ---------------------------------------------------------

    @property
    def engine(self) -> Workspace:
        """The engine's front door: the editor's settings over each file's pyproject.toml."""
        if self._engine is None:
            from ..workspace import Workspace

            self._engine = Workspace()
            deferred, self._deferred_settings = self._deferred_settings, None
            if deferred is not None:
                self.apply_settings(*deferred)
        return self._engine

    @engine.setter
    def engine(self, workspace: Workspace) -> None:
        self._engine = workspace

    def defer_settings(self, raw: Any, origin: str) -> None:
        """`apply_settings(raw, origin)` when the engine is first used (at `initialize`, whose
        answer must not wait for the engine's modules); at once when the engine is running (a
        second editor over --tcp)."""
        if self._engine is None:
            self._deferred_settings = (raw, origin)
        else:
            self.apply_settings(raw, origin)

    @cached_property
    def analysis(self) -> Analysis:
        from .analysis import Analysis

        analysis = Analysis(
            publish=self._publish,
            snapshot=self.snapshot,
            workspace=lambda: self.engine,
            on_busy=lambda busy: self.send_status("checking" if busy else None),
            on_checked=self._after_check,
            on_definitions=self._definitions_changed,
            may_run_spec=self.may_run_spec,
        )
        if self.watching is not None:
            analysis.includers = self.watching.includers_of
        return analysis

    @cached_property
    def gpu_feature(self) -> GpuFeature:
        from .gpu_feature import GpuFeature

        return GpuFeature(self)

    def built(self, name: str) -> bool:
        """Whether the lazily built part `name` (`analysis`, `gpu_feature`) exists yet."""
        return name in self.__dict__

    # --- transport ----------------------------------------------------------------------------

    def start_io(self, stdin=None, stdout=None, early=None) -> None:
        """Serve over stdio with a strict reader (transport.py): a framing error ends the server
        with exit code 1 so that the client restarts it. The exit code is in `exit_code`."""
        from .transport import serve_stdio

        try:
            self.exit_code = serve_stdio(self, stdin or sys.stdin.buffer, stdout or sys.stdout.buffer, early)
        finally:
            self.close()

    def close(self, deadline_s: float = CLOSE_DEADLINE_S) -> bool:
        """End every process and thread the server started (also when the client went away
        without shutdown): compile workers, the GPU worker, the watchers. Within `deadline_s`:
        a step that blocks (a worker that does not answer, a join) is logged and left to the
        process's exit, because an editor waits for a server it told to exit (and a test
        client waits forever). Whether every step finished in time."""
        steps = [self.clangd.kill, *self.shutdown_hooks]
        if self.built("gpu_feature"):
            steps.insert(0, self.gpu_feature.stop)
        if self.built("analysis"):
            steps.insert(0, self.analysis.shutdown)
        current: list[Any] = [None]

        def run_steps() -> None:
            for step in steps:
                current[0] = step
                try:
                    result = step()
                    if inspect.iscoroutine(result):  # no loop to await it in: clangd.kill did its work
                        result.close()
                except Exception:
                    log.exception("closing the server: %s", step)
            current[0] = None

        closing = threading.Thread(target=run_steps, name="kernel-lsp-close", daemon=True)
        closing.start()
        closing.join(deadline_s)
        if closing.is_alive():
            log.error(
                "closing the server: %s did not finish within %.0f s; exiting without it",
                getattr(current[0], "__qualname__", current[0]),
                deadline_s,
            )
            return False
        return True

    # --- documents ----------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        """The workspace's settings (per file: `self.engine.settings_for(path)`)."""
        return self.engine.settings

    def root_path(self) -> str | None:
        try:
            root = self.workspace.root_path
        except RuntimeError:  # before `initialize`
            return None
        return root or None

    def open_document(self, path: str):
        uri = path_to_uri(path)
        return self.workspace.text_documents.get(uri)

    def snapshot(self, path: str) -> Snapshot:
        """The editor's text is the truth for open documents; others are read from disk."""
        from .analysis import Snapshot

        doc = self.open_document(path)
        if doc is not None:
            return Snapshot(doc.source, doc.version)
        return Snapshot(None, None)

    def user_acted(self, uri: str) -> None:
        """The user opened or saved this file: its spec (or the spec's kernel file's) may run."""
        path = uri_to_path(uri)
        if path:
            self.acted_on.add(path)

    def may_run_spec(self, path: str) -> bool:
        """Whether the spec of kernel file `path` may run: the setting allows it and the user
        opened or saved the kernel file or its spec; never for the start-up walk or the watcher
        alone (a cloned repository would run its code on open)."""
        if not self.engine.settings_for(path).runs_specs:
            return False
        from ..api.sources import spec_path_for

        return path in self.acted_on or spec_path_for(path) in self.acted_on

    def request_check(self, uri: str, trigger: Trigger) -> None:
        path = uri_to_path(uri)
        if path:
            self.analysis.request(path, trigger)

    def _after_check(self, path, check, snap) -> None:
        for hook in self.after_check_hooks:
            try:
                hook(path, check, snap)
            except Exception:
                log.exception("after-check hook failed for %s", path)

    def _definitions_changed(self, headers: set[str]) -> None:
        """Template instances compiled elsewhere changed for these headers: an open one asks the
        client for its code lenses again (when the client can be asked)."""
        if not any(self.open_document(h) is not None for h in headers):
            return
        caps = self.client_capabilities.workspace if self.client_capabilities else None
        if caps and caps.code_lens and caps.code_lens.refresh_support:
            try:
                self.workspace_code_lens_refresh(None)
            except Exception:  # the transport closed
                log.debug("code lens refresh not sent", exc_info=True)

    # --- what read-only requests see ---------------------------------------------------------

    def document_snapshot_now(self, uri: str, spec_text: bool = False) -> DocumentSnapshot | None:
        """`uri`'s text, the check at hand (None while the first one runs) and GPU figures, frozen
        for one request (snapshot.py); None for a URI that is not a file. `spec_text`: read the
        spec sidecar's text too (code actions; hover and lenses need not read it on each request)."""
        path = uri_to_path(uri)
        return (
            self._document_snapshot(uri, path, self.analysis.results.get(path), spec_text) if path else None
        )

    async def document_snapshot(self, uri: str) -> DocumentSnapshot | None:
        """As `document_snapshot_now`, waiting for the file's first check when it has no result yet."""
        path = uri_to_path(uri)
        if not path:
            return None
        check = await self.analysis.latest(path)
        return self._document_snapshot(uri, path, check)

    def _document_snapshot(
        self, uri: str, path: str, check: FileCheck | None, with_spec_text: bool = False
    ) -> DocumentSnapshot:
        from ..api.sources import spec_path_for
        from .snapshot import DocumentSnapshot

        text, version, unreadable = self._document_text(uri, path)
        spec_path = spec_path_for(path)
        spec_text, spec_unreadable = None, None
        if with_spec_text:
            spec_text, _, spec_unreadable = self._document_text(path_to_uri(spec_path), spec_path)
        return DocumentSnapshot(
            uri=uri,
            path=path,
            text=text,
            version=version,
            unreadable=unreadable,
            check=check,
            instances_elsewhere=tuple(self.analysis.instances_defined_in(path)),
            gpu=self.gpu_figures(path),
            spec_text=spec_text if spec_unreadable is None else None,
            spec_on_disk=os.path.exists(spec_path),
        )

    def _document_text(self, uri: str, path: str) -> tuple[str, int | None, str | None]:
        """(text, the editor's version, why it could not be read): the editor's text of an open
        document, else the file's ("" when it cannot be read; a FIFO must not block the loop; a
        file that is not UTF-8 is its text with the bad bytes replaced, and says why)."""
        doc = self.workspace.text_documents.get(uri) or self.open_document(path)
        if doc is not None:
            return doc.source, doc.version, None
        try:
            return self.engine.file_text(path), None, None
        except UnicodeDecodeError as e:
            return self.engine.file_text(path, errors="replace"), None, str(e)
        except OSError as e:
            return "", None, str(e)

    def gpu_figures(self, path: str) -> GpuFigures:
        """The GPU feature's results for `path` (filled in when a GPU is present)."""
        from .snapshot import GpuFigures

        if self.gpu is None:
            return GpuFigures(absent_reason=self.gpu_absent_reason)
        # The name kept at start: asking the session would wait for the GPU while a check runs.
        return GpuFigures(checks=tuple(self.gpu.results.get(path, ())), device=self.device_name or "GPU")

    # --- diagnostics --------------------------------------------------------------------------

    def _publish(self, path: str, diagnostics: list[Diagnostic]) -> None:
        if self.pull_diagnostics:
            # Pull clients ask again after a refresh; only ask when the client allows it.
            caps = self.client_capabilities.workspace
            if caps and caps.diagnostics and caps.diagnostics.refresh_support:
                self.workspace_diagnostic_refresh(None)
            return
        # Each publish of a path supersedes the ones before it, also those still reading lines.
        self._publishes[path] = turn = self._publishes.get(path, 0) + 1
        doc = self.open_document(path)
        if doc is not None:
            self._send_diagnostics(path, diagnostics, doc.lines, doc.version)
            return
        # A file the editor has not opened (a header a check reached): its lines (for the ranges
        # of whole-line findings) are read off the event loop, which never reads a file.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop in this thread: nothing to keep from blocking
            self._send_diagnostics(path, diagnostics, _read_lines(path), None)
            return
        read = loop.run_in_executor(None, _read_lines, path)

        def send(done: asyncio.Future) -> None:
            if self._publishes.get(path) != turn or done.cancelled():
                return  # a newer publish of the path went out meanwhile
            lines = done.result() if done.exception() is None else None
            self._send_diagnostics(path, diagnostics, lines, None)

        read.add_done_callback(send)

    def _send_diagnostics(
        self, path: str, diagnostics: list[Diagnostic], lines: list[str] | None, version: int | None
    ) -> None:
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=path_to_uri(path),
                version=version,
                diagnostics=self.lsp_diagnostics(path, diagnostics, lines),
            )
        )

    def lsp_diagnostics(
        self, path: str, diagnostics: list[Diagnostic], lines: list[str] | None
    ) -> list[types.Diagnostic]:
        """kernel-lsp's findings, and with `clangd.diagnostics: agreeing` clangd's on their lines."""
        out = [to_lsp(d, lines) for d in diagnostics]
        if self.settings.clangd_diagnostics == "agreeing" and out:
            out += self.clangd.agreeing(path_to_uri(path), {d.range.start.line for d in out})
        return out

    def republish(self, path: str) -> None:
        """Publish `path`'s findings again (clangd's changed, in `agreeing` mode)."""
        if path in self.analysis.results:
            self._publish(path, self.analysis.findings_for(path))

    # --- settings -----------------------------------------------------------------------------

    def apply_settings(self, raw: Any, origin: str) -> bool:
        """Apply a settings object; report problems to the user. True when something changed."""
        if isinstance(raw, dict) and isinstance(raw.get("kernelLsp"), dict):
            raw = raw["kernelLsp"]
        if raw is not None and not isinstance(raw, dict):
            self.show_warning(f"kernel-lsp: {origin}: settings must be an object, got {type(raw).__name__}")
            raw = {}
        from ..api.checks import parse_overrides
        from ..workspace import Workspace

        # The server compiles nothing (its workers do): the arch checks below ask NVRTC in a child
        # rather than keep its library resident here (issue 33).
        Workspace.compile_only_in_children()

        before = self.engine.settings
        # The editor's settings parsed here, by the front end; the Workspace gets them typed.
        self.engine = Workspace(parse_overrides(raw), self.root_path())
        settings = self.engine.settings
        for problem in self.engine.problems():
            self.show_warning(f"kernel-lsp: {origin}: {problem}")
        for message in self.engine.arch_problems():
            self.show_warning(f"kernel-lsp: {origin}: {message}")
        changed = settings != before
        if changed or not self._settings_logged:  # once a start, and again when they change
            self._settings_logged = True
            log.info("settings from %s: %s", origin, settings)  # Settings' repr leaves the key out
        return changed

    def show_warning(self, message: str) -> None:
        log.warning(message)
        self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))

    def send_status(self, busy: str | None, detail: str | None = None) -> None:
        if self.fsr.running and busy is None:
            busy = "optimizing"
        params = {"device": self.device_name, "busy": busy}
        if detail:
            params["detail"] = detail
        # Editors show each status (Neovim users notify on it): the same one twice is noise.
        if params == self._last_status:
            return
        self._last_status = params
        try:
            self.protocol.notify(STATUS_NOTIFICATION, params)
        except Exception:  # no client attached (tests) or the transport closed
            log.debug("status notification not sent", exc_info=True)


def _read_lines(path: str) -> list[str] | None:
    from ..api.sources import MAX_FILE_BYTES, read_text_prefix

    text = read_text_prefix(path, MAX_FILE_BYTES)  # never blocks on a FIFO
    return text.splitlines(keepends=True) if text is not None else None
