"""The accused: the one process that runs a candidate's code (its kernels, and a host entry's
launcher), confined, and nothing else. Started by the judge (runner/judge.py) as

    python -m kernel_lsp.runner.accused --fd N --device D [--fake] --sandbox FOLDER [--sandbox-outer bwrap]

It enters the sandbox before CUDA starts, opens its own CUDA context, and then only answers
the judge over the inherited socket pair (fd N, SOCK_SEQPACKET: one JSON message per packet,
file descriptors beside it): `hello`, `helpers` (the judge's own kernels: the shared-memory
poison, the L2 flush; taken only before any candidate code), `load` (a CUBIN or an entry's
library from its folder),
`map` (buffers the judge exported, as file descriptors), `bind` (the exact launches or the
entry call on mapped buffers), `run` (a bound plan, then wait for the whole context), `unmap`,
`shutdown`.

Nothing it says is believed. The judge reads outputs from its own mapping of the buffers and
times every run itself, end to end; a reply only says "done" or which CUDA error name or
status number ended the run, and the judge writes the words. So this module holds no verdict,
no reference, no timer and no spec: patching any of it changes nothing that is judged.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .device_protocol import Device

MAX_PACKET = 1 << 20
MAX_FDS = 64
POISON_HEAD_START_S = 200e-6  # GPU time ahead of a verification run's shared-memory poison


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.sendall(data)


def receive(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One message and the descriptors that came with it. EOFError when the peer is gone."""
    data, fds, _flags, _addr = socket.recv_fds(sock, MAX_PACKET, MAX_FDS)
    if not data:
        for fd in fds:
            os.close(fd)
        raise EOFError("the peer closed the socket")
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ValueError("a message is not a JSON object")
    return message, list(fds)


