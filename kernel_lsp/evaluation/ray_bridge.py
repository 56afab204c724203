"""Ray in a child process: the editor's (or CLI's) side of a cluster at an address.

A Ray driver whose cluster goes away (the head stopped, the network dropped, the laptop slept)
terminates itself: Ray's core worker exits the process once the GCS has not answered for its
reconnect timeout. In the language server that would take the editor's diagnostics down with
it. So when kernel-lsp joins a cluster at an address, Ray runs in a bridge process
(`python -m kernel_lsp.evaluation.ray_bridge`) that holds the actors (RayBackend objects); this
process holds `BridgedBackend`s that forward each request over a pipe. When the bridge dies, the
requests in flight answer "lost the connection to the Ray cluster" (a failed check, an A/B with
an error: nothing passes for a verdict), and the next request starts a new bridge, which joins
again or says in seconds that nothing answers at the address.

Only specs' summaries (spec/isolated.py: no function of the user's) or paths, texts and names,
compiled bytes and launch steps cross the pipe (pickled);
the bridge imports Ray, this process never does.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import struct
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from kernel_lsp.gpu_reports import ProfileReport
from kernel_lsp.gpu_results import Comparison, KernelCheck
from kernel_lsp.model import CheckStatus
from kernel_lsp.runner.verify import Problem

# Ray's own wait for a lost GCS before it ends the process (default 60 s): the bridge's end is
# what tells the requests in flight, so it comes sooner.
RECONNECT_TIMEOUT_S = "20"


class BridgeLost(RuntimeError):
    """The bridge process ended (its cluster went away, or it was killed)."""


@dataclass
class SpecRef:
    """What of a spec a Ray request needs (a Spec holds the user's functions, which stay here)."""

    path: str
    name: str | None
    kernel: str
    title: str


def _spec_across(spec: Any) -> Any:
    """What of a spec crosses the pipe: its summary (no function of the user's in it; the actor
    uses it as a local worker's backend does, without loading the spec again), else a SpecRef."""
    from .ray_backend import _portable

    portable = _portable(spec)
    return (
        portable
        if not isinstance(portable, tuple)
        else SpecRef(spec.path, spec.name, spec.kernel, spec.title)
    )


def _send(stream: Any, lock: threading.Lock, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    with lock:
        stream.write(struct.pack("<Q", len(data)) + data)
        stream.flush()


def _receive(stream: Any) -> Any:
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    (size,) = struct.unpack("<Q", head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


class Bridge:
    """The child process that runs Ray, and the requests waiting on it. Thread-safe."""

    def __init__(self, address: str):
        self.address = address
        env = dict(os.environ)
        env.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", RECONNECT_TIMEOUT_S)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernel_lsp.evaluation.ray_bridge"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # Ray's own logs; the answers say what matters
            env=env,
        )
        self._ids = itertools.count(1)
        self._pending: dict[int, Future] = {}
        self._lock = threading.Lock()
        self._write = threading.Lock()
        self.dead: str | None = None
        threading.Thread(target=self._read, name="kernel-lsp-ray-bridge", daemon=True).start()

    def _read(self) -> None:
        try:
            while True:
                rid, ok, value = _receive(self.proc.stdout)
                with self._lock:
                    future = self._pending.pop(rid, None)
                if future is not None:
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)
        except Exception:
            pass
        code = self.proc.wait()
        with self._lock:
            self.dead = f"the Ray bridge process exited with status {code}"
            pending, self._pending = list(self._pending.values()), {}
        for future in pending:
            future.set_exception(BridgeLost(self.dead))

    def request(self, op: str, *args: Any) -> Any:
        future: Future = Future()
        with self._lock:
            if self.dead:
                raise BridgeLost(self.dead)
            rid = next(self._ids)
            self._pending[rid] = future
        try:
            _send(self.proc.stdin, self._write, (rid, op, args))
        except (OSError, ValueError) as e:
            with self._lock:
                self._pending.pop(rid, None)
            raise BridgeLost(f"the Ray bridge process is gone ({e})") from None
        return future.result()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.request("exit")
                self.proc.wait(timeout=30)
            except Exception:
                self.proc.kill()


_BRIDGES: dict[str, Bridge] = {}
_BRIDGES_LOCK = threading.Lock()


def wanted(address: str | None) -> bool:
    """Whether a cluster at `address` is joined through a bridge: yes, unless this process
    already holds a Ray connection (a script or test that called ray.init) or
    KERNEL_LSP_RAY_BRIDGE=0."""
    if not address or os.environ.get("KERNEL_LSP_RAY_BRIDGE") == "0":
        return False
    ray = sys.modules.get("ray")
    return not (ray is not None and getattr(ray, "is_initialized", lambda: False)())


def bridge_for(address: str) -> Bridge:
    """The live bridge to `address`, started when there is none (or the last one died)."""
    with _BRIDGES_LOCK:
        bridge = _BRIDGES.get(address)
        if bridge is None or bridge.dead:
            bridge = _BRIDGES[address] = Bridge(address)
        return bridge


def open_bridged_backends(
    count: int | None, address: str, log: Any = print, **options: Any
) -> list[BridgedBackend]:
    """open_ray_backends in the bridge; raises RayUnavailable with its message."""
    from .ray_backend import RayUnavailable

    bridge = bridge_for(address)
    try:
        keys, lines = bridge.request("open", count, address, options)
    except BridgeLost as e:
        raise RayUnavailable(f"lost the connection to the Ray cluster at {address} ({e})") from None
    for line in lines:
        log(line)
    return [BridgedBackend(bridge, key, address, options) for key in keys]


LOST = "lost the connection to the Ray cluster at {address} ({why}); nothing was decided: run it again"


class BridgedBackend:
    """The EvaluationBackend of one Ray actor held by the bridge. A request that the bridge's end
    cuts short answers as a failure that says so; the next request reconnects."""

    def __init__(self, bridge: Bridge, key: int, address: str, options: dict[str, Any]):
        self.bridge, self.key, self.address, self.options = bridge, key, address, options
        self._lock = threading.RLock()  # JudgedRayBackend takes it
        self.host, self.device_index, self.restarts = "", 0, 0
        self._lost = ""

    def _request(self, op: str, *args: Any) -> Any:
        """The bridge's answer; BridgeLost when it ended (the next call reconnects)."""
        if self.bridge.dead:
            self.bridge = bridge_for(self.address)
            keys, _ = self.bridge.request("open", 1, self.address, self.options)
            if not keys:
                raise BridgeLost("the cluster has no free GPU now")
            self.key = keys[0]
        answer = self.bridge.request(op, self.key, *args)
        if isinstance(answer, dict) and "host" in answer:
            self.host, self.device_index, self.restarts = (
                answer["host"],
                answer["device_index"],
                answer["restarts"],
            )
        return answer

    def _lost_message(self, e: BaseException) -> str:
        return LOST.format(address=self.address, why=e)

    def _state(self) -> dict[str, Any]:
        from .ray_backend import RayUnavailable

        try:
            return self._request("state")
        except (BridgeLost, RayUnavailable) as e:
            return {"available": False, "reason": self._lost_message(e), "device": None, "worker_pid": None}

    @property
    def available(self) -> bool:
        return bool(self._state()["available"])

    @property
    def reason(self) -> str:
        return str(self._state()["reason"])

    @property
    def device(self) -> Any:
        return self._state()["device"]

    @property
    def worker_pid(self) -> int | None:
        return self._state()["worker_pid"]

    def _stamp(self, result: Any) -> Any:
        result.host, result.device_index = self.host, self.device_index
        return result

    def check(self, spec: Any, spec_source: str | None, built: Any, measure: bool = True,
              baseline: Any = None, on_progress: Any = None, judged: bool = False) -> KernelCheck:  # fmt: skip
        ref = _spec_across(spec)
        try:
            return self._request("check", ref, spec_source, built, measure, baseline, judged)
        except Exception as e:  # BridgeLost, RayUnavailable on reconnecting
            message = self._lost_message(e)
            return self._stamp(
                KernelCheck(
                    spec.kernel,
                    CheckStatus.FAILED,
                    message=message,
                    problems=[Problem("crash", "", message)],
                    spec_name=spec.title,
                )
            )

    def compare(self, spec: Any, spec_source: str | None, baseline: Any, candidate: Any,
                min_speedup: float = 1.02, on_progress: Any = None, judged: bool = False) -> Comparison:  # fmt: skip
        ref = _spec_across(spec)
        try:
            return self._request("compare", ref, spec_source, baseline, candidate, min_speedup, judged)
        except Exception as e:
            return self._stamp(replace(Comparison(1.0, 1.0, 1.0, 0, None, None), error=self._lost_message(e)))

    def profile(self, ncu: str, job: dict[str, Any], cubin: bytes, symbol_to_kernel: dict[str, str],
                main_path: str, main_text: str | None = None) -> ProfileReport:  # fmt: skip
        try:
            return self._request("profile", ncu, job, cubin, symbol_to_kernel, main_path, main_text)
        except Exception as e:
            return ProfileReport(note=self._lost_message(e))

    def _call(self, method: str, *args: Any) -> Any:  # JudgedRayBackend's sandbox question
        try:
            return self._request("call", method, *args)
        except Exception as e:
            return self._lost_message(e)

    def judged_twin(self) -> Any:
        from .ray_backend import JudgedRayBackend

        return JudgedRayBackend(self)  # type: ignore[arg-type]

    def close(self) -> None:
        if not self.bridge.dead:
            with contextlib.suppress(Exception):
                self.bridge.request("close", self.key)


# --- the bridge process -------------------------------------------------------------------------


def serve() -> None:
    """The bridge's loop: requests from stdin, one thread each, answers on the original stdout
    (fd 1 then points at stderr, so that nothing Ray prints corrupts the answers)."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    stdin = os.fdopen(0, "rb")
    if "RAY_AUTH_MODE" not in os.environ and (
        os.environ.get("RAY_AUTH_TOKEN") or os.path.exists(os.path.expanduser("~/.ray/auth_token"))
    ):
        os.environ["RAY_AUTH_MODE"] = "token"  # a cluster that asks for the token gets it
    from .ray_backend import RayBackend, RayUnavailable, open_ray_backends

    backends: dict[int, RayBackend] = {}
    keys = itertools.count(1)
    write = threading.Lock()
    stop = threading.Event()

    def state(b: RayBackend) -> dict[str, Any]:
        available = b.available
        return {"available": available, "reason": b.reason, "device": b.device, "worker_pid": b.worker_pid,
                "host": b.host, "device_index": b.device_index, "restarts": b.restarts}  # fmt: skip

    def handle(rid: int, op: str, args: tuple) -> None:
        try:
            if op == "exit":
                for b in backends.values():
                    b.close()
                value: Any = None
                stop.set()
            elif op == "open":
                count, address, options = args
                lines: list[str] = []
                opened = open_ray_backends(count, address, log=lines.append, **options)
                new = []
                for b in opened:
                    key = next(keys)
                    backends[key] = b
                    new.append(key)
                value = (new, lines)
            else:
                b = backends[args[0]]
                if op == "state":
                    value = state(b)
                elif op == "check":
                    value = b.check(args[1], args[2], args[3], args[4], args[5], judged=args[6])
                elif op == "compare":
                    value = b.compare(args[1], args[2], args[3], args[4], args[5], judged=args[6])
                elif op == "profile":
                    value = b.profile(*args[1:])
                elif op == "call":
                    with b._lock:
                        value = b._call(*args[1:])
                elif op == "close":
                    b.close()
                    backends.pop(args[0], None)
                    value = None
                else:
                    raise ValueError(f"unknown bridge request {op}")
            _send(out, write, (rid, True, value))
        except RayUnavailable as e:
            _send(out, write, (rid, False, RayUnavailable(str(e))))
        except Exception as e:
            _send(out, write, (rid, False, RuntimeError(f"{type(e).__name__}: {e}")))

    with ThreadPoolExecutor(max_workers=64, thread_name_prefix="bridge") as pool:
        while not stop.is_set():
            try:
                rid, op, args = _receive(stdin)
            except EOFError:
                break
            pool.submit(handle, rid, op, args)
    for b in list(backends.values()):
        with contextlib.suppress(Exception):
            b.close()


if __name__ == "__main__":
    serve()
