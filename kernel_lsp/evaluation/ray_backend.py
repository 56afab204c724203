"""The `ray` evaluation backend: one Ray actor per GPU, each owning a `local` backend.

The actor (`num_gpus=1`) is where the GPU is: inside it a LocalBackend runs the worker process as
on one machine (a hang or an illegal address kills the worker, the next request starts another).
`RayBackend` is the driver's handle on one actor and implements the EvaluationBackend methods,
so a GpuSession, the BackendPool and the optimizer use it like a local GPU.

Compiling stays on the driver: GpuSession compiles for `device.arch`, which is the actor's own
device, so a heterogeneous cluster gets one compile per distinct arch (the compile cache makes
the repeats free), and the nodes need no NVRTC or nvcc, only the runner. Only CUBIN bytes, launch
steps, the spec's text and its summary travel (the summary the driver loaded in a worker, every
function of the user's replaced by a stand-in: what a local worker's backend gets); the user's
Python runs in the actor's worker process, which loads the spec from its text.

An actor that dies (killed, node lost) costs the one request it was serving: that request answers
as a crash that says so, and a fresh actor takes its place for the next request.

`ray` is imported only in this module, and only when a cluster is asked for.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import threading
import time
from dataclasses import replace
from typing import Any

from kernel_lsp.gpu_reports import ProfileReport
from kernel_lsp.gpu_results import Comparison, KernelCheck
from kernel_lsp.model import CheckStatus, RayUnavailable, TimingSettings  # RayUnavailable: re-exported
from kernel_lsp.runner.hardware import DeviceInfo
from kernel_lsp.runner.verify import Problem
from kernel_lsp.spec import Spec

from .backend import Built
from .local import fake_gpu_default, no_gpu_message
from .worker_process import ProgressFn

INSTALL_HINT = 'install it with `pip install "kernel-lsp[ray]"`'


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise RayUnavailable(
            f"the `ray` evaluation backend needs Ray, which is not installed ({e}); {INSTALL_HINT}"
        ) from None
    return ray


def cluster_address(address: str | None) -> str | None:
    """The cluster to join: the setting/flag, else RAY_ADDRESS; None starts a local one."""
    return address or os.environ.get("RAY_ADDRESS") or None


def _unreachable(address: str) -> str | None:
    """Why nothing listens at HOST:PORT (checked in seconds: ray.init waits a minute or more for a
    cluster that is not there), or None. `auto` and addresses without a port are left to Ray."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return None
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        return f"nothing answers at {host}:{port} ({e.strerror or e})"
    return None


def connect(address: str | None = None, local_gpus: int | None = None) -> Any:
    """Join the cluster at `address` (or RAY_ADDRESS), or start a local one over `local_gpus`
    GPUs when there is none; reuse a connection this process already has. Returns the `ray`
    module. Raises RayUnavailable with one clear message."""
    ray = _import_ray()
    if ray.is_initialized():
        return ray
    address = cluster_address(address)
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address and (why := _unreachable(address)):
        raise RayUnavailable(f"no Ray cluster at {address}: {why}")
    try:
        if address:
            ray.init(address=address, **kwargs)
        else:
            # "local": a new cluster here, even where a `ray start` left its address behind.
            ray.init(address="local", num_gpus=local_gpus, **kwargs)
    except Exception as e:  # ConnectionError, TimeoutError, ValueError for a bad address...
        where = f"at {address}" if address else "on this machine"
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RayUnavailable(f"no Ray cluster {where}: {detail}") from None
    return ray


FREE_GRACE_S = 5.0
SPECS_KEPT = 8  # specs an actor keeps loaded (by path, name and text) for the next request


def cluster_gpus(ray: Any) -> int:
    return int(ray.cluster_resources().get("GPU", 0))


def free_gpus(ray: Any, want: int = 0, grace_s: float = 0.0) -> int:
    """GPUs no actor or task holds (a fraction held counts the GPU as taken), waiting up to
    `grace_s` for `want` of them: an actor just killed gives its GPU back a moment later."""
    deadline = time.monotonic() + grace_s
    while True:
        free = int(ray.available_resources().get("GPU", 0))
        if free >= want or time.monotonic() >= deadline:
            return free
        time.sleep(0.2)


