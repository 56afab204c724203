"""clangd as a child process: started in the background after `initialized`, fed the editor's
documents and kernel-lsp's flags, asked what kernel-lsp does not answer itself, restarted when it
dies, stopped with the server.

Order is the one invariant that matters: clangd must see `didOpen`, `didChange`... and requests in
the order the editor sent them. Everything a session sends goes through one queue, worked off by
one task; only the step that computes a file's flags (it reads the project's pyproject.toml and
compile_commands.json and may ask nvidia-smi for the arch, so it runs in a thread) waits inside it. A request is queued
too when anything is waiting, and sent when everything before it has been; else it goes at once.

No orphan: clangd is started through `setpriv --pdeathsig KILL`
(procs.command_dying_with_parent), so the kernel kills it the moment the server dies, however it
dies (even SIGKILL): clangd busy in a parse of CUB took more than 10 s to notice its stdin's end
on a loaded machine. Without such a setpriv, clangd still exits when its stdin reaches end of
file. clangd shares the server's
process group, so an editor that kills the group kills it too. (No `preexec_fn`/prctl: it is not
safe in a process that runs threads, as the server does.)
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from lsprotocol import converters, types

from ... import __version__, procs
from ..uris import uri_to_path
from .binary import ClangdBinary, find_clangd, user_choice
from .database import PrivateDatabase
from .rpc import JsonRpcConnection, RpcError
from .semantic_tokens import LegendMap

log = logging.getLogger(__name__)


@functools.cache
def _converter():
    """lsprotocol's converter, built on first use (35 ms: not on the way to `initialize`)."""
    return converters.get_converter()


MAX_RESTARTS = 5  # in a row; a clangd that ran STABLE_S resets the count
STABLE_S = 60.0
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)
READY_TIMEOUT_S = 15.0  # a request waits this long for a clangd that is starting
STOP_TIMEOUT_S = 3.0
# After `exit`, clangd gets this long to end before it is killed. It answers `shutdown` at once
# but then finishes the parse in progress (a CUDA file's preamble: 1.2 s of a core here), and the
# server's shutdown, the editor and every test's teardown waited for that. Nothing of clangd's
# needs the time: its background index is off by default (where it is on, clangd writes each
# shard to a temporary file and renames it, and indexes again what it did not finish), and the
# preambles it writes are in the private folder (TMPDIR), removed with it.
EXIT_GRACE_S = 0.2


def to_json(params: Any) -> Any:
    return _converter().unstructure(params)


def clangd_command(binary: str, database_folder: str, background_index: bool) -> list[str]:
    return [
        binary,
        f"--compile-commands-dir={database_folder}",
        f"--background-index={'true' if background_index else 'false'}",
        # Diagnostics are nvcc's; clang-tidy's would be dropped after costing a parse each.
        "--clang-tidy=false",
        # A completion never adds an `#include` line: clangd picks the header where its index saw
        # the declaration, which in CUDA's and CCCL's trees may be an implementation header
        # (`*.hpp`, `detail/`) rather than the one to include. Includes stay the user's.
        "--header-insertion=never",
        # Until a file's first parse is done clangd would complete from the words of the text
        # (`threadIdx.` offering `float`, `CHECK_CUDA`...): wait for the parser instead.
        "--completion-parse=always",
        # Memory (issue 33): freed memory back to the system now and then (clangd's default on
        # glibc, said anyway), preambles on disk rather than in memory, and at most 4 workers
        # (each parse holds its AST; clangd's default is one per core).
        "--malloc-trim",
        "--pch-storage=disk",
        f"-j={min(4, os.cpu_count() or 1)}",
        # clangd's log goes to the server's log; KERNEL_LSP_CLANGD_LOG=verbose to see its messages.
        f"--log={os.environ.get('KERNEL_LSP_CLANGD_LOG', 'error')}",
    ]


def clangd_environment() -> dict[str, str]:
    """The server's environment with glibc's malloc tuned for clangd (a setting the user made
    stays). Measured on the 60-file template corpus, one file open (issue 33): clangd held
    337 MiB PSS at idle with glibc's defaults, 209 with these.
    - A fixed mmap threshold of 64 KiB: glibc otherwise raises the threshold each time a large
      block is freed (up to 32 MiB), so the parser's big buffers land in the heap, and the heap,
      fragmented by the AST around them, is never given back (malloc_trim cannot either).
    - Two arenas: clangd's threads otherwise each grow an arena of their own, which stays after
      the parse."""
    env = dict(os.environ)
    env.setdefault("MALLOC_MMAP_THRESHOLD_", str(64 * 1024))
    env.setdefault("MALLOC_ARENA_MAX", "2")
    return env


