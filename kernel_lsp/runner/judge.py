"""The judge's side of a candidate's run: the judge (the GPU worker started with `--judge`) never
loads or runs a candidate's code. It starts an accused process (runner/accused.py) per request,
confined (fence/sandbox.py), hands it the case's buffers as file descriptors, and asks it to run
the candidate's launches or entry on them. Everything that decides lives here, in the judge:

- inputs, references, poison and guard bytes are written and read by the judge, in its own
  mapping of the buffers (the accused's kernels can address those buffers and nothing else of
  the judge's: two processes' CUDA contexts share no address space);
- after each run the judge copies the buffers into memory of its own (`Buffers.settle`): what
  is checked is what was there when the accused said "done", whatever it writes later;
- the clock is the judge's, on the GPU (`GpuClock`): a timed run is gated (`Gate`). The accused
  queues the run behind a wait for the judge's `go` flag and writes `done` after it; the
  judge writes the run's inputs and poisons its outputs in its own context, writes `go`,
  flushes the L2, then marks (a CUDA event), waits for `done`, marks again and copies the
  outputs into memory of its own. Its two marks bracket the run and the two switches between the
  processes' contexts (about 140 us each way on an H100, the same to 0.5 us), which a run of
  nothing in a process that ran only kernel-lsp's code measured beforehand
  (`SwitchFloor`). So the figure is the kernel's own, as `bench` takes it (cold L2, one run
  per pair of events), while every event and every byte checked is the judge's: a run that
  says "done" early gains nothing (its outputs are copied before the second mark, unfinished
  or counted), and inputs reach the accused's buffers only inside the judge's own preparation
  right before `go` and leave them after the run (`TimedSets.scrub_set`). The accused's stream
  need not wait for `go`: work it runs between the inputs' arrival and the start mark is work
  the GPU switched contexts for inside the judge's preparation, which a third mark brackets;
  a preparation that took a switch's share longer than the judge's own is counted to the run
  (`GpuClock`);
- a reply carries a CUDA error's name or a status number, never text: the judge words verdicts
  (`fault_message`), so nothing the candidate prints reaches a report or a prompt.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import numpy as np

from kernel_lsp import procs, tempdirs
from kernel_lsp.child_python import python_module
from kernel_lsp.fence.sandbox import sandboxed_command
from kernel_lsp.runner.accused import receive, send
from kernel_lsp.runner.device import FRIENDLY, STICKY_ERRORS, DeviceFault
from kernel_lsp.runner.isolation import GatedTimes
from kernel_lsp.runner.verify import Failed, Problem
from kernel_lsp.spec import SpecError, case_label, launch_dims

if TYPE_CHECKING:
    from .device_protocol import Device

START_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 30.0  # load, map, bind: the judge's own requests, no candidate code runs
SPARES = 2  # accused processes started ahead (a comparison takes two)
# The judge waits for an accused's run this much longer than the launch timeout (the one its
# verdict names, and the one its caller waits for the judge's next word with): a run that outlives
# the timeout is then the caller's to see (LocalBackend._request sends the request once more, to a
# fresh judge: a GPU stalled by another process's fault is no hang), not a verdict the judge
# reached first in a race that load decides (1 of 2 runs of the fast tier beside a CPU-bound job).
OUTLAST_CALLER_S = 2.0
# A gated run's flags, in a buffer of the judge's that the accused maps (one per process: no
# process can open or end another's run). `go` and `done` sit on lines of their own.
GATE_BYTES, GATE_GO, GATE_DONE = 4096, 0, 256
# GPU time the judge queues ahead of a gated run's preparation: its own host calls (the inputs,
# the poison, the flush, the marks) and the accused's (its launches, an entry's host code) are
# queued before the GPU reaches them, so no host time lands between the marks.
GATED_HEAD_START_S = 300e-6
# Where no L2 flush follows `go`, GPU time of the judge's between `go` and its start mark: the
# accused's wait passes there, in every run alike (the switch floor's runs of nothing too).
GATE_LEAD_S = 20e-6
SWITCH_CALIBRATION_RUNS = 16  # gated runs of nothing whose least time is the switch floor
# The CUDA runtime's error names a verdict may quote (a name-shaped string is not enough: an
# all-letter secret is name-shaped); the driver's are STICKY_ERRORS and FRIENDLY.
RUNTIME_ERRORS = frozenset(
    "cudaError" + n
    for n in (
        "InvalidValue",
        "MemoryAllocation",
        "InitializationError",
        "CudartUnloading",
        "ProfilerDisabled",
        "InvalidConfiguration",
        "InvalidPitchValue",
        "InvalidSymbol",
        "InvalidHostPointer",
        "InvalidDevicePointer",
        "InvalidTexture",
        "InvalidTextureBinding",
        "InvalidChannelDescriptor",
        "InvalidMemcpyDirection",
        "InvalidFilterSetting",
        "InvalidNormSetting",
        "StubLibrary",
        "InsufficientDriver",
        "CallRequiresNewerDriver",
        "InvalidSurface",
        "DuplicateVariableName",
        "DuplicateTextureName",
        "DuplicateSurfaceName",
        "DevicesUnavailable",
        "IncompatibleDriverContext",
        "MissingConfiguration",
        "LaunchMaxDepthExceeded",
        "LaunchFileScopedTex",
        "LaunchFileScopedSurf",
        "SyncDepthExceeded",
        "LaunchPendingCountExceeded",
        "InvalidDeviceFunction",
        "NoDevice",
        "InvalidDevice",
        "DeviceNotLicensed",
        "SoftwareValidityNotEstablished",
        "StartupFailure",
        "InvalidKernelImage",
        "DeviceUninitialized",
        "MapBufferObjectFailed",
        "UnmapBufferObjectFailed",
        "ArrayIsMapped",
        "AlreadyMapped",
        "NoKernelImageForDevice",
        "AlreadyAcquired",
        "NotMapped",
        "NotMappedAsArray",
        "NotMappedAsPointer",
        "ECCUncorrectable",
        "UnsupportedLimit",
        "DeviceAlreadyInUse",
        "PeerAccessUnsupported",
        "InvalidPtx",
        "InvalidGraphicsContext",
        "NvlinkUncorrectable",
        "JitCompilerNotFound",
        "UnsupportedPtxVersion",
        "JitCompilationDisabled",
        "UnsupportedExecAffinity",
        "InvalidSource",
        "FileNotFound",
        "SharedObjectSymbolNotFound",
        "SharedObjectInitFailed",
        "OperatingSystem",
        "InvalidResourceHandle",
        "IllegalState",
        "SymbolNotFound",
        "NotReady",
        "IllegalAddress",
        "LaunchOutOfResources",
        "LaunchTimeout",
        "LaunchIncompatibleTexturing",
        "PeerAccessAlreadyEnabled",
        "PeerAccessNotEnabled",
        "SetOnActiveProcess",
        "ContextIsDestroyed",
        "Assert",
        "TooManyPeers",
        "HostMemoryAlreadyRegistered",
        "HostMemoryNotRegistered",
        "HardwareStackError",
        "IllegalInstruction",
        "MisalignedAddress",
        "InvalidAddressSpace",
        "InvalidPc",
        "LaunchFailure",
        "CooperativeLaunchTooLarge",
        "NotPermitted",
        "NotSupported",
        "SystemNotReady",
        "SystemDriverMismatch",
        "CompatNotSupportedOnDevice",
        "StreamCaptureUnsupported",
        "StreamCaptureInvalidated",
        "Timeout",
        "GraphExecUpdateFailure",
        "Unknown",
    )
)
STATUS_SHOWN = 1000  # a status number is quoted only below this: a large one can carry bytes


class AccusedGone(RuntimeError):
    """The accused did not answer in time, or exited; `hung` tells which."""

    def __init__(self, message: str, hung: bool):
        super().__init__(message)
        self.hung = hung


def fault_message(reply: dict[str, Any], what: str) -> tuple[str, str, bool]:
    """(message, code, sticky) for a fault reply, in the judge's words: a known CUDA error name
    is translated, another name-shaped code is quoted, anything else is not repeated."""
    code = str(reply.get("code") or "")
    sticky = bool(reply.get("sticky"))
    status = reply.get("entry_status")
    if code == "entry_status" and isinstance(status, int):
        shown = str(status) if -STATUS_SHOWN < status < STATUS_SHOWN else "a non-zero status"
        return f"`{what}` returned {shown}", code, False
    if code in STICKY_ERRORS:
        return STICKY_ERRORS[code], code, True
    if code in FRIENDLY:
        return FRIENDLY[code], code, sticky
    name = code.split(" ", 1)[0]
    if name in RUNTIME_ERRORS:
        return f"a CUDA call in `{what}` failed: {name}", name, sticky
    return f"`{what}` failed in the candidate's process", "candidate_fault", sticky


class AccusedProcess:
    """One confined process that runs one candidate's code; the judge's socket pair to it."""

    def __init__(
        self,
        device: int,
        fake: bool,
        mechanism: str = "",
        start_timeout_s: float = START_TIMEOUT_S,
        wait: bool = True,
    ):
        """Starts the process; with `wait`, also waits for its hello (else `ready()` does)."""
        self.folder = tempdirs.make("kernel-lsp-accused-")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [pkg_root, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        )
        if mechanism:
            env["KERNEL_LSP_SANDBOX"] = mechanism
        cmd = [
            *python_module("kernel_lsp.runner.accused"),
            "--fd",
            str(theirs.fileno()),
            "--device",
            str(device),
        ]
        if fake:
            cmd.append("--fake")
        cmd, env = sandboxed_command(cmd, env, self.folder)
        self.sock = ours
        self._next_id = 0
        self._paused = False  # stopped between requests (`pause`)
        self._pids: list[int] | None = None  # its processes, for `cpu_seconds`
        try:
            # Its output goes nowhere: nothing it prints can reach a report, a log or a prompt.
            # It dies with the thread that starts it (the worker's main one, PDEATHSIG) and with
            # the worker's end, even while stopped between requests (`pause`), when it could
            # not see its socket close.
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                pass_fds=[theirs.fileno()],
                start_new_session=True,
                preexec_fn=procs.tool_preexec(),
            )
            procs.track_group(self.proc.pid)
        except OSError:
            ours.close()
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        finally:
            theirs.close()
        self._start_timeout_s = start_timeout_s
        self.hello: dict[str, Any] = {}
        if wait:
            self.ready()

    def ready(self) -> dict[str, Any]:
        """Its hello (asked once): whether it opened the GPU, and how it is confined."""
        if not self.hello:
            self.hello = self.request({"op": "hello"}, timeout_s=self._start_timeout_s)
        return self.hello

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    @property
    def available(self) -> bool:
        return bool(self.hello.get("available"))

    def request(
        self,
        message: dict[str, Any],
        fds: list[int] | None = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
        answered: bool = True,
    ) -> dict[str, Any]:
        """Its reply to `message`. The process runs only from here until its answer: with
        `answered` (the reply is the whole answer) it is stopped again at once; otherwise the
        caller stops it (`pause`) when the answer is complete."""
        self.resume()
        try:
            send(self.sock, message, fds)
        except OSError as e:
            self.kill()
            raise AccusedGone(f"the candidate's process ended ({type(e).__name__})", hung=False) from None
        reply = self.receive(timeout_s)
        if answered:
            self.pause()
        return reply

    def pause(self) -> None:
        """Stop it, every thread (SIGSTOP, which nothing can catch), between its requests: while
        the judge times the other side or anything else, it can queue no GPU work (a thread of
        its own that launched work into the other side's timed runs would make that side look
        slower). Work it queued before its answer was counted to it: a gated run's bracket
        closes only once its context has nothing left to run."""
        if self.proc.poll() is None and not self._paused:
            self._paused = True
            if not procs.stop_all(procs.descendants(self.proc.pid)):  # it cannot be held: ended
                self.kill()

    def resume(self) -> None:
        if self._paused:
            self._paused = False
            procs.signal_all(procs.descendants(self.proc.pid), signal.SIGCONT)

    def receive(self, timeout_s: float) -> dict[str, Any]:
        """Its next message, within `timeout_s` (AccusedGone, the process killed, otherwise)."""
        try:
            ready, _, _ = select.select([self.sock], [], [], timeout_s)
            if not ready:
                self.kill()
                raise AccusedGone(f"no answer within {timeout_s:g} s", hung=True)
            reply, stray = receive(self.sock)
        except (OSError, EOFError, ValueError) as e:
            self.kill()
            raise AccusedGone(f"the candidate's process ended ({type(e).__name__})", hung=False) from None
        for fd in stray:  # it has nothing to send us: close whatever came
            os.close(fd)
        return reply

    def cpu_seconds(self) -> float:
        """The CPU time its processes have used, as the kernel accounts it (every thread's, ended
        ones too; it cannot fork): the fake GPU's clock (`Gate.run`). The fake's kernels are host
        code, and this host's wall clock, with its polling processes, is stretched at random by
        a loaded machine (an honest 2 ms kernel against an instant one read 0.8x to 10x with
        seven processes on two cores); the time its processes ran is not."""
        if self._pids is None:  # its processes (bubblewrap's too), fixed once it has said hello
            self._pids = procs.descendants(self.proc.pid)
        total = 0.0
        for pid in self._pids:
            with contextlib.suppress(OSError):  # ended: the run fails on its own
                total += time.clock_gettime(_process_cpu_clock(pid))
        return total

    def put_image(self, image: bytes) -> str:
        name = f"image-{self.new_id()}.bin"
        with open(os.path.join(self.folder, name), "wb") as f:
            f.write(image)
        return name

    def kill(self) -> None:
        if self.proc.poll() is None:
            procs.kill_group(self.proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        procs.untrack_group(self.proc.pid)

    def retire(self) -> None:
        """`close` in a thread of its own: the judge does not wait for a process to end."""
        threading.Thread(target=self.close, name="accused-close", daemon=True).start()

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(AccusedGone):
                self.request({"op": "shutdown"}, timeout_s=5.0, answered=False)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        self.kill()
        self.sock.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def start_accused(device: int, fake: bool, mechanisms: list[str]) -> tuple[AccusedProcess | None, str, str]:
    """(a confined process that opened the GPU, the mechanism it runs under, why none did):
    the mechanisms in turn (an H100 host's driver failed cuInit under Landlock, not in bwrap)."""
    tried = []
    for mechanism in mechanisms:
        try:
            accused = AccusedProcess(device, fake, mechanism)
        except (OSError, AccusedGone) as e:
            tried.append(f"{mechanism or 'default'}: {e}")
            continue
        if accused.available:
            return accused, mechanism, ""
        why = accused.hello.get("sandbox_error") or accused.hello.get("reason") or "no GPU in the sandbox"
        tried.append(f"{mechanism or 'default'}: {why}")
        accused.close()
    return None, "", "; ".join(tried)


class AccusedPool:
    """Accused processes started ahead of need: a judge's request takes ready ones (each runs
    one candidate's code, then is retired), and new spares start while the judge is idle
    between requests, so starting a process (Python, the sandbox, a CUDA context: about a
    second) is off the path of a round. A spare has run nothing but kernel-lsp's own code."""

    def __init__(self, device: int, fake: bool, mechanism: str, spares: int = SPARES):
        self.device, self.fake, self.mechanism, self.spares = device, fake, mechanism, spares
        self._waiting: list[AccusedProcess] = []

    def take(self) -> tuple[AccusedProcess | None, str]:
        """(a started, confined process with the GPU open, why none)."""
        while self._waiting:
            accused = self._waiting.pop(0)
            try:
                accused.ready()
            except AccusedGone:
                accused.retire()
                continue
            if accused.available:
                return accused, ""
            accused.retire()
        started, _mechanism, why = start_accused(self.device, self.fake, [self.mechanism])
        return started, why

    def adopt(self, accused: AccusedProcess) -> None:
        """A started process that has run no candidate's code, as a spare."""
        self._waiting.append(accused)

    def refill(self) -> None:
        """Start spares up to the pool's size, without waiting for them."""
        while len(self._waiting) < self.spares:
            try:
                self._waiting.append(AccusedProcess(self.device, self.fake, self.mechanism, wait=False))
            except OSError:
                return

    def settle(self, on_wait: Callable[[], None] = lambda: None) -> None:
        """Waits for the spares still starting (`refill` does not) to say hello, calling
        `on_wait` first where one is; one that died or hung is retired. A process starting
        beside a timing takes about a second of a core and creates a CUDA context on the GPU:
        the timing's first runs, where its first runs on new inputs fall, pay for it (on 2 busy
        cores the fake GPU's honest runs on new inputs took 4x the rest once: read as a result
        kept between launches)."""
        starting = [a for a in self._waiting if not a.hello]
        if starting:
            on_wait()
        for accused in starting:
            try:
                accused.ready()
            except AccusedGone:
                self._waiting.remove(accused)
                accused.retire()

    def close(self) -> None:
        for accused in self._waiting:
            accused.kill()
            accused.sock.close()
            shutil.rmtree(accused.folder, ignore_errors=True)
        self._waiting.clear()


@dataclass
class BoundRun:
    """A candidate's steps bound to one case's buffers in its process: called, one run of them
    (a batch of one); `RemotePipeline.run_batch` runs several in one request."""

    pipeline: RemotePipeline
    binding: int
    bufs: Any
    case: str
    smem_poison: int | None = None  # verification: shared memory poisoned before the run

    def __call__(self) -> None:
        self.pipeline.run_batch([self])


class RemotePipeline:
    """A candidate's steps as one step of `verify.launcher`: bound to a case's buffers, it asks
    the accused to run them there, waits for the answer (at most `timeout_s`), and settles."""

    remote = True  # verify.launcher: runs in another context, which poisons its own shared memory

    def __init__(
        self,
        accused: AccusedProcess,
        image: bytes,
        steps: list[dict[str, Any]],
        timeout_s: float,
        helpers: bytes | None = None,
    ):
        """Loads the judge's own helpers (`helpers`: their CUBIN, runner/device.TIMING_HELPERS)
        in the accused, then the candidate's image: the shared-memory poison that runs there
        before each verification launch is the judge's code, loaded before any of the
        candidate's."""
        self.accused = accused
        self.steps = steps
        self.timeout_s = timeout_s
        self.kernel = str(steps[0].get("kernel", "the candidate")) if steps else "the candidate"
        self.entry = bool(steps) and steps[0].get("kind") == "entry"
        self._mapped: dict[int, int] = {}  # the judge's base address -> id the accused knows
        self.helpers = False  # the judge's helpers are loaded in the accused
        self._gate: Gate | None = None  # its timed runs' flags (`gate`)
        try:
            if helpers:
                answer = accused.request({"op": "helpers", "image": accused.put_image(helpers)})
                self.helpers = answer.get("status") == "ok"
                if not self.helpers:  # the judge's own code, before any candidate's: no fault of it
                    why = "the candidate's process could not load the judge's helpers"
                    raise Failed(Problem("sandbox", "", why))
            reply = accused.request({"op": "load", "image": accused.put_image(image), "steps": steps})
        except AccusedGone as e:  # a constructor that crashed or hung, say
            what = "did not answer while loading it" if e.hung else "ended while loading it"
            raise Failed(Problem("crash", "", f"`{self.kernel}`: its process {what}")) from None
        if reply.get("status") != "ok":
            message, _code, _sticky = fault_message(reply, self.kernel)
            raise Failed(Problem("launch_error", "", f"the candidate does not load: {message}"))
        self.globals = [str(n) for n in reply.get("globals", [])]

    def _map(self, device: Device, bufs: Any) -> None:
        fresh = [b for b in bufs.bases if b not in self._mapped]
        if not fresh:
            return
        ids, sizes, fds = [], [], []
        try:
            for base in fresh:
                fd, nbytes = device.export(base)
                fds.append(fd)
                ids.append(self.accused.new_id())
                sizes.append(nbytes)
            reply = self.accused.request({"op": "map", "ids": ids, "sizes": sizes}, fds)
        except AccusedGone:
            reply = {"status": "gone"}
        finally:
            for fd in fds:
                os.close(fd)
        if reply.get("status") != "ok":
            raise Failed(
                Problem(
                    "crash",
                    case_label(bufs.sizes),
                    "the candidate's process could not map the case's buffers",
                )
            )
        self._mapped.update(zip(fresh, ids, strict=True))
        bufs.on_free.append(lambda: self._unmap(fresh))

    def _unmap(self, bases: list[int]) -> None:
        ids = [self._mapped.pop(b) for b in bases if b in self._mapped]
        if ids and self.accused.proc.poll() is None:
            with contextlib.suppress(AccusedGone):
                self.accused.request({"op": "unmap", "ids": ids})

    def _ref(self, bufs: Any, ptr: int) -> dict[str, int]:
        base = bufs.base_of(ptr)
        return {"buf": self._mapped[base], "off": ptr - base}

    def _calls(self, device: Device, bufs: Any) -> list[dict[str, Any]]:
        spec, sizes = bufs.spec, bufs.sizes
        calls: list[dict[str, Any]] = []
        for index, step in enumerate(self.steps):
            if step.get("kind") == "entry":
                values: list[dict[str, Any]] = []
                for name, code in zip(step["params"], step["codes"], strict=True):
                    if code == "stream":
                        values.append({"stream": True})
                    elif code == "ptr":
                        values.append(self._ref(bufs, bufs.ptrs[name]))
                    else:
                        value = spec.scalar_value(name, sizes)
                        if code in ("h16", "b16"):
                            value = int(np.asarray(value).view(np.uint16))
                        values.append({"value": value.item() if hasattr(value, "item") else value})
                calls.append({"kind": "entry", "step": index, "values": values})
                continue
            try:
                names = {**dict(step.get("constants") or {}), **sizes}
                grid, block, smem = launch_dims(
                    step["grid"], step["block"], str(step.get("smem") or "0"), names
                )
            except SpecError as e:
                raise Failed(Problem("spec_error", case_label(sizes), str(e))) from None
            args: list[dict[str, Any]] = []
            for p in step["params"]:
                if spec.args[p].kind == "scalar":
                    args.append({"bytes": np.array([spec.scalar_value(p, sizes)]).tobytes().hex()})
                else:  # an Alias gets the pointer of the buffer it names
                    args.append(self._ref(bufs, bufs.ptrs[spec.buffer_name(p)]))
            calls.append(
                {"kind": "kernel", "step": index, "grid": grid, "block": block, "smem": smem, "args": args}
            )
        return calls

    def bind(self, device: Device, bufs: Any, smem_poison: int | None = None) -> BoundRun:
        """The steps bound to this case's buffers in the accused; `smem_poison`: the byte its
        shared memory holds before each run (verification), where its helpers are loaded (the
        judge's own context has none: without NVRTC, no poison in-process either)."""
        self._map(device, bufs)
        binding = self.accused.new_id()
        case = case_label(bufs.sizes)
        try:
            reply = self.accused.request(
                {"op": "bind", "binding": binding, "calls": self._calls(device, bufs)}
            )
        except AccusedGone:
            raise Failed(
                Problem("crash", case, f"`{self.kernel}`: its process ended before case {case}")
            ) from None
        if reply.get("status") != "ok":
            self._fail(reply, case)
        return BoundRun(self, binding, bufs, case, smem_poison if self.helpers else None)

    def run_batch(self, bound: list[BoundRun]) -> None:
        """Run bound plans (from `bind`) one after another in one request, each waited for
        before the next starts; then settle each one's buffers."""
        case = bound[0].case
        request: dict[str, Any] = {"op": "run", "bindings": [b.binding for b in bound]}
        if any(b.smem_poison is not None for b in bound):
            request["smem_poison"] = [b.smem_poison for b in bound]
        timeout = self.timeout_s * len(bound)
        try:
            answer = self.accused.request(request, timeout_s=timeout + OUTLAST_CALLER_S)
        except AccusedGone as e:
            raise self._gone(e.hung, case, timeout) from None
        if answer.get("status") != "ok":
            self._fail(answer, case)
        for b in bound:
            b.bufs.settle(outputs_only=b.bufs.timed)

    def gate(self, device: Device) -> Gate:
        """The flags of this process's gated runs (mapped there at the first)."""
        if self._gate is None:
            self._gate = Gate(device, self.accused)
        return self._gate

    def run_gated(
        self, device: Device, bound: BoundRun, prepare: Callable[[], None], cold_l2: bool
    ) -> GatedTimes:
        """One timed run of `bound` between the judge's gates (`Gate.run`): `prepare` (the set's
        inputs written, its outputs poisoned) and the L2 flush queued in the judge's context
        right before `go`, the outputs copied into the judge's memory right after `done`."""
        case = bound.case
        try:
            return self.gate(device).run(
                device,
                [bound.binding],
                prepare,
                lambda: bound.bufs.settle(outputs_only=True, wait=False),
                self.timeout_s + OUTLAST_CALLER_S,
                flush=device.flush_l2 if cold_l2 else None,
            )
        except GateFault as e:
            self._fail(e.reply, case)
        except AccusedGone as e:
            raise self._gone(e.hung, case, self.timeout_s) from None
        except DeviceFault:  # the fake GPU's gate timed out: the run never said done
            raise self._gone(True, case, self.timeout_s) from None

    @staticmethod
    def preparation(device: Device, prepare: Callable[[], None], cold_l2: bool) -> float:
        """What a gated run's preparation (`GatedTimes.preparation`) takes with no run of the
        accused's queued: the same head start, marks and work, in the judge's context alone."""
        ready, start = prepared(device, prepare, device.flush_l2 if cold_l2 else None)
        device.sync()
        return device.seconds_between(ready, start)

    def _gone(self, hung: bool, case: str, timeout_s: float) -> Failed:
        """A run whose process hung past `timeout_s`, or ended, as the verdict of its case."""
        if hung:
            return Failed(
                Problem(
                    "timeout", case, f"`{self.kernel}` did not finish within {timeout_s:g} s in case {case}"
                )
            )
        return Failed(Problem("crash", case, f"`{self.kernel}`: its process ended during case {case}"))

    def close(self, device: Device) -> None:
        if self._gate is not None:
            self._gate.close(device)
            self._gate = None

    def _fail(self, reply: dict[str, Any], case: str) -> NoReturn:
        """A fault of the candidate's run, as the verdict of this case (the judge's own context
        is untouched: a sticky error ended the accused, not the judge)."""
        message, _code, sticky = fault_message(reply, self.kernel)
        raise Failed(Problem("crash" if sticky else "launch_error", case, f"{message} in case {case}"))


class Gate:
    """The flags of one accused process's gated runs: a buffer of the judge's that it maps."""

    def __init__(self, device: Device, accused: AccusedProcess):
        self.accused = accused
        self.ptr = device.alloc_shared(GATE_BYTES)
        device.fill(self.ptr, 0, GATE_BYTES)
        self.seq = 0
        fd, nbytes = device.export(self.ptr)
        self.ident = accused.new_id()
        try:
            reply = accused.request({"op": "map", "ids": [self.ident], "sizes": [nbytes]}, [fd])
        except AccusedGone:
            reply = {"status": "gone"}
        finally:
            os.close(fd)
        if reply.get("status") != "ok":
            device.free(self.ptr)
            raise Failed(Problem("crash", "", "the candidate's process could not map the judge's flags"))

    def close(self, device: Device) -> None:
        if self.accused.proc.poll() is None:
            with contextlib.suppress(AccusedGone):
                self.accused.request({"op": "unmap", "ids": [self.ident]})
        device.free(self.ptr)

    def run(
        self,
        device: Device,
        bindings: list[int],
        prepare: Callable[[], None],
        settle: Callable[[], None],
        timeout_s: float,
        null: bool = False,
        flush: Callable[[], None] | None = None,
    ) -> GatedTimes:
        """One gated run of `bindings` (none: a run of nothing), in seconds of the judge's
        events (`GatedTimes`). AccusedGone or a fault reply (`GateFault`) when the run did not
        end well; the judge's stream never stays waiting on a flag the accused did not write."""
        self.seq += 1
        seq = self.seq
        gate = {"flags": self.ident, "seq": seq, "go": GATE_GO, "done": GATE_DONE, "null": null}
        accused = self.accused
        first = accused.request(
            {"op": "run", "bindings": bindings, "gate": gate}, timeout_s=timeout_s, answered=False
        )
        if first.get("status") != "queued":  # failed before anything was queued on either side
            raise GateFault(first)
        cpu: list[float] = []  # the fake GPU's clock: the accused's CPU time before, at the end, copied
        try:
            if device.fake:
                cpu.append(accused.cpu_seconds())  # before its inputs: work on them is counted
            ready, start = prepared(
                device, prepare, flush, lambda: device.gate_write(self.ptr + GATE_GO, seq)
            )
            if device.fake:  # its wait polls on this host: the answer first, so a death shows at once
                reply = accused.receive(timeout_s)
            device.gate_wait(self.ptr + GATE_DONE, seq, timeout_s=timeout_s)
            end = device.mark()
            if device.fake:
                cpu.append(accused.cpu_seconds())
            settle()
            copied = device.mark()
            if device.fake:
                cpu.append(accused.cpu_seconds())  # work after `done` shows in the copy's time
            else:
                reply = accused.receive(timeout_s)
        finally:
            # Whatever the accused did, the judge's stream goes on: `done` written from a stream
            # of the judge's own (a no-op where the accused wrote it).
            device.gate_release(self.ptr + GATE_DONE, seq)
            device.sync()
        accused.pause()  # its answer is complete
        if reply.get("status") != "ok":
            raise GateFault(reply)
        if cpu:  # (a process that ended between two readings takes its time out of the sum)
            bracket, copy = max(0.0, cpu[1] - cpu[0]), max(0.0, cpu[2] - cpu[1])
            return GatedTimes(bracket, copy, device.seconds_between(ready, start))
        return GatedTimes(
            device.seconds_between(start, end),
            device.seconds_between(end, copied),
            device.seconds_between(ready, start),
        )


def prepared(
    device: Device,
    prepare: Callable[[], None],
    flush: Callable[[], None] | None,
    open_gate: Callable[[], None] | None = None,
) -> tuple[Any, Any]:
    """A gated run's preparation, queued in the judge's context between two marks (returned):
    a head start (no host call of either process lands between the marks), the mark before the
    run's inputs reach the buffers the accused maps, the set's `prepare`, `open_gate` (a run's
    `go`; none when the judge times its preparation alone: `RemotePipeline.preparation`), the
    L2 `flush` or a short lead of the judge's GPU time, then the start mark. One function for
    both, so that the judge's own preparation is the same work as a run's.

    `go` comes before the flush, not after the start mark: the accused's wait for it passes while
    the judge's context still has the GPU, so its run is queued and ready when the GPU switches to
    it, as a run that never waited for `go` would be (waking on the flag inside the bracket cost
    an honest run 1.7-2.9 us on an H100 that such a run did not pay). Work it starts before the
    start mark is counted to it (`GpuClock`)."""
    device.head_start(GATED_HEAD_START_S)
    ready = device.mark()
    prepare()
    if open_gate is not None:
        open_gate()
    if flush is not None:
        flush()
    else:
        device.head_start(GATE_LEAD_S)
    return ready, device.mark()


def _process_cpu_clock(pid: int) -> int:
    """The clock id of process `pid`'s CPU time (glibc's clock_getcpuclockid, which Python does
    not offer: the kernel's encoding of a process-wide CPUCLOCK_SCHED clock)."""
    return (~pid << 3) | 2


class GateFault(Exception):
    """A gated run's fault reply (the judge words it: `fault_message`)."""

    def __init__(self, reply: dict[str, Any]):
        super().__init__("fault")
        self.reply = reply


class SwitchFloor:
    """What a gated run pays besides its own work, measured in a process that runs only
    kernel-lsp's code (the judge's helpers, loaded first): the least bracket around a kernel of
    nothing there, less that kernel's own time as the judge's events see it in its own context.
    That is two switches between the judge's context and the accused's, which every run of a
    kernel pays and none can pay less of (on an H100, 275-282 us whether the accused waits on its
    stream, spins in a kernel of its own, or writes `done` ahead:
    benchmarks/cross_context_clock.py --switches). A run of stream operations alone switches
    nothing (8 us): the floor needs the kernel. It moves with what else has a context on the GPU
    (1073 us beside five other test processes), so it is measured again before each timing, in
    the same turn."""

    def __init__(self, device: Device, accused: AccusedProcess, helpers: bytes | None):
        self.device, self.accused = device, accused
        if helpers:
            reply = accused.request({"op": "helpers", "image": accused.put_image(helpers)})
            if reply.get("status") != "ok":
                raise GateFault(reply)
        self.gate = Gate(device, accused)

    def measure(self, runs: int = SWITCH_CALIBRATION_RUNS) -> float:
        device = self.device
        times = [
            self.gate.run(device, [], lambda: None, lambda: None, REQUEST_TIMEOUT_S, null=True)
            for _ in range(runs)
        ]
        own = min(RemotePipeline.preparation(device, lambda: None, False) for _ in range(3))
        device.time_rounds([device.null_kernel], 3, cold_l2=False)
        alone = sorted(device.time_rounds([device.null_kernel], runs, cold_l2=False)[0])
        return max(0.0, min(null_windows(times, own)) - alone[len(alone) // 2])

    def close(self) -> None:
        self.gate.close(self.device)
        self.accused.retire()


def null_windows(times: list[GatedTimes], own_preparation_s: float) -> list[float]:
    """Each null run's switches, as `GpuClock` counts a run: its bracket, plus what its
    preparation took over the judge's own where the GPU switched to the accused there (more than
    `LATE_PREPARATION` of the longest bracket over). The least bracket alone was the floor until
    an H100 ran a null kernel inside the judge's 20 us lead now and then: a bracket of 2.5 us, a
    floor of 0, and every judged figure 280 us too long."""
    longest = max(t.bracket for t in times)
    windows = []
    for t in times:
        over = t.preparation - own_preparation_s
        windows.append(t.bracket + (over if over > LATE_PREPARATION * longest else 0.0))
    return windows


class TimedGatedRun(Protocol):
    """A judged candidate's timed part, as the clock drives it (runner/isolation.GatedRun)."""

    def timed(self, side: int, cold_l2: bool) -> GatedTimes: ...

    def preparation(self, cold_l2: bool) -> float: ...


class GpuClock:
    """`time_rounds` for runs another process executes, on the GPU's clock: each timed run is
    gated (`Gate.run`, through TimedSets' GatedRun) and its sample is the bracket less the
    switch floor, plus however much longer than its fastest the judge's copy of the outputs
    after the bracket took (a run that said "done" before its work was done, and worked on,
    slows that copy or leaves it unfinished outputs), plus however much longer than the judge's
    own the preparation before the start mark took, where that is more than a context switch's
    share (`LATE_PREPARATION`): the accused's process need not wait for `go`, and the GPU can
    only run its work before the start mark by switching to it there. The floor was measured in
    a process that ran only kernel-lsp's code. Where the preparation ran long, the GPU switched
    to the accused there (an honest run does too, now and then, when a time slice ends inside
    the judge's flush): the run is then counted from the preparation's start, less the judge's
    own preparation and the floor, its bracket alone being short of the switches (an honest
    entry's was under 0.9 of a 276 us floor, beside five other test processes on an H100). A
    bracket below the floor (`SHORT_BRACKET`) with no long preparation is no figure: that run
    counts as its side's median so far, so ending runs early never makes a side faster; more
    than `SHORT_SHARE` of a side's runs short is reported (`why_suspicious`)."""

    def __init__(
        self,
        device: Device,
        floor_s: float,
        tag: Callable[[int], bool] | None = None,
        start: Callable[[], None] | None = None,
    ):
        self.device = device
        self.floor_s = floor_s
        self._tag = tag  # after each run of side j: were its inputs new to that side?
        self._start = start
        self.fresh: list[list[bool]] = []
        self.brackets: list[list[float]] = []  # per side (A, B) of the timing
        self.copies: list[float] = []
        self.short: list[int] = []  # per side: measured runs whose bracket was below the floor
        self._every: list[list[float]] = []  # per side: its samples, the warm-up's included
        self.late: list[float] = []  # the preparations' time counted to the runs
        self._copy_floor = float("inf")
        # The least a preparation took, the judge's alone (measured before each side's first
        # run) or in any side's run: both sides' preparations are the same work.
        self._preparation_floor = float("inf")
        self._calibrated: set[int] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.device, name)

    def start_counting(self) -> None:
        """Called after the warm-up: the samples from here on are the measured ones."""
        self.fresh, self.brackets, self.copies, self.late, self.short = [], [], [], [], []
        if self._start is not None:
            self._start()

    def time_rounds(
        self,
        runs: list[Callable[[], None]],
        rounds: int,
        cold_l2: bool,
        prepare: Callable[[], None] | None = None,
    ) -> list[list[float]]:
        """`runs` are GatedRuns (runner/isolation.py): each prepares its own inputs inside the
        gate, so `prepare` is not used."""
        gated: list[TimedGatedRun] = runs  # type: ignore[assignment]
        if len(self.fresh) < len(runs):
            self.fresh = [[] for _ in runs]
        if len(self.brackets) < len(runs):
            self.brackets = [[] for _ in runs]
        if len(self.short) < len(runs):
            self.short = [0 for _ in runs]
        if len(self._every) < len(runs):
            self._every = [[] for _ in runs]
        for j, run in enumerate(gated):
            if j not in self._calibrated:
                self._calibrated.add(j)
                for _ in range(PREPARATION_CALIBRATION_RUNS):
                    self._preparation_floor = min(self._preparation_floor, run.preparation(cold_l2))
        out: list[list[float]] = [[] for _ in runs]
        for r in range(rounds):
            order = range(len(runs)) if r % 2 == 0 else reversed(range(len(runs)))
            for j in order:
                times = gated[j].timed(j, cold_l2)
                self._copy_floor = min(self._copy_floor, times.copy)
                self._preparation_floor = min(self._preparation_floor, times.preparation)
                late = self._late(times.preparation - self._preparation_floor)
                # Where the GPU switched to the accused inside the preparation, the run's
                # switches (and some or all of its work) lie there: the run is the window from
                # the judge's first mark to its end mark, less the judge's own preparation and
                # the floor. Inputs exist only from that first mark on, so the window holds all
                # the work, and two switches at least.
                sample = max(0.0, late + times.bracket - self.floor_s)
                if not late and times.bracket < SHORT_BRACKET * self.floor_s:
                    # Two switches neither in the bracket nor before it: no figure. Counted
                    # as its side's median so far, so ending runs early gains nothing.
                    self.short[j] += 1
                    every = sorted(self._every[j])
                    sample = max(sample, every[len(every) // 2] if every else 0.0)
                sample += max(0.0, times.copy - self._copy_floor)
                self._every[j].append(sample)
                out[j].append(sample)
                self.brackets[j].append(times.bracket)
                self.copies.append(times.copy)
                self.fresh[j].append(bool(self._tag(j)) if self._tag is not None else False)
        return out

    def _late(self, over_s: float) -> float:
        """The part of a preparation's time counted to its run: all of what it took over the
        judge's own, where that is more than a switch's share of the floor (no context was
        switched to there otherwise); none on a GPU that switches no context (the fake's)."""
        if self.floor_s <= 0 or over_s <= LATE_PREPARATION * self.floor_s:
            return 0.0
        self.late.append(over_s)
        return over_s

    def why_suspicious(self) -> str | None:
        for short, brackets in zip(self.short, self.brackets, strict=False):
            if short > SHORT_SHARE * len(brackets):
                return (
                    f"{short} of its {len(brackets)} timed runs ended sooner than the GPU switches to "
                    f"its process and back ({self.floor_s * 1e6:.0f} us): runs the judge's gates did "
                    "not bracket"
                )
        return None

    def describe(self) -> str:
        """How the figures were taken, for the timing's `clock`."""
        if not self.copies:
            return "the judge's events on the GPU"
        cop = sorted(self.copies)
        sides = ", ".join(
            f"{side}{sorted(b)[len(b) // 2] * 1e6:.1f} us (median of {len(b)})"
            for side, b in zip(["A ", "B "] if len(self.brackets) > 1 else [""], self.brackets, strict=False)
            if b
        )
        late = (
            f"; {len(self.late)} of {len(cop)} preparations ran long (the GPU switched contexts "
            f"before the start mark), by {sorted(self.late)[len(self.late) // 2] * 1e6:.1f} us (median), "
            "counted to their runs"
            if self.late
            else ""
        )
        return (
            f"the judge's events on the GPU, one gated run a sample: bracket {sides} "
            f"less the switch floor {self.floor_s * 1e6:.1f} us, then its copy of "
            f"the outputs {cop[len(cop) // 2] * 1e6:.1f} us (floor {self._copy_floor * 1e6:.1f} us, not "
            "counted); inputs written, outputs poisoned and the L2 flushed by the judge before each"
            f"{late}"
        )


SHORT_BRACKET = 0.9  # a bracket below this share of the switch floor is no figure
# More than this share of a side's runs short, with no long preparation: runs the judge's gates
# did not bracket (every run of an entry that writes `done` early), not a time slice now and then.
SHORT_SHARE = 0.125
# A preparation longer than the judge's own by more than this share of the switch floor (two
# switches) had the GPU switch to another context in it (half a switch: on an H100 about 70 us,
# where the judge's own preparation varies by a few us): counted to the run.
LATE_PREPARATION = 0.25
PREPARATION_CALIBRATION_RUNS = 3  # the judge's preparations alone, the least taken as its own

# Runs on repeated inputs this much faster than on new ones: a result kept between runs. On an
# H200 an honest 4M-element add judged in batches ran its first batch on a new group of sets at
# 0.64x the speed of the next ones (a context's first use of memory); the cheats that keep
# results: 0.17x.
CACHE_RATIO = 0.5


def _figure_ratios(samples: list[float], fresh: list[bool], figure: float) -> list[float]:
    """For each run on new inputs: the figure the samples give (their median, as
    runner/timing.summarize reports it) over that run's own time.

    The figure, not the runs on seen inputs just around it (as until the eleventh session): a
    candidate knows a run on new inputs when it sees one, and one that did the work again on
    the 4 runs after each (where it would copy a kept answer) made the median of the seen runs
    around it a slow run and hid its cache, while its figure was the copy's, 10x the work's
    (tests/integration/test_judge_boundary.py). Against the figure, the runs it slows to hide
    count in the figure too. A run on new inputs cannot be made fast without the work: its
    outputs are checked (runner/isolation.TimedSets.keep_first_outputs)."""
    return [figure / s for s, new in zip(samples, fresh, strict=False) if new and s > 0]


def _figure(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2] if ordered else 0.0


def ratio_figure_to_new(samples: list[float], fresh: list[bool]) -> float:
    """How much faster the figure is than the runs on new inputs (the median of those ratios;
    1.0 when there is nothing to compare)."""
    ratios = sorted(_figure_ratios(samples, fresh, _figure(samples)))
    return ratios[len(ratios) // 2] if ratios else 1.0


def seen_inputs_faster(
    samples: list[float], fresh: list[bool], calibration: float = 1.0, noise_s: float = 0.0
) -> str | None:
    """Why the samples look like a result kept between launches, or None: the figure its runs
    give must not be much faster than its runs on inputs it had not seen, which must do the
    work. `calibration`: the same ratio for the trusted original in an A/B (an honest kernel's
    own cost of new inputs, such as cold TLBs, and a drift of the machine over the measurement,
    which hits both sides' runs alike), which the candidate's is judged against. `noise_s`: a
    gap between the medians that the device's own first use of new inputs can make (the fake
    GPU's: the host's caches, which nothing flushes), below which nothing is read into it."""
    figure = _figure(samples)
    ratios = sorted(_figure_ratios(samples, fresh, figure))
    if len(ratios) < 2:
        return None
    # Read at the three-quarter point, not the median: a result kept makes every run on new
    # inputs slow, where a busy host slows one now and then. With 3 runs on new inputs (a short
    # timing) the median took two preempted ones: the fake GPU's honest 4096-element add read
    # 0.43x in CI on 2 busy cores (3.1 ms seen against 7.1 ms new); the cheats read 0.17x on all.
    ratio = ratios[-(-3 * len(ratios) // 4) - 1]
    if ratio >= CACHE_RATIO * min(1.0, calibration):
        return None
    new = sorted(s for s, f in zip(samples, fresh, strict=False) if f)
    if new[len(new) // 2] - figure <= noise_s:
        return None
    return (
        f"its runs on inputs it had already seen give {figure * 1e6:.1f} us (the median of all "
        f"{len(samples)} runs), {ratio:.2f}x the time of its runs on new inputs "
        f"({new[len(new) // 2] * 1e6:.1f} us, median of {len(new)}): a result kept between launches?"
    )