class EvaluationActor:
    """Runs in a Ray worker that holds one GPU (Ray sets CUDA_VISIBLE_DEVICES to it, so the local
    backend's device 0 is that GPU). Created through `ray.remote(num_gpus=1)`."""

    def __init__(self, fake: bool, launch_timeout_s: float, timing: dict[str, Any], start_timeout_s: float):
        import ray

        from .local import LocalBackend

        ids = ray.get_gpu_ids()
        self.gpu_id = int(ids[0]) if ids and str(ids[0]).isdigit() else 0
        self.local = LocalBackend(
            0,
            launch_timeout_s=launch_timeout_s,
            timing=TimingSettings(**timing),
            fake=fake,
            start_timeout_s=start_timeout_s,
        )
        self.host = socket.gethostname()
        self._settings = (launch_timeout_s, TimingSettings(**timing), fake, start_timeout_s)
        self.judged_local: LocalBackend | None = None
        self._specs: dict[tuple[str, str | None, str | None], Spec] = {}  # loaded here, by text

    def _backend(self, judged: bool) -> Any:
        """The actor's plain worker, or its judge (runner/judge.py: each candidate in a confined
        process of its own on this node's GPU), started when first asked for."""
        if not judged:
            return self.local
        if self.judged_local is None:
            from .local import LocalBackend

            timeout, timing, fake, start = self._settings
            self.judged_local = LocalBackend(
                0, launch_timeout_s=timeout, timing=timing, fake=fake, start_timeout_s=start, sandboxed=True
            )
        return self.judged_local

    def judged_sandbox(self) -> dict[str, Any]:
        judge = self._backend(True)
        available = judge.available
        return {"available": available, "reason": judge.reason, "sandbox": judge.sandbox}

    def describe(self) -> dict[str, Any]:
        available = self.local.available
        return {
            "host": self.host,
            "gpu_id": self.gpu_id,
            "pid": os.getpid(),
            "available": available,
            "reason": self.local.reason,
            "device": self.local.device if available else None,
            "restarts": self.local.restarts,
            "worker_pid": self.local.worker_pid,
            "version": _version(),
        }

    def ping(self) -> None:
        """Answers at once: queued just before a request, it says whether the actor was alive
        when the request reached it (RayBackend._call)."""

    def request(self, method: str, *args: Any) -> tuple[Any, dict[str, Any]]:
        """`method(*args)` and the actor's state after it (restarts, worker), so that the driver
        knows them without asking again."""
        value = getattr(self, method)(*args)
        return value, {"restarts": self.local.restarts, "worker_pid": self.local.worker_pid}

    def _spec(self, spec: Spec | tuple[str, str | None], spec_source: str | None) -> Spec | None:
        """The driver's summary of the spec (what a local worker gets: no function of the user's
        in it), or for a (path, name) reference the spec loaded here, once per text."""
        if isinstance(spec, Spec):
            return spec
        from .specs import resolve_spec

        path, name = spec
        key = (path, name, spec_source)
        if spec_source is None or key not in self._specs:
            found, _ = resolve_spec(path, path, name, spec_source)
            if spec_source is None or found is None:
                return found
            if len(self._specs) >= SPECS_KEPT:
                self._specs.pop(next(iter(self._specs)))
            self._specs[key] = found
        return self._specs[key]

    def _stamp(self, result: Any) -> Any:
        result.host, result.device_index = self.host, self.gpu_id
        return result

    def check(
        self,
        spec_or_ref: Spec | tuple[str, str | None],
        spec_source: str | None,
        built: Built,
        measure: bool,
        baseline: Built | None,
        judged: bool = False,
    ) -> KernelCheck:
        spec = self._spec(spec_or_ref, spec_source)
        if spec is None:
            path, name = (
                spec_or_ref if isinstance(spec_or_ref, tuple) else (spec_or_ref.path, spec_or_ref.kernel)
            )
            return self._stamp(
                KernelCheck(
                    name or "", CheckStatus.SPEC_ERROR, message=f"the spec {path} did not load on {self.host}"
                )
            )
        return self._stamp(self._backend(judged).check(spec, spec_source, built, measure, baseline))

    def compare(
        self,
        spec_or_ref: Spec | tuple[str, str | None],
        spec_source: str | None,
        baseline: Built,
        candidate: Built,
        min_speedup: float,
        judged: bool = False,
    ) -> Comparison:
        spec = self._spec(spec_or_ref, spec_source)
        if spec is None:
            path = spec_or_ref[0] if isinstance(spec_or_ref, tuple) else spec_or_ref.path
            return self._stamp(
                Comparison(1.0, 1.0, 1.0, 0, None, None, error=f"the spec {path} did not load on {self.host}")
            )
        return self._stamp(self._backend(judged).compare(spec, spec_source, baseline, candidate, min_speedup))

    def profile(
        self,
        job: dict[str, Any],
        cubin: bytes,
        symbol_to_kernel: dict[str, str],
        main_path: str,
        main_text: str | None,
    ) -> ProfileReport:
        from kernel_lsp.runner.profile import find_ncu

        ncu = find_ncu()  # this node's ncu, not the driver's
        if ncu is None:
            return ProfileReport(note=f"profiling needs Nsight Compute (`ncu`), which {self.host} lacks")
        return self.local.profile(ncu, job, cubin, symbol_to_kernel, main_path, main_text)

    def close(self) -> None:
        self.local.close()
        if self.judged_local is not None:
            self.judged_local.close()