class Session:
    """One clangd process: its connection and its ordered outbox."""

    def __init__(self, process: asyncio.subprocess.Process, connection: JsonRpcConnection) -> None:
        self.process = process
        self.connection = connection
        self.capabilities: dict = {}
        self.server_version = ""
        self.sent_commands: dict[str, list[str]] = {}  # path -> the command clangd holds for it
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=5)
        self._outbox: asyncio.Queue[Callable[[], Awaitable[None] | None]] = asyncio.Queue()
        self._steps = 0  # queued or running
        self._tasks: list[asyncio.Task] = []

    async def drain_stderr(self, stream: asyncio.StreamReader) -> None:
        """clangd's stderr, drained (a full pipe would stop clangd) into the server's log."""
        while line := await stream.readline():
            text = line.decode("utf-8", "replace").rstrip()
            self.stderr_tail.append(text)
            log.info("clangd: %s", text)

    def start(self, *coroutines) -> None:
        self._tasks += [asyncio.ensure_future(c) for c in (*coroutines, self._work_off())]

    def enqueue(self, step: Callable[[], Awaitable[None] | None]) -> None:
        self._steps += 1
        self._outbox.put_nowait(step)

    async def _work_off(self) -> None:
        while True:
            step = await self._outbox.get()
            try:
                pending = step()
                if pending is not None:
                    await pending
            except RpcError as e:
                log.debug("clangd: a step was not sent: %s", e)
            except Exception:
                log.exception("clangd: a queued step failed")
            finally:
                self._steps -= 1

    async def call(self, method: str, params: Any) -> Any:
        """A request sent after everything queued before it; cancelling the caller cancels it."""
        if self._steps == 0:
            # Nothing waits to go out before it (the usual case): no trip through the queue.
            return await self._answer(*self.connection.request(method, params))
        sent: asyncio.Future = asyncio.get_running_loop().create_future()

        def send() -> None:
            if sent.cancelled():
                return  # cancelled before it left: clangd never hears of it
            try:
                sent.set_result(self.connection.request(method, params))
            except RpcError as e:
                sent.set_exception(e)

        self.enqueue(send)
        try:
            request_id, answer = await sent
        except asyncio.CancelledError:
            if sent.done() and not sent.cancelled() and sent.exception() is None:
                self.connection.cancel(sent.result()[0])  # it left just before the cancel came
            raise
        return await self._answer(request_id, answer)

    async def _answer(self, request_id: int, answer: asyncio.Future) -> Any:
        try:
            return await answer
        except asyncio.CancelledError:
            self.connection.cancel(request_id)
            raise

    async def stop(self) -> None:
        """`shutdown` and `exit`, then a kill if clangd has not ended within EXIT_GRACE_S."""
        conn = self.connection
        if not conn.closed and self.process.returncode is None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.call("shutdown"), STOP_TIMEOUT_S)
                conn.notify("exit")
        try:
            await asyncio.wait_for(self.process.wait(), EXIT_GRACE_S)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()
        conn.close()
        for task in self._tasks:
            task.cancel()