class Accused:
    """What the accused holds: its device, the candidate's loaded code, the mapped buffers."""

    def __init__(self, device: Device, folder: str):
        self.device = device
        self.folder = folder
        self.functions: list[Any] = []  # per step: a kernel function, or an EntryStep
        self.states: list[Any] = []  # globals put back before each run (see runner/isolation.py)
        self.modules: list[Any] = []
        self.buffers: dict[int, int] = {}  # the judge's buffer id -> this context's address
        self.plans: dict[int, list[Callable[[], None]]] = {}
        self.entries = False  # whether a step is a host entry (it may launch on any stream)
        self.legacy = False  # an entry without a stream parameter: it launches on the legacy stream
        self.helpers = False  # the judge's kernels are loaded (before any candidate code)
        # A message to the judge before the reply (a gated run's "queued"): set by `main`.
        self.say: Callable[[dict[str, Any]], None] = lambda message: None

    def _path(self, msg: dict[str, Any]) -> str:
        """The file the judge wrote the message's image to, in this process's folder."""
        return os.path.join(self.folder, os.path.basename(str(msg["image"])))

    def _image(self, msg: dict[str, Any]) -> bytes:
        with open(self._path(msg), "rb") as f:
            return f.read()

    def load_helpers(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The judge's helpers (runner/device.TIMING_HELPERS, compiled by the judge): only while
        no candidate code is loaded, so what they do here is the judge's code."""
        if self.modules or self.functions:
            return {"status": "fault", "code": "unavailable", "sticky": False, "entry_status": None}
        self.helpers = bool(self.device.load_helpers(self._image(msg)))
        if not self.helpers:
            return {"status": "fault", "code": "helpers", "sticky": False, "entry_status": None}
        return {"status": "ok"}

    def load(self, msg: dict[str, Any]) -> dict[str, Any]:
        from kernel_lsp.runner.loading import build_steps

        path = self._path(msg)
        image = self._image(msg)
        # A step list marked trusted by the judge is the user's own; here, every step runs
        # confined anyway (this process is the sandbox). A library loads from the judge's file:
        # this process writes none.
        steps = build_steps(
            self.device, image, msg["steps"], self.modules, self.states, True, self.folder, path
        )
        self.functions = [s.fn if not hasattr(s, "bind") else s for s in steps]
        self.entries = any(hasattr(s, "bind") for s in steps)
        self.legacy = any(hasattr(s, "bind") and not s.takes_stream for s in steps)
        return {"status": "ok", "globals": [n for st in self.states for n in st.names]}

    def map(self, msg: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        for buf_id, nbytes, fd in zip(msg["ids"], msg["sizes"], fds, strict=True):
            self.buffers[int(buf_id)] = self.device.import_shared(fd, int(nbytes))
        return {"status": "ok"}

    def unmap(self, msg: dict[str, Any]) -> dict[str, Any]:
        for buf_id in msg["ids"]:
            ptr = self.buffers.pop(int(buf_id), None)
            if ptr is not None:
                self.device.free(ptr)
        self.plans.clear()  # a plan over unmapped buffers must not run
        return {"status": "ok"}

    def _address(self, ref: dict[str, Any]) -> int:
        return self.buffers[int(ref["buf"])] + int(ref["off"])

    def bind(self, msg: dict[str, Any]) -> dict[str, Any]:
        plan: list[Callable[[], None]] = []
        for call in msg["calls"]:
            target = self.functions[int(call["step"])]
            if call["kind"] == "entry":
                plan.append(self._entry_call(target, call["values"]))
                continue
            args = []
            for a in call["args"]:
                if "buf" in a:
                    args.append(np.array([self._address(a)], np.uint64))
                else:
                    args.append(np.frombuffer(bytes.fromhex(a["bytes"]), np.uint8).copy())
            plan.append(
                functools.partial(
                    self.device.launch,
                    target,
                    tuple(call["grid"]),
                    tuple(call["block"]),
                    int(call["smem"]),
                    args,
                )
            )
        self.plans[int(msg["binding"])] = plan
        return {"status": "ok"}

    def _entry_call(self, step: Any, values: list[dict[str, Any]]) -> Callable[[], None]:
        args: list[Any] = []
        for v in values:
            if "stream" in v:
                args.append(self.device.stream_handle())
            elif "buf" in v:
                args.append(self._address(v))
            else:
                args.append(v["value"])

        def call() -> None:
            step.check(step.fn(*args))

        return call

    def _restore(self) -> None:
        """Put the globals back before a run."""
        for state in self.states:
            state.restore()
        if self.states and self.entries:
            # The globals are put back on this process's stream; an entry may launch on the
            # legacy stream or streams of its own, which do not wait for it.
            self.device.sync()

    def run(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Bound plans one after another, each waited for before the next (a batch: the judge
        pays the request's fixed cost once for them all). With a `gate`, a timed run on the
        judge's clock (`_run_gated`)."""
        bindings = [int(b) for b in msg["bindings"]]
        if msg.get("gate") is not None:
            return self._run_gated(bindings, msg["gate"])
        poisons = self._smem_poisons(msg, len(bindings))
        for binding, poison in zip(bindings, poisons, strict=True):
            self._restore()
            self._poison_shared_memory(poison)
            for call in self.plans[binding]:
                call()
            self.device.sync_all()
        return {"status": "ok"}

    def _run_gated(self, bindings: list[int], gate: dict[str, Any]) -> dict[str, Any]:
        """A timed run between the judge's gates (runner/judge.RemotePipeline.run_gated): the
        globals put back, then "queued" said, then, queued on this context's streams, a wait
        for the judge's `go`, the run, and `done` written after it. The judge's own events
        around its `go` and its wait for `done` are the clock; this process only queues (an
        entry's host code runs here meanwhile: the judge's head start covers it)."""
        flags = self.buffers[int(gate["flags"])]
        seq = int(gate["seq"])
        go, done = flags + int(gate["go"]), flags + int(gate["done"])
        if any(b not in self.plans for b in bindings):  # a fault before anything is queued
            raise KeyError("binding")
        self._restore()
        self.say({"status": "queued"})
        # On the stream the run launches on, as the worker times it in-process: an entry without
        # a stream parameter launches on the legacy default stream.
        with self.device.legacy_stream(self.legacy):
            self.device.gate_wait(go, seq)
            if gate.get("null"):  # the judge's calibration (judge.SwitchFloor): a kernel of nothing
                self.device.null_kernel()
            for binding in bindings:
                for call in self.plans[binding]:
                    call()
            self.device.gate_write(done, seq)
        self.device.sync_all()
        return {"status": "ok"}

    def _smem_poisons(self, msg: dict[str, Any], runs: int) -> list[int | None]:
        """Per run, the byte the judge asked shared memory to hold before it (verification)."""
        asked = msg.get("smem_poison")
        if asked is None:
            return [None] * runs
        if not self.helpers or len(asked) != runs:
            raise ValueError("a shared-memory poison asked without the judge's helpers")
        return [None if p is None else int(p) & 0xFF for p in asked]

    def _poison_shared_memory(self, byte: int | None) -> None:
        """Every SM's shared memory filled with `byte` by the judge's kernel, in this context,
        right before the run's launches, on the stream they go to (an entry's launches on a
        non-blocking stream of its own are not ordered after it)."""
        if byte is None:
            return
        # Queued on the stream the run launches on, behind a head start that lets the run's
        # launches queue before the GPU reaches the poison: no idle moment between the poison and
        # the run, in which the GPU could run another process's kernels (their shared memory).
        with self.device.legacy_stream(self.legacy):
            self.device.head_start(POISON_HEAD_START_S)
            self.device.poison_shared_memory(byte)


def fault_reply(e: BaseException) -> dict[str, Any]:
    """What a failed request says: an error's code name and a status number, never free text
    (the judge words the verdict; a message the candidate could steer carries nothing)."""
    from kernel_lsp.runner.device import DeviceFault

    if isinstance(e, DeviceFault):
        return {"status": "fault", "code": e.code, "sticky": e.sticky, "entry_status": e.status}
    return {"status": "fault", "code": type(e).__name__, "sticky": False, "entry_status": None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernel_lsp.runner.accused")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--fake", action="store_true")
    parser.add_argument("--sandbox", metavar="FOLDER", required=True)
    parser.add_argument("--sandbox-outer", default="")
    args = parser.parse_args(argv)

    from kernel_lsp import procs
    from kernel_lsp.fence.sandbox import SandboxUnavailable, close_after_start, enter_sandbox, limit_memory

    sock = socket.socket(fileno=args.fd)
    fake = args.fake  # as its worker's (runner/judge.py)
    hello: dict[str, Any] = {"status": "ok", "pid": os.getpid(), "available": False}
    accused: Accused | None = None
    try:  # before CUDA starts, and before any thread: every thread inherits the confinement
        report = enter_sandbox(args.sandbox, args.sandbox_outer, cuda_start=True)
        hello["sandbox"] = report.to_dict()
        procs.become_worker(die_with_thread=False)  # its watcher thread starts confined
        from kernel_lsp.runner.device import CudaDevice
        from kernel_lsp.runner.fake import FakeDevice

        device = FakeDevice(args.device) if fake else CudaDevice(args.device)
        # What the driver's start needed (a socket, shared maps, threads) closes before any
        # candidate code is loaded; then the memory limit counts from what CUDA has mapped.
        close_after_start(report, channel=args.fd)
        limit_memory(report)
        hello["sandbox"] = report.to_dict()
        accused = Accused(device, args.sandbox)
        accused.say = functools.partial(send, sock)
        hello["available"] = True
    except SandboxUnavailable as e:
        hello["sandbox_error"] = str(e)
    except Exception as e:  # no GPU in here; said before any candidate code has loaded
        hello["reason"] = f"{type(e).__name__}: {e}"[:300]
    handlers: dict[str, Callable[..., dict[str, Any]]] = {}
    if accused is not None:
        handlers = {
            "helpers": lambda m, f: accused.load_helpers(m),
            "load": lambda m, f: accused.load(m),
            "map": accused.map,
            "unmap": lambda m, f: accused.unmap(m),
            "bind": lambda m, f: accused.bind(m),
            "run": lambda m, f: accused.run(m),
        }
    while True:
        try:
            msg, fds = receive(sock)
        except (EOFError, OSError, ValueError):
            return 0
        op = msg.get("op")
        if op == "hello":
            send(sock, hello)
            continue
        if op == "shutdown":
            send(sock, {"status": "ok"})
            return 0
        handler = handlers.get(str(op))
        if handler is None:
            send(sock, {"status": "fault", "code": "unavailable", "sticky": True, "entry_status": None})
            continue
        try:
            reply = handler(msg, fds)
        except BaseException as e:  # a fault of the candidate's code, or of its image
            reply = fault_reply(e)
        finally:
            for fd in fds:
                os.close(fd)
        send(sock, reply)
        if reply.get("sticky"):
            return 3  # the context is gone


if __name__ == "__main__":
    sys.exit(main())