def _read(path: str) -> str | None:
    from kernel_lsp.files import read_text_file

    try:
        return read_text_file(path)  # regular, bounded, never blocking on a FIFO
    except OSError:
        return None


class RayBackend:
    """The driver's handle on one GPU actor; replaces the actor when it dies. Thread-safe: one
    request at a time (`_lock`), like a local GPU, while what the actor is (its device, host,
    whether it serves) is answered at once from what it said (`_info`, under `_info_lock`),
    also while a request holds the GPU, as a LocalBackend's device is: the optimizer asks the
    first GPU's device for every candidate's compile, and waiting there for that GPU's check
    left the other GPU idle (issue 32: Ray rounds split 8+2)."""

    def __init__(
        self,
        launch_timeout_s: float = 5.0,
        timing: TimingSettings | None = None,
        fake: bool | None = None,
        start_timeout_s: float = 60.0,
        address: str | None = None,
    ):
        self._ray = connect(address)
        self.launch_timeout_s = launch_timeout_s
        self.timing = timing or TimingSettings()
        self.fake = fake if fake is not None else fake_gpu_default()
        self.start_timeout_s = start_timeout_s
        self.host = ""
        self.device_index = 0
        self.restarts = 0  # actors replaced, plus worker restarts inside the current actor
        self._replaced = 0
        self._lock = threading.RLock()  # the request in flight
        self._info_lock = threading.RLock()  # the actor's description, and replacing the actor
        self._info: dict[str, Any] | None = None
        self._reason = ""
        self.actor: Any = None
        self._start_actor()

    # --- the actor's lifecycle ------------------------------------------------------------------

    def _start_actor(self) -> None:
        remote = self._ray.remote(num_gpus=1, max_restarts=0)(EvaluationActor)
        self.actor = remote.remote(
            self.fake, self.launch_timeout_s, self.timing.__dict__, self.start_timeout_s
        )
        self._info = None

    def _describe(self) -> dict[str, Any] | None:
        """The actor's host, GPU and device, asked once per actor; None (with _reason) when it
        does not come up in time (no free GPU left in the cluster, node lost)."""
        info = self._info
        if info is not None:
            return info
        with self._info_lock:
            return self._describe_now()

    def _describe_now(self) -> dict[str, Any] | None:
        if self._info is not None:
            return self._info
        for attempt in (1, 2):
            actor = self.actor
            try:
                info = self._ray.get(actor.describe.remote(), timeout=self.start_timeout_s + 60.0)
                break
            except self._ray.exceptions.RayActorError as e:
                if attempt == 2:
                    self._reason = f"the Ray GPU actor died as it started: {_first_line(e)}"
                    return None
                self._lost(e, actor)  # died while idle: nothing was lost but the actor
            except Exception as e:
                self._reason = f"the Ray GPU actor did not start: {_first_line(e)}"
                return None
        self.host, self.device_index = info["host"], info["gpu_id"]
        self.restarts = self._replaced + int(info.get("restarts", 0))
        self._reason = "" if info["available"] else str(info["reason"])
        theirs = info.get("version")
        if theirs != _version():
            # Results from another kernel-lsp may mean something else (a spec field, a verdict).
            info = dict(info, available=False)
            self._reason = (
                f"the Ray cluster's kernel-lsp is {theirs or 'older than 0.1.0'}, this one is {_version()}: "
                f'install the same version on the GPU host (pip install "kernel-lsp[ray]=={_version()}")'
            )
        self._info = info
        return info

    def _lost(self, e: BaseException, actor: Any) -> str:
        """`actor` died (mid-request, or idle): say so, and start its replacement, once however
        many callers saw it die."""
        where = f"{self.host or '?'} GPU {self.device_index}"
        message = f"the Ray actor on {where} died ({_first_line(e)}); it was replaced"
        with self._info_lock:
            if self.actor is actor:
                self._kill_quietly()
                self._replaced += 1
                self.restarts += 1
                self._start_actor()
        return message

    def _call(self, method: str, *args: Any) -> Any:
        """The actor's answer, or the message of its death (a str). A ping goes just before the
        request, in the same queue: an actor that died while idle fails the ping, and is replaced
        before the request, which loses nothing; one that fails after it died on the request.
        The answer brings the actor's state along: no second round trip to learn it."""
        ray = self._ray
        died = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError)
        for attempt in (1, 2):
            actor = self.actor
            alive = actor.ping.remote()
            answer = actor.request.remote(method, *args)
            try:
                ray.get(alive)
            except died as e:
                message = self._lost(e, actor)
                if attempt == 2:
                    return message
                if not self.available:  # the replacement did not come up
                    return no_gpu_message(self.reason)
                continue
            try:
                value, state = ray.get(answer)
            except died as e:
                return self._lost(e, actor)
            self.restarts = self._replaced + int(state.get("restarts", 0))
            if self._info is not None:
                self._info = dict(self._info, worker_pid=state.get("worker_pid"))
            return value
        raise AssertionError("unreachable")

    def _kill_quietly(self) -> None:
        with contextlib.suppress(Exception):
            self._ray.kill(self.actor)

    @property
    def available(self) -> bool:
        info = self._describe()
        return bool(info and info["available"])

    @property
    def reason(self) -> str:
        self._describe()
        return self._reason

    @property
    def device(self) -> DeviceInfo | None:
        info = self._describe()
        return info["device"] if info else None

    @property
    def worker_pid(self) -> int | None:
        info = self._describe()
        return info.get("worker_pid") if info else None

    def close(self) -> None:
        with self._lock:
            if self.actor is None:
                return
            with contextlib.suppress(Exception):
                self._ray.get(self.actor.close.remote(), timeout=30)
            self._kill_quietly()
            self.actor = None

    # --- the evaluation backend interface -------------------------------------------------------

    def _stamp(self, result: Any) -> Any:
        result.host, result.device_index = self.host, self.device_index
        return result

    def check(
        self,
        spec: Spec | Any,
        spec_source: str | None,
        built: Built,
        measure: bool = True,
        baseline: Built | None = None,
        on_progress: ProgressFn | None = None,  # progress frames stay in the actor
        judged: bool = False,
    ) -> KernelCheck:
        with self._lock:
            if not self.available:
                return self._stamp(
                    KernelCheck(spec.kernel, CheckStatus.UNAVAILABLE, message=no_gpu_message(self.reason))
                )
            # The node may not share this file system: the spec travels as text.
            text = spec_source if spec_source is not None else _read(spec.path)
            result = self._call("check", _portable(spec), text, built, measure, baseline, judged)
            if isinstance(result, str):
                p = Problem("crash", "", result)
                return self._stamp(
                    KernelCheck(
                        spec.kernel, CheckStatus.FAILED, message=result, problems=[p], spec_name=spec.title
                    )
                )
            return result

    def compare(
        self,
        spec: Spec | Any,
        spec_source: str | None,
        baseline: Built,
        candidate: Built,
        min_speedup: float = 1.02,
        on_progress: ProgressFn | None = None,
        judged: bool = False,
    ) -> Comparison:
        with self._lock:
            empty = Comparison(1.0, 1.0, 1.0, 0, None, None)
            if not self.available:
                return self._stamp(replace(empty, error=no_gpu_message(self.reason)))
            text = spec_source if spec_source is not None else _read(spec.path)
            # Both sides in one request: one actor, one GPU, interleaved there.
            result = self._call("compare", _portable(spec), text, baseline, candidate, min_speedup, judged)
            if isinstance(result, str):
                return self._stamp(replace(empty, error=result))
            return result

    def profile(
        self,
        ncu: str,
        job: dict[str, Any],
        cubin: bytes,
        symbol_to_kernel: dict[str, str],
        main_path: str,
        main_text: str | None = None,
    ) -> ProfileReport:
        with self._lock:
            # The actor's GPU is its device 0; the worker there has the spec and the file as text
            # (the hot lines quote it), since a remote node may not share this file system.
            text = job["spec"].get("source") or _read(job["spec"]["path"])
            job = dict(job, device=0, spec=dict(job["spec"], source=text))
            main_text = main_text if main_text is not None else _read(main_path)
            result = self._call("profile", job, cubin, symbol_to_kernel, main_path, main_text)
            if isinstance(result, str):
                return ProfileReport(note=result)
            return result

    def judged_twin(self) -> JudgedRayBackend:
        return JudgedRayBackend(self)


