"""The judge's side of a candidate's run: the judge (the GPU worker started with `--judge`) never
loads or runs a candidate's code. It starts an accused process (runner/accused.py) per request,
confined (fence/sandbox.py), hands it the case's buffers as file descriptors, and asks it to run
the candidate's launches or entry on them. Everything that decides lives here, in the judge:

- inputs, references, poison and guard bytes are written and read by the judge, in its own
  mapping of the buffers (the accused's kernels can address those buffers and nothing else of
  the judge's: two processes' CUDA contexts share no address space);
- after each run the judge copies the buffers into memory of its own (`Buffers.settle`): what
  is checked is what was there when the accused said "done", whatever it writes later;
- the clock is the judge's: each timed run is measured end to end, from the request to the
  judge's own copy of the outputs (`HostClock`), so a run that answers before its work is done
  gains nothing (the copy waits for the GPU, or reads unfinished outputs, which fail);
- a reply carries a CUDA error's name or a status number, never text: the judge words verdicts
  (`fault_message`), so nothing the candidate prints reaches a report or a prompt.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kernel_lsp import procs, tempdirs
from kernel_lsp.child_python import python_module
from kernel_lsp.fence.sandbox import sandboxed_command
from kernel_lsp.runner.accused import receive, send
from kernel_lsp.runner.device import FRIENDLY, STICKY_ERRORS
from kernel_lsp.runner.isolation import MAX_BATCH
from kernel_lsp.runner.verify import Failed, Problem
from kernel_lsp.spec import SpecError, case_label, launch_dims

if TYPE_CHECKING:
    from .device_protocol import Device

# When each remote run's answer came (perf_counter), before the judge's copy of its outputs:
# HostClock reads the last one (the worker is single-threaded; RemotePipeline appends).
ANSWERED: list[float] = []
# KERNEL_LSP_JUDGE_TRACE: what the accused says of each timed request (its time per run in
# restoring globals, calling, waiting; its context switches), beside the judge's own request
# time. A diagnosis of the judged path's cost, printed by `HostClock.describe`; never a figure.
TRACING = procs.env_flag("KERNEL_LSP_JUDGE_TRACE")
TRACE: list[tuple[float, Any]] = []
START_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 30.0  # load, map, bind: the judge's own requests, no candidate code runs
SPARES = 2  # accused processes started ahead (a comparison takes two)
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
        try:
            # Its output goes nowhere: nothing it prints can reach a report, a log or a prompt.
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                pass_fds=[theirs.fileno()],
                start_new_session=True,
            )
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
        self, message: dict[str, Any], fds: list[int] | None = None, timeout_s: float = REQUEST_TIMEOUT_S
    ) -> dict[str, Any]:
        try:
            send(self.sock, message, fds)
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

    def retire(self) -> None:
        """`close` in a thread of its own: the judge does not wait for a process to end."""
        threading.Thread(target=self.close, name="accused-close", daemon=True).start()

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(AccusedGone):
                self.request({"op": "shutdown"}, timeout_s=5.0)
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
        sent = time.perf_counter()
        try:
            answer = self.accused.request(request, timeout_s=timeout)
        except AccusedGone as e:
            if e.hung:
                raise Failed(
                    Problem(
                        "timeout", case, f"`{self.kernel}` did not finish within {timeout:g} s in case {case}"
                    )
                ) from None
            raise Failed(
                Problem("crash", case, f"`{self.kernel}`: its process ended during case {case}")
            ) from None
        if answer.get("status") != "ok":
            self._fail(answer, case)
        ANSWERED.append(time.perf_counter())
        if TRACING:
            TRACE.append((ANSWERED[-1] - sent, answer.get("trace")))
        for b in bound:
            b.bufs.settle(outputs_only=b.bufs.timed)

    def _fail(self, reply: dict[str, Any], case: str) -> None:
        """A fault of the candidate's run, as the verdict of this case (the judge's own context
        is untouched: a sticky error ended the accused, not the judge)."""
        message, _code, sticky = fault_message(reply, self.kernel)
        raise Failed(Problem("crash" if sticky else "launch_error", case, f"{message} in case {case}"))


class HostClock:
    """`time_rounds` for runs another process executes, on the judge's wall clock, after the judge
    has prepared the inputs, flushed the L2 and waited for its own stream. A sample is the time
    from the request to the answer, plus however much longer than the fastest such copy the
    judge's own copy of the outputs then took: a copy waits while the candidate's work still runs
    on the GPU, so an answer given before the work is done saves nothing, while the copy's own
    fixed cost (a context switch, the bytes) stays out of the figure. CUDA events of the judge
    cannot see another context's work, and the accused's own are not believed; nothing the
    accused does can make the judge's copy faster than its fastest.

    A call runs a batch (`batch` runs, one per input set, in one request: runner/isolation.py),
    and its sample is the batch's time over `batch`: the request's fixed cost (a switch between
    two processes' contexts and the socket, about 250 us on an H200 against a 15 us kernel) is
    shared by the batch's runs rather than added to each, and every run's outputs are the
    judge's to check."""

    def __init__(
        self,
        device: Device,
        tag: Callable[[int], bool] | None = None,
        start: Callable[[], None] | None = None,
        prepare_side: Callable[[int], None] | None = None,
        batch: int = 1,
        resize: Callable[[int], int] | None = None,
        request_s: float = 0.0,
    ):
        self.device = device
        self.batch = max(1, batch)  # runs per call (a judged batch: one per input set)
        self._resize = resize  # asks for a batch size, gets the one memory allows
        self._request_s = request_s  # the least time a request should take (0: never resize)
        self.grown = False  # the batch grew: timing.measure_interleaved reaches min_samples first
        self._tag = tag  # after each run of side j: were its inputs new to that side?
        self._prepare_side = prepare_side  # replaces `prepare`: the inputs for side j's next run
        self._start = start
        self.fresh: list[list[bool]] = []
        self.answers: list[float] = []  # request -> answer, per run measured
        self.copies: list[float] = []  # answer -> the judge's copy done, per run measured
        self._copy_floor = float("inf")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.device, name)

    @property
    def resizable(self) -> bool:
        return self._resize is not None and self._request_s > 0

    def resize_batch(self) -> bool:
        """After a few warm-up batches, before the measurement: a batch long enough that the
        request's fixed cost is a small share of it. The warm-up's requests (fixed cost
        included, so a run's time is overstated and the batch, if anything, too small) give a
        run's time; the batch grows to `request_s` worth of runs, at most MAX_BATCH. Only the
        judge's own clock decides it: a candidate that ran slow in the warm-up gets a shorter
        batch, which can only understate its speed-up. True when the batch changed (the
        measurement's own warm-up then runs the new sets of the first group)."""
        if self._resize is None or self._request_s <= 0 or not self.answers:
            return False
        answers = sorted(self.answers)
        per_run = answers[len(answers) // 2] / self.batch
        want = min(MAX_BATCH, math.ceil(self._request_s / max(per_run, 1e-9)))
        if want <= self.batch:
            return False
        got = self._resize(want)
        if got == self.batch:
            return False
        self.batch = got
        self.grown = True
        # The warm-up's figures were of the old size; a bigger batch's copy has another floor.
        self.fresh, self.answers, self.copies = [], [], []
        self._copy_floor = float("inf")
        return True

    def start_counting(self) -> None:
        """Called after the warm-up: the samples from here on are the measured ones."""
        self.fresh, self.answers, self.copies = [], [], []
        TRACE.clear()
        if self._start is not None:
            self._start()

    def time_rounds(
        self,
        runs: list[Callable[[], None]],
        rounds: int,
        cold_l2: bool,
        prepare: Callable[[], None] | None = None,
    ) -> list[list[float]]:
        if len(self.fresh) < len(runs):
            self.fresh = [[] for _ in runs]
        out: list[list[float]] = [[] for _ in runs]
        for r in range(rounds):
            order = range(len(runs)) if r % 2 == 0 else reversed(range(len(runs)))
            for j in order:
                if self._prepare_side is not None:
                    self._prepare_side(j)
                elif prepare is not None:
                    prepare()
                if cold_l2:
                    self.device.flush_l2()
                self.device.sync()
                ANSWERED.clear()
                start = time.perf_counter()
                runs[j]()
                end = time.perf_counter()
                answered = ANSWERED[-1] if ANSWERED else end
                copy = end - answered
                self._copy_floor = min(self._copy_floor, copy)
                out[j].append(((answered - start) + max(0.0, copy - self._copy_floor)) / self.batch)
                self.answers.append(answered - start)
                self.copies.append(copy)
                self.fresh[j].append(bool(self._tag(j)) if self._tag is not None else False)
        return out

    def describe(self) -> str:
        """How the figures were taken, for the timing's `clock`."""
        if not self.answers:
            return "the judge's clock"
        ans, cop = sorted(self.answers), sorted(self.copies)
        return (
            f"the judge's clock, end to end: request to answer {ans[len(ans) // 2] * 1e6:.0f} us (median), "
            f"then its copy of the outputs {cop[len(cop) // 2] * 1e6:.0f} us (floor "
            f"{self._copy_floor * 1e6:.0f} us, not counted) over {len(ans)} requests of "
            f"{self.batch} run(s) each, on distinct inputs; a sample is a request's time over {self.batch}"
        ) + (trace_summary() if TRACING else "")


def trace_summary() -> str:
    """The accused's account of the traced requests (KERNEL_LSP_JUDGE_TRACE), medians a run."""
    runs, outside, switches = [], [], []
    for request_s, trace in TRACE:
        try:
            spent = [[int(x) for x in run[:3]] for run in trace["runs"]]
            switches.append([int(x) for x in trace["switches"][:2]])
        except (TypeError, KeyError, ValueError, IndexError, OverflowError, AttributeError):
            continue  # not the shape it should have (JSON gives Infinity too): left out
        if spent:
            runs.extend(spent)
            outside.append((request_s * 1e9 - sum(map(sum, spent))) / len(spent))
    if not runs:
        return "; no trace from the accused"

    def med(values: list[float]) -> float:
        return sorted(values)[len(values) // 2] / 1e3

    return (
        f"; the accused's account (not believed), a run: restore {med([r[0] for r in runs]):.1f} us, "
        f"call {med([r[1] for r in runs]):.1f} us, wait {med([r[2] for r in runs]):.1f} us, outside "
        f"its loop {med(outside):.1f} us; context switches a request: voluntary "
        f"{med([s[0] * 1e3 for s in switches]):.0f}, involuntary {med([s[1] * 1e3 for s in switches]):.0f}"
    )


# Runs on repeated inputs this much faster than on new ones: a result kept between runs. On an
# H200 an honest 4M-element add judged in batches ran its first batch on a new group of sets at
# 0.64x the speed of the next ones (a context's first use of memory); the cheats that keep
# results: 0.17x.
CACHE_RATIO = 0.5


NEIGHBOURS = 4  # runs on seen inputs on each side of a run on new inputs that it is set against


def _local_ratios(samples: list[float], fresh: list[bool]) -> list[float]:
    """For each run on new inputs: the median of the runs on seen inputs just around it, over
    its own time (a drift of the machine hits both alike)."""
    ratios = []
    for p, (sample, new) in enumerate(zip(samples, fresh, strict=False)):
        if not new or sample <= 0:
            continue
        lo, hi = max(0, p - NEIGHBOURS), min(len(samples), p + NEIGHBOURS + 1)
        around = sorted(samples[k] for k in range(lo, hi) if k != p and not fresh[k])
        if around:
            ratios.append(around[len(around) // 2] / sample)
    return ratios


def ratio_seen_to_new(samples: list[float], fresh: list[bool]) -> float:
    """How much faster runs on seen inputs are than the runs on new inputs around them (the
    median of those ratios; 1.0 when there is nothing to compare)."""
    ratios = sorted(_local_ratios(samples, fresh))
    return ratios[len(ratios) // 2] if ratios else 1.0


def seen_inputs_faster(
    samples: list[float], fresh: list[bool], calibration: float = 1.0, noise_s: float = 0.0
) -> str | None:
    """Why the samples look like a result kept between launches, or None: runs on inputs the
    candidate had seen before must not be much faster than the runs on new inputs among them.
    `calibration`: the same ratio for the trusted original in an A/B (an honest kernel's own
    cost of new inputs, such as cold TLBs), which the candidate's is judged against. `noise_s`:
    a gap between the medians that the device's own first use of new inputs can make (the fake
    GPU's: the host's caches, which nothing flushes), below which nothing is read into it."""
    ratios = sorted(_local_ratios(samples, fresh))
    if len(ratios) < 2:
        return None
    ratio = ratios[len(ratios) // 2]
    if ratio >= CACHE_RATIO * min(1.0, calibration):
        return None
    new = sorted(s for s, f in zip(samples, fresh, strict=False) if f)
    old = sorted(s for s, f in zip(samples, fresh, strict=False) if not f)
    if new[len(new) // 2] - old[len(old) // 2] <= noise_s:
        return None
    return (
        f"runs on inputs it had already seen took {ratio:.2f}x the time of runs on new inputs "
        f"around them ({old[len(old) // 2] * 1e6:.1f} us, median of {len(old)}, against "
        f"{new[len(new) // 2] * 1e6:.1f} us, median of {len(new)}): a result kept between launches?"
    )