class ClangdProxy:
    """What the server knows of clangd: whether it is usable, the running session, and the
    state that outlives a session (the private database, the one-time messages)."""

    def __init__(self, server) -> None:
        self.server = server
        self.binary: ClangdBinary | None = None
        self.problem: str | None = None  # why there is no clangd, for the one message
        self.advertised = False  # the forwarded features are in the capabilities
        self.session: Session | None = None
        self.restarts = 0  # restarts since the server started (kernelLsp/stats, tests)
        self.legend = LegendMap(None)
        self.diagnostics: dict[str, list[dict]] = {}  # uri -> clangd's last, in `agreeing` mode
        self._database: PrivateDatabase | None = None
        self._ready: asyncio.Event | None = None
        self._supervisor: asyncio.Task | None = None
        self._stopping = False
        self._gave_up = False
        self._launching = False  # a clangd is being started: requests wait for it
        self._told: set[str] = set()

    def stats(self) -> dict:
        """For `kernelLsp/stats`: is clangd running, as which process, restarted how often."""
        session = self._live()
        return {
            "binary": self.binary.path if self.binary else None,
            "pid": session.process.pid if session else None,
            "ready": session is not None,
            "restarts": self.restarts,
            "inFlight": session.connection.in_flight if session else 0,
        }

    # --- lifecycle ----------------------------------------------------------------------------

    def decide(self, options: object) -> bool:
        """At `initialize`: is clangd to be used? (enabled in the editor's `initializationOptions`,
        and a binary found; nothing runs). The settings are read in full after the answer
        (app.py); a workspace's pyproject.toml that turns clangd off stops it there."""
        enabled, user_path = user_choice(options)
        if not enabled:
            self.binary, self.problem = None, None
        else:
            self.binary, self.problem = find_clangd(user_path)
        self.advertised = self.binary is not None
        if self.binary:
            log.info("clangd: %s (%s)", self.binary.path, self.binary.origin)
            # Requests that come before clangd is up (even before `initialized`) wait for it.
            self._ready = asyncio.Event()
            self._launching = True
        return self.advertised

    def start(self) -> None:
        """After `initialized`: start clangd in the background, or say once why it is absent."""
        if not self.server.settings.clangd_enabled:
            self._stopping = True  # turned off by workspace/configuration: nobody waits for it
            return
        if self.binary is None:
            # Once per server start, where the user looks (a pop-up, not only the log): what is
            # missing and the command that fixes it.
            self._tell_once("absent", f"kernel-lsp: {self.problem}", types.MessageType.Warning)
            return
        if self._supervisor is None or self._supervisor.done():
            self._stopping = False
            self._ready = self._ready or asyncio.Event()
            self._supervisor = asyncio.ensure_future(self._supervise())
            self._supervisor.add_done_callback(_log_failure)

    async def start_in_background(self) -> None:
        """The `initialized` hook: clangd's start is not waited for."""
        self.start()

    def kill(self) -> None:
        """The server's last step, with no event loop left to stop it politely: end clangd."""
        self._stopping = True
        if self.session is not None and self.session.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.session.process.kill()

    async def stop(self) -> None:
        self._stopping = True
        session, self.session = self.session, None
        if self._ready is not None:
            self._ready.clear()
        if session is not None:
            await session.stop()
        if self._supervisor is not None:
            self._supervisor.cancel()
            # asyncio.wait, not `await`: it neither raises the task's end nor waits past the
            # bound (a launch's own steps are bounded; this is the belt to their braces).
            await asyncio.wait({self._supervisor}, timeout=3 * STOP_TIMEOUT_S)
            if not self._supervisor.done():
                log.error("clangd: its supervisor did not stop within %.0f s", 3 * STOP_TIMEOUT_S)
            self._supervisor = None
        if self._database is not None:
            self._database.remove()
            self._database = None

    async def settings_changed(self) -> None:
        settings = self.server.settings
        if not settings.clangd_enabled:
            if self._supervisor is not None:
                log.info("clangd: turned off by clangd.enabled")
                await self.stop()
            return
        if self._supervisor is None:
            if not self.advertised:
                # Capabilities are fixed at initialize: the editor would not ask.
                log.info("clangd: enabled after initialize; restart the server for its features")
                return
            self.start()
            return
        if settings.clangd_diagnostics == "off":
            self.diagnostics.clear()
        session = self.session
        if session is not None:  # the flags may have changed (defines, includes, arch)
            for uri in list(self.server.workspace.text_documents):
                if path := uri_to_path(uri):
                    session.enqueue(functools.partial(self._send_command, session, path))

    async def _supervise(self) -> None:
        failures = 0
        while not self._stopping:
            started = time.monotonic()
            session = None
            self._launching = True
            try:
                session = await self._launch()
            except Exception as e:  # a binary that is not clangd, a crash during initialize
                log.warning("clangd did not start: %s", e)
            self._launching = False
            if session is not None:
                code = await session.process.wait()
                session.connection.close()
                if self._stopping:
                    return
                log.warning("clangd exited with code %s after %.0f s", code, time.monotonic() - started)
                self.session = None
                assert self._ready is not None
                self._ready.clear()
                self.diagnostics.clear()
            if self._stopping:
                return
            if time.monotonic() - started > STABLE_S:
                failures = 0
            if failures >= MAX_RESTARTS:
                self._gave_up = True  # requests answer null at once from now on
                self._tell_once(
                    "gave-up",
                    f"kernel-lsp: clangd stopped {failures + 1} times in a row; go to definition, "
                    "completion and rename are off until the server restarts (see the server's log).",
                    types.MessageType.Warning,
                )
                return
            delay = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]
            failures += 1
            self.restarts += 1
            log.warning("clangd: restarting in %.1f s (%d of %d)", delay, failures, MAX_RESTARTS)
            await asyncio.sleep(delay)

    async def _launch(self) -> Session:
        assert self.binary is not None and self._ready is not None
        if self._database is None:
            self._database = await asyncio.to_thread(PrivateDatabase)  # it lists the temp folder
            atexit.register(self._database.remove)
        settings = self.server.settings
        command = clangd_command(self.binary.path, self._database.folder, settings.clangd_background_index)
        command = await asyncio.to_thread(procs.command_dying_with_parent, command)  # looks for setpriv once
        env = clangd_environment()
        env["TMPDIR"] = self._database.scratch  # its preambles (--pch-storage=disk), removed with it
        process = await asyncio.create_subprocess_exec(
            *command,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert process.stdin and process.stdout and process.stderr
        connection = JsonRpcConnection(process.stdout, process.stdin, self._on_notification, self._on_request)
        session = Session(process, connection)
        session.start(connection.serve(), session.drain_stderr(process.stderr))
        try:
            answer = await asyncio.wait_for(connection.call("initialize", self._initialize_params()), 30)
        except BaseException as e:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await session.stop()
            if isinstance(e, Exception):
                said = " | ".join(session.stderr_tail) or "nothing on stderr"
                raise RuntimeError(
                    f"{self.binary.path} ended (code {process.returncode}) before answering initialize: {said}"
                ) from e
            raise
        if self._stopping:
            # Stopped as clangd answered: asyncio.wait_for (Python 3.11) returns the answer and
            # drops the cancellation when both land in one step, and this launch would go on to
            # a clangd nobody stops (the server then never answered `shutdown`).
            await session.stop()
            raise asyncio.CancelledError
        answer = answer or {}
        session.capabilities = answer.get("capabilities") or {}
        session.server_version = (answer.get("serverInfo") or {}).get("version", "?")
        encoding = session.capabilities.get("positionEncoding") or answer.get("offsetEncoding") or "utf-16"
        if encoding != self._position_encoding():
            log.warning(
                "clangd answered in %s positions, the editor's are %s", encoding, self._position_encoding()
            )
        self.legend = LegendMap((session.capabilities.get("semanticTokensProvider") or {}).get("legend"))
        connection.notify("initialized", {})
        # Ready from here: the documents open now are opened in clangd, in this same step, so
        # every later notification lands after them in the queue.
        for uri, doc in list(self.server.workspace.text_documents.items()):
            item = {
                "uri": uri,
                "languageId": doc.language_id or "cuda",
                "version": doc.version or 0,
                "text": doc.source,
            }
            session.enqueue(functools.partial(self._open, session, uri, item))
        self.session = session
        self._ready.set()
        log.info("clangd ready: %s (pid %s)", session.server_version, process.pid)
        return session

    def _position_encoding(self) -> str:
        encoding = self.server.workspace.position_encoding
        return str(getattr(encoding, "value", encoding) or "utf-16")

    def _initialize_params(self) -> dict:
        caps = to_json(self.server.client_capabilities) or {}
        # clangd talks only to kernel-lsp: it gets the editor's text-document abilities (snippets,
        # markdown, hierarchical symbols...) but none that would make it ask kernel-lsp things
        # (progress, configuration, edits), and the editor's position encoding, fixed.
        caps.pop("window", None)
        caps.pop("experimental", None)
        caps.pop("offsetEncoding", None)
        workspace = caps.get("workspace") or {}
        for key in (
            "configuration",
            "applyEdit",
            "workspaceEdit",
            "didChangeConfiguration",
            "semanticTokens",
        ):
            workspace.pop(key, None)
        caps["workspace"] = workspace
        (caps.get("textDocument") or {}).pop("diagnostic", None)
        caps.setdefault("general", {})["positionEncodings"] = [self._position_encoding()]
        ws = self.server.workspace
        return {
            "processId": os.getpid(),
            "clientInfo": {"name": "kernel-lsp", "version": __version__},
            "rootUri": ws.root_uri,
            "workspaceFolders": [{"uri": f.uri, "name": f.name} for f in ws.folders.values()] or None,
            "capabilities": caps,
        }

    # --- messages from clangd -----------------------------------------------------------------

    def _on_notification(self, method: str, params: Any) -> None:
        if method == "textDocument/publishDiagnostics" and isinstance(params, dict):
            if self.server.settings.clangd_diagnostics != "agreeing":
                return  # nvcc's diagnostics are the truth; clangd's are dropped
            uri = params.get("uri")
            if not isinstance(uri, str):
                return
            self.diagnostics[uri] = list(params.get("diagnostics") or [])
            if path := uri_to_path(uri):
                self.server.republish(path)
        elif method == "window/logMessage" and isinstance(params, dict):
            log.debug("clangd: %s", params.get("message"))

    def _on_request(self, method: str, params: Any) -> Any:
        raise LookupError(method)  # clangd was given no ability that makes it ask

    # --- documents ----------------------------------------------------------------------------

    def _live(self) -> Session | None:
        session = self.session
        return session if session is not None and not session.connection.closed else None

    def did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        if session := self._live():
            item = to_json(params.text_document)
            session.enqueue(lambda: self._open(session, params.text_document.uri, item))

    def forward_notification(self, method: str, params: Any) -> None:
        """didChange, didSave, didClose: as they came, in order."""
        if session := self._live():
            payload = to_json(params)
            session.enqueue(lambda: session.connection.notify(method, payload))
        if method == types.TEXT_DOCUMENT_DID_CLOSE:
            self.diagnostics.pop(params.text_document.uri, None)

    def after_check(self, path: str, check, snap) -> None:
        """After each check of an open file: its flags may have changed with the project
        (pyproject.toml, compile_commands.json); clangd hears of it only if they did."""
        session = self._live()
        if session is not None and self.server.open_document(path) is not None:
            session.enqueue(lambda: self._send_command(session, path))

    async def _open(self, session: Session, uri: str, item: dict) -> None:
        if path := uri_to_path(uri):
            await self._send_command(session, path)
        session.connection.notify("textDocument/didOpen", {"textDocument": item})

    async def _send_command(self, session: Session, path: str) -> None:
        """kernel-lsp's flags for `path`: into the private compile_commands.json (for clangd's
        later loads) and straight into clangd's in-memory database (so this open uses them)."""
        doc = self.server.open_document(path)
        source = doc.source if doc is not None else None
        try:
            # The Workspace's options, as the file is checked with (its first arch: clangd
            # parses once); reading the project's files happens in a thread.
            options = await asyncio.to_thread(self.server.engine.compile_options, path, None, source)
        except Exception:
            log.exception("clangd: no flags for %s", path)
            return
        from .flags import clang_arguments  # the compile options' module: loaded with the engine

        arguments = clang_arguments(options, path)
        assert self._database is not None
        # Written in a thread too (steps run one at a time, so the database has one writer).
        await asyncio.to_thread(self._database.set, path, arguments)
        if session.sent_commands.get(path) != arguments:
            session.sent_commands[path] = arguments
            change = {path: {"workingDirectory": os.path.dirname(path), "compilationCommand": arguments}}
            session.connection.notify(
                "workspace/didChangeConfiguration", {"settings": {"compilationDatabaseChanges": change}}
            )

    # --- requests -----------------------------------------------------------------------------

    async def request(self, method: str, params: Any) -> Any:
        """clangd's answer (plain JSON), or None when there is no clangd to ask. An error answer
        is raised as RpcError."""
        session = await self._ready_session()
        if session is None:
            return None
        payload = params if isinstance(params, dict) else to_json(params)
        return await session.call(method, payload)

    async def _ready_session(self) -> Session | None:
        if not self.advertised or self._ready is None or self._stopping or self._gave_up:
            return None
        if not self._ready.is_set():
            if not self._launching:
                return None  # between a crash and the restart: null now rather than a long wait
            try:
                await asyncio.wait_for(self._ready.wait(), READY_TIMEOUT_S)
            except asyncio.TimeoutError:
                return None
        return self._live()

    def agreeing(self, uri: str, lines: set[int]) -> list[types.Diagnostic]:
        """clangd's diagnostics on the lines (0-based) where kernel-lsp has one of its own."""
        out = []
        for d in self.diagnostics.get(uri, ()):
            try:
                if d["range"]["start"]["line"] in lines:
                    out.append(_converter().structure(d, types.Diagnostic))
            except Exception:
                log.debug("clangd: an unreadable diagnostic: %r", d)
        return out

    # --- messages to the user -----------------------------------------------------------------

    def _tell_once(self, key: str, message: str, kind: types.MessageType) -> None:
        if key in self._told:
            return
        self._told.add(key)
        log.warning(message)
        with contextlib.suppress(Exception):
            self.server.window_show_message(types.ShowMessageParams(type=kind, message=message))


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("clangd's supervisor stopped: navigation and completion are off", exc_info=error)