class JudgedRayBackend:
    """The same actor and GPU as a RayBackend, through the actor's judge: code an LLM wrote runs
    there as it does locally (runner/judge.py), on the node that holds the GPU."""

    def __init__(self, plain: RayBackend):
        self.plain = plain
        self._sandbox: dict[str, Any] | None = None

    def __getattr__(self, name: str) -> Any:  # host, device, device_index, restarts, ...
        return getattr(self.plain, name)

    @property
    def sandbox(self) -> dict[str, Any] | None:
        if self._sandbox is None:
            with self.plain._lock:
                answer = self.plain._call("judged_sandbox")
            self._sandbox = answer.get("sandbox") if isinstance(answer, dict) else None
        return self._sandbox

    def check(self, *args: Any, **kwargs: Any) -> KernelCheck:
        return self.plain.check(*args, **{**kwargs, "judged": True})

    def compare(self, *args: Any, **kwargs: Any) -> Comparison:
        return self.plain.compare(*args, **{**kwargs, "judged": True})

    def close(self) -> None:
        """The plain backend owns the actor."""


def _portable(spec: Any) -> Spec | tuple[str, str | None]:
    """What of a spec the actor gets: the summary a local worker gets (every function of the
    user's replaced by a stand-in; spec/isolated.py), so the actor need not load the spec again
    for each request; a (path, name) reference, loaded there once per text, for a spec that is
    no Spec (the bridge's SpecRef) or whose summary cannot travel."""
    if isinstance(spec, Spec):
        from kernel_lsp.spec.isolated import spec_summary

        try:
            summary = spec_summary(spec)
            pickle.dumps(summary)
            return summary
        except Exception:  # a value that cannot be pickled: the actor loads the spec itself
            pass
    return (spec.path, spec.name or spec.kernel)


