"""One GPU worker subprocess (kernel_lsp.runner.worker) and the errors of talking to it: a reader
thread queues its frames; a request that outlives its timeout kills the worker."""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import tempfile
import threading
from collections.abc import Callable
from typing import Any

from kernel_lsp import procs, tempdirs
from kernel_lsp.child_python import python_module
from kernel_lsp.fence.sandbox import without_secrets
from kernel_lsp.runner.protocol import ProtocolError, read_message, write_message

ProgressFn = Callable[[str, str], None]


class WorkerHung(RuntimeError):
    def __init__(self, phase: str, case: str, timeout_s: float, twice: bool = False):
        where = f" in case {case}" if case else ""
        super().__init__(f"timed out after {timeout_s:g} s{where} ({phase})" + (", twice" if twice else ""))
        self.phase, self.case, self.timeout_s = phase, case, timeout_s


class WorkerDied(RuntimeError):
    def __init__(self, message: str, phase: str = "", case: str = ""):
        super().__init__(message)
        self.phase, self.case = phase, case


class WorkerProcess:
    """One worker subprocess plus a reader thread that queues its frames."""

    def __init__(self, device: int, fake: bool, env: dict[str, str] | None = None, sandboxed: bool = False):
        pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        child_env = dict(os.environ if env is None else env)
        child_env["PYTHONPATH"] = os.pathsep.join(
            [pkg_root] + [p for p in child_env.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
        child_env.setdefault("PYTHONUNBUFFERED", "1")
        cmd = [*python_module("kernel_lsp.runner.worker"), "--device", str(device)]
        if fake:
            cmd.append("--fake")
        # For code an LLM wrote (`sandboxed`): a judge, which runs each candidate in a confined
        # process of its own (runner/judge.py) and holds no secret itself either.
        if sandboxed:
            cmd.append("--judge")
            child_env = without_secrets(child_env)
        # Lives as long as the worker; closed in close().
        self.log = tempfile.TemporaryFile(prefix="kernel-lsp-worker-")  # noqa: SIM115
        # A session of its own: a kill (a hang) takes whatever the spec started with it.
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=child_env,
            start_new_session=True,
        )
        self.frames: queue.Queue[tuple[dict[str, Any], list[bytes]] | BaseException] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            while True:
                self.frames.put(read_message(self.proc.stdout))
        except (EOFError, ProtocolError, OSError, ValueError) as e:
            self.frames.put(e)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_tail(self, limit: int = 2000) -> str:
        try:
            self.log.seek(0, os.SEEK_END)
            size = self.log.tell()
            self.log.seek(max(0, size - limit))
            return self.log.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""

    def request(
        self,
        message: dict[str, Any],
        blobs: list[bytes] | None,
        first_timeout_s: float,
        on_progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        """Send one request; return its result frame. Raises WorkerHung (after killing the
        worker) when no frame arrives within the timeout of the last progress frame, WorkerDied
        when the worker exits mid-request."""
        phase = str(message.get("op"))
        try:
            assert self.proc.stdin is not None
            write_message(self.proc.stdin, message, blobs)
        except (BrokenPipeError, OSError) as e:
            raise WorkerDied(f"GPU worker is gone: {e}") from None
        try:
            return self._reply(phase, first_timeout_s, on_progress)
        except (WorkerHung, WorkerDied, RuntimeError):
            raise  # the worker was ended, or it answered with an error: nothing is left queued
        except BaseException:
            # Abandoned mid-request (an interrupt, a caller's timeout, a progress callback that
            # raised): the worker would answer later, and the next request would read that
            # answer as its own.
            self.kill()
            raise

    def _reply(self, phase: str, first_timeout_s: float, on_progress: ProgressFn | None) -> dict[str, Any]:
        case, timeout = "", first_timeout_s
        while True:
            try:
                item = self.frames.get(timeout=timeout)
            except queue.Empty:
                self.kill()
                raise WorkerHung(phase, case, timeout) from None
            if isinstance(item, BaseException):
                code = self.proc.wait(timeout=5) if self.proc.poll() is None else self.proc.poll()
                tail = self.stderr_tail()
                raise WorkerDied(
                    f"GPU worker died (exit code {code})"
                    + (f" in case {case}" if case else "")
                    + (f" ({phase})" if phase else "")
                    + (f": {tail.splitlines()[-1]}" if tail else ""),
                    phase,
                    case,
                )
            frame, _ = item
            event = frame.get("event")
            if event == "progress":
                phase, case = frame.get("phase", phase), frame.get("case", case)
                timeout = float(frame.get("timeout_s") or first_timeout_s)
                if on_progress:
                    with contextlib.suppress(Exception):
                        on_progress(phase, case)
                continue
            if event == "error":
                raise RuntimeError(frame.get("message", "worker error"))
            return frame

    def kill(self) -> None:
        if self.proc.poll() is None:
            procs.kill_group(self.proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        self._remove_folders()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.request({"op": "shutdown"}, None, 5.0)
                self.proc.wait(timeout=5)
            except Exception:
                self.kill()
        self._remove_folders()
        with contextlib.suppress(Exception):
            self.log.close()

    def _remove_folders(self) -> None:
        """The worker's temporary folders, and a judge's accused processes' (it made them), once
        it has ended: a killed worker removes none itself, and a judge's last retired accused
        folders went with its daemon threads."""
        if self.proc.poll() is not None:
            tempdirs.reap(owner=self.proc.pid)