def _version() -> str:
    from kernel_lsp import __version__

    return __version__


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def open_ray_backends(
    count: int | None,
    address: str | None = None,
    launch_timeout_s: float = 5.0,
    timing: TimingSettings | None = None,
    fake: bool | None = None,
    start_timeout_s: float = 60.0,
    local_gpus: int | None = None,
    log: Any = print,
) -> list[RayBackend]:
    """`count` actors (None: every free GPU of the cluster), never more than the GPUs free now: an
    actor that cannot be placed waits for a GPU, as long as another actor holds it (another
    editor's kernel-lsp, a training job). Raises RayUnavailable."""
    ray = connect(address, local_gpus)
    gpus = cluster_gpus(ray)
    free = free_gpus(ray, want=gpus if count is None else min(count, gpus), grace_s=FREE_GRACE_S)
    where = cluster_address(address) or "this machine"
    if gpus == 0:
        raise RayUnavailable(f"the Ray cluster at {where} has no GPUs")
    if free == 0:
        raise RayUnavailable(
            f"all {gpus} GPU(s) of the Ray cluster at {where} are held by other actors or tasks; "
            "an evaluation actor would wait until one is let go"
        )
    wanted = gpus if count is None else count
    if wanted > free:
        held = f", {gpus - free} held by other work" if free < gpus else ""
        log(f"kernel-lsp: the Ray cluster has {gpus} GPUs{held}; using {free}, not {wanted}")
        wanted = free
    return [RayBackend(launch_timeout_s, timing, fake, start_timeout_s, address) for _ in range(wanted)]
