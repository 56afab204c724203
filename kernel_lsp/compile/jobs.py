"""Worker processes for checks (the server, `--check`, `--check --watch`): each job under its own
deadline and memory limit, in a process that dies with its parent.

Not a ProcessPoolExecutor: it cannot stop one job, so one spec that never returns held the whole
batch (or, in the server, every worker was ended with it), and its workers outlived a killed
parent (they hold both ends of their queues' pipes). Here each worker runs one job at a time over
its own pipe; a job past its deadline has its worker (and its process group: nvcc, what a spec
started) killed and replaced at once, and the other jobs go on. A job tells the pool what it is
doing (`report_phase`), so that a timeout can say whether the compile or the spec was running."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from .. import procs, tempdirs

# What a check reports before it runs the file's spec (the user's code): a deadline reached
# after it is the spec's.
SPEC_PHASE = "spec"


@dataclass(frozen=True)
class JobFailed:
    """What a job gave instead of a result: `timeout` (killed at its deadline), `crashed` (its
    worker died; `detail` has the exit status and the last words on its stderr), `error` (it
    raised; `detail` says what), `closed` (the pool ended first). `phase`: what the job was doing
    (`compile`, `spec`); `seconds`: the deadline it had."""

    reason: str
    detail: str = ""
    phase: str = ""
    seconds: float = 0.0

    @property
    def out_of_memory(self) -> bool:
        return "out of memory" in self.detail.lower() or "memoryerror" in self.detail.lower()


_phase_conn: Connection | None = None


def report_phase(phase: str) -> None:
    """In a worker: tell the pool what the job does now (a no-op outside a worker)."""
    if _phase_conn is not None:
        with contextlib.suppress(OSError, ValueError):
            _phase_conn.send(("phase", phase))


def report_preview(value: Any) -> None:
    """In a worker: hand the job's submitter something to show before the result (NVRTC's
    errors while nvcc decides); the pool passes it to the job's `on_preview`, if it has one. A
    no-op outside a worker."""
    if _phase_conn is not None:
        with contextlib.suppress(Exception):  # a value that does not pickle is no preview
            _phase_conn.send(("preview", value))


def _serve(conn: Connection, stderr_path: str, nice: int = 0) -> None:
    try:
        _serve_jobs(conn, stderr_path, nice)
    finally:
        procs.end_process_group(0)  # with whatever its jobs started (a spec's `sleep 300`)


def _serve_jobs(conn: Connection, stderr_path: str, nice: int = 0) -> None:
    global _phase_conn
    procs.become_worker()
    if nice:  # a background worker: its compilers (nvcc, cicc, ptxas) inherit the priority
        with contextlib.suppress(OSError):
            os.nice(nice)
    # Ctrl-C reaches the whole process group; the parent ends the workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):  # what the compiler says as it dies ("LLVM ERROR: out of memory")
        fd = os.open(stderr_path, os.O_WRONLY | os.O_APPEND)
        os.dup2(fd, 2)
        os.close(fd)
    _phase_conn = conn
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        with contextlib.suppress(OSError, ValueError):  # the job's time starts now (`_Worker.give`)
            conn.send(("started",))
        fn, args, memory_bytes = job
        procs.limit_memory(memory_bytes)
        try:
            reply: Any = ("done", True, fn(*args))
        except MemoryError:  # the memory limit, not a fault of the engine
            reply = ("oom", f"MemoryError: out of memory (limit {procs.memory_limit() >> 20} MiB)")
        except Exception as e:  # the caller reports it with the job's path
            reply = ("done", False, f"{type(e).__name__}: {e}")
        try:
            conn.send(reply)
        except (OSError, EOFError):
            return
        except Exception as e:  # the result did not pickle
            conn.send(("done", False, f"{type(e).__name__}: {e}"))
        del job, fn, args, reply
        with contextlib.suppress(OSError, ValueError):
            if not conn.poll():  # nothing waiting: what the job freed goes back to the system
                procs.release_memory()


IDLE_LEAVE_S = 2.0  # an idle worker asked to leave gets this long before it is killed
# How long a worker may take, beyond a job's own time, to start and read the job (a new worker
# imports the engine first: 1 s of CPU, 6 to 8 s on 2 loaded cores). The job's time starts when
# the worker has it; a worker that never gets that far is killed at this bound.
START_ALLOWANCE_S = 60.0
# How much lower a background worker's CPU priority is (nice 10: a foreground compile beside it
# gets the cores it needs).
BACKGROUND_NICE = 10


@dataclass
class _Job:
    fn: Callable
    args: tuple
    timeout_s: float
    memory_bytes: int
    future: Future
    on_preview: Callable[[Any], None] | None = None


class _Worker:
    def __init__(self, ctx, folder: str, background: bool = False) -> None:
        fd, self.stderr_path = tempfile.mkstemp(prefix="worker-", suffix=".log", dir=folder)
        os.close(fd)
        self.background = background
        self.conn, child = ctx.Pipe()
        nice = BACKGROUND_NICE if background else 0
        self.process = ctx.Process(target=_serve, args=(child, self.stderr_path, nice), daemon=True)
        self.process.start()
        child.close()
        self.job: _Job | None = None
        self.idle_since = time.monotonic()
        self.deadline = 0.0
        self.phase = ""

    def give(self, job: _Job) -> None:
        self.job, self.phase = job, ""
        self.conn.send((job.fn, job.args, job.memory_bytes))
        self.deadline = time.monotonic() + job.timeout_s + START_ALLOWANCE_S

    def started(self) -> None:
        """The worker has the job (it has started and read it): the job's own time starts."""
        if self.job is not None:
            self.deadline = time.monotonic() + self.job.timeout_s

    def stderr_tail(self, limit: int = 600) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.stderr_path) - limit))
                return f.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def kill(self) -> None:
        if self.process.pid:
            procs.kill_group(self.process.pid)
        self.process.join(5)
        self._release()
        if self.process.pid and self.process.exitcode is not None:
            tempdirs.reap(owner=self.process.pid)  # nvcc's folder of a compile cut short

    def ask_to_leave(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.send(None)

    def wait_or_kill(self, timeout_s: float) -> None:
        self.process.join(max(0.0, timeout_s))
        if self.process.is_alive():
            self.kill()
        else:
            self._release()

    def stop(self) -> None:
        """Ask an idle worker to leave; kill it if it does not."""
        self.ask_to_leave()
        self.wait_or_kill(IDLE_LEAVE_S)

    def _release(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()
        with contextlib.suppress(OSError):
            os.unlink(self.stderr_path)


def default_context() -> str:
    """ "fork" where the caller has no other thread (the CLI: a worker then costs milliseconds,
    not the ~0.4 s of a fresh interpreter loading NVRTC), else "spawn" (forking a process with
    threads is unsafe)."""
    methods = multiprocessing.get_all_start_methods()
    return "fork" if "fork" in methods and threading.active_count() == 1 else "spawn"


class WorkerPool:
    """Up to `workers` worker processes, started when jobs need them (forked ones all at once).
    `submit` returns a Future that gets the job's result or a JobFailed; it never raises for what
    the job did. Thread-safe. Spawned processes are started by the pool's own thread and die with
    it (PR_SET_PDEATHSIG); forked ones by the caller's thread, and die with that.

    Background jobs (`submit(..., background=True)`: the server's start-up check of a workspace)
    run one at a time, only while no other job is queued or running, in one more worker of their
    own at a lower CPU priority (`BACKGROUND_NICE`), which ends after `shrink_after_s` idle."""

    def __init__(
        self, workers: int, context: str | None = None, shrink_after_s: float = 0.0, keep: int = 1
    ) -> None:
        """`shrink_after_s` > 0: idle workers beyond `keep` end after that long without a job
        (the server's: a burst of checks needs them all, the editor's next save one)."""
        context = context or default_context()
        self._shrink_after_s = shrink_after_s
        self._keep = max(0, keep)
        self.shrunk = 0  # workers ended for being idle
        # Workers are forked only here, while the caller has no other thread; a worker that
        # replaces one later is spawned (the pool's thread exists by then).
        self._ctx = multiprocessing.get_context("spawn" if context == "fork" else context)
        # The workers' stderr logs: one folder, removed with the pool (reaped after a kill).
        self._folder = tempdirs.make("kernel-lsp-pool-")
        self._max = max(1, workers)
        self._todo: deque[_Job] = deque()
        self._later: deque[_Job] = deque()  # background jobs
        self._low: _Worker | None = None  # the background worker, while idle
        self._idle: list[_Worker] = []
        self._busy: dict[Connection, _Worker] = {}
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = multiprocessing.Pipe(duplex=False)
        self._closing = False
        self.crashes = 0  # workers that died mid-job
        self.timeouts = 0  # jobs killed at their deadline
        if context == "fork":
            forked = multiprocessing.get_context("fork")
            self._idle = [w for w in (self._start(forked) for _ in range(self._max)) if w is not None]
        self._thread = threading.Thread(target=self._run, name="kernel-lsp-workers", daemon=True)
        self._thread.start()

    def _workers(self) -> list[_Worker]:
        return [*self._idle, *self._busy.values(), *([self._low] if self._low else [])]

    @property
    def processes(self) -> int:
        with self._lock:
            return len(self._workers())

    def pids(self) -> list[int]:
        with self._lock:
            return [w.process.pid for w in self._workers() if w.process.pid]

    def submit(
        self,
        fn: Callable,
        args: tuple,
        timeout_s: float,
        memory_bytes: int = 0,
        on_preview: Callable[[Any], None] | None = None,
        background: bool = False,
    ) -> Future:
        """`fn(*args)` in a worker, killed after `timeout_s` from when a worker started it (a
        worker's own start does not count: START_ALLOWANCE_S bounds it), with an
        address-space limit of `memory_bytes` (0: none). `fn` must be importable (a module-level
        function). `on_preview`: called on the pool's thread with what the job reports
        (`report_preview`) before its result, which comes after it. `background`: after every
        other job, in the low-priority worker."""
        future: Future = Future()
        with self._lock:
            if self._closing:
                future.set_result(JobFailed("closed"))
                return future
            job = _Job(fn, args, timeout_s, memory_bytes, future, on_preview)
            (self._later if background else self._todo).append(job)
        self._wake()
        return future

    def close(self) -> None:
        """End every worker now (jobs still queued or running get JobFailed("closed"))."""
        with self._lock:
            self._closing = True
        self._wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(30)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send_bytes(b"x")

    # --- the pool's thread --------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    closing = self._closing
                if closing:
                    break
                self._dispatch()
                deadlines = [w.deadline for w in self._busy.values()]
                shrink_at = self._shrink_at()
                if shrink_at is not None:
                    deadlines.append(shrink_at)
                timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
                idle = [w.conn for w in self._idle] + ([self._low.conn] if self._low else [])
                ready = wait([self._wake_r, *self._busy, *idle], timeout)
                for conn in ready:
                    if conn is self._wake_r:
                        with contextlib.suppress(OSError, EOFError):
                            while self._wake_r.poll():
                                self._wake_r.recv_bytes()
                    elif conn in self._busy:
                        self._receive(self._busy[conn])
                    elif self._low is not None and conn is self._low.conn:  # it died while idle
                        low, self._low = self._low, None
                        low.kill()
                    else:  # an idle worker said something or died: it is of no use any more
                        gone = next((w for w in self._idle if w.conn is conn), None)
                        if gone is not None:
                            self._idle.remove(gone)
                            gone.kill()
                self._expire()
                self._shrink()
        finally:
            self._end_all()

    def _surplus(self) -> list[_Worker]:
        """Idle workers beyond `keep`, longest idle first (the pool reuses the latest idle)."""
        if self._shrink_after_s <= 0 or self._todo or len(self._idle) <= self._keep:
            return []
        return sorted(self._idle, key=lambda w: w.idle_since)[: len(self._idle) - self._keep]

    def _idle_low(self) -> list[_Worker]:
        """The background worker when it is idle and may end (no background job waits)."""
        if self._shrink_after_s <= 0 or self._later or self._low is None:
            return []
        return [self._low]

    def _shrink_at(self) -> float | None:
        with self._lock:
            surplus = self._surplus() + self._idle_low()
        return min(w.idle_since for w in surplus) + self._shrink_after_s if surplus else None

    def _shrink(self) -> None:
        now = time.monotonic()
        with self._lock:
            leaving = [w for w in self._surplus() if now - w.idle_since >= self._shrink_after_s]
            for w in leaving:
                self._idle.remove(w)
            low = [w for w in self._idle_low() if now - w.idle_since >= self._shrink_after_s]
            if low:
                self._low = None
            leaving += low
        for w in leaving:
            w.ask_to_leave()
        deadline = time.monotonic() + IDLE_LEAVE_S
        for w in leaving:
            w.wait_or_kill(deadline - time.monotonic())
        self.shrunk += len(leaving)

    def _dispatch(self) -> None:
        while True:
            with self._lock:
                background = not self._todo and self._background_may_run()
                if not self._todo and not background:
                    return
                job = self._later[0] if background else self._todo[0]
                if not background and not self._idle and len(self._busy) - self._low_busy() >= self._max:
                    return
                (self._later if background else self._todo).popleft()
            if not job.future.set_running_or_notify_cancel():
                continue  # the caller gave up on it
            if background:
                worker, self._low = self._low or self._start(background=True), None
            else:
                worker = self._idle.pop() if self._idle else self._start()
            if worker is None:
                job.future.set_result(JobFailed("crashed", "the worker process did not start"))
                continue
            try:
                worker.give(job)
            except OSError:  # it died on the way up (or while idle)
                worker.process.join(5)
                job.future.set_result(
                    JobFailed("crashed", f"the worker did not start (exit code {worker.process.exitcode})")
                )
                worker.kill()
                continue
            with self._lock:
                self._busy[worker.conn] = worker

    def _low_busy(self) -> int:
        return sum(1 for w in self._busy.values() if w.background)

    def _background_may_run(self) -> bool:
        """A background job runs only when nothing else is queued or running, one at a time."""
        return bool(self._later) and not self._busy

    def _start(self, ctx=None, background: bool = False) -> _Worker | None:
        try:
            return _Worker(ctx or self._ctx, self._folder, background)
        except Exception:  # no process could be started (out of processes or memory)
            return None

    def _receive(self, w: _Worker) -> None:
        job = w.job
        assert job is not None
        try:
            message = w.conn.recv()
        except (EOFError, OSError):  # the worker died (a crash in a compiler or the spec)
            w.process.join(5)  # its pipe closes before its exit status is there to read
            with self._lock:
                self._busy.pop(w.conn, None)
            self.crashes += 1
            job.future.set_result(JobFailed("crashed", _exit_words(w), w.phase, job.timeout_s))
            w.kill()
            return
        except Exception as e:  # a result that does not unpickle here
            with self._lock:
                self._busy.pop(w.conn, None)
            job.future.set_result(JobFailed("error", f"its result could not be read: {e}", w.phase))
            w.kill()
            return
        if message[0] == "started":
            w.started()
            return
        if message[0] == "phase":
            w.phase = message[1]
            return
        if message[0] == "preview":
            if job.on_preview is not None:
                with contextlib.suppress(Exception):  # the submitter's callback must not stop the pool
                    job.on_preview(message[1])
            return
        with self._lock:
            self._busy.pop(w.conn, None)
            if w.background:
                self._low = w
            else:
                self._idle.append(w)
        w.job, w.idle_since = None, time.monotonic()
        if message[0] == "oom":  # a MemoryError under the limit: like a compiler that ran out
            job.future.set_result(JobFailed("crashed", message[1], w.phase, job.timeout_s))
            return
        _, ok, value = message
        job.future.set_result(value if ok else JobFailed("error", value, w.phase, job.timeout_s))

    def _expire(self) -> None:
        now = time.monotonic()
        for conn, w in list(self._busy.items()):
            if w.deadline <= now and w.job is not None:
                with self._lock:
                    self._busy.pop(conn, None)
                self.timeouts += 1
                w.job.future.set_result(JobFailed("timeout", "", w.phase, w.job.timeout_s))
                w.kill()

    def _end_all(self) -> None:
        with self._lock:
            todo, self._todo = [*self._todo, *self._later], deque()
            self._later = deque()
            idle, self._idle = self._idle + ([self._low] if self._low else []), []
            self._low = None
            busy, self._busy = list(self._busy.values()), {}
        for job in todo:
            with contextlib.suppress(Exception):
                job.future.set_result(JobFailed("closed"))
        for w in busy:
            w.kill()
            if w.job is not None and not w.job.future.done():
                w.job.future.set_result(JobFailed("closed"))
        # All idle workers are asked at once and waited for together: one after another, each
        # still starting (spawn under load) cost its 2 s and then the kill's join, and the
        # server's exit waits on this (an e2e teardown once passed its 15 s).
        for w in idle:
            w.ask_to_leave()
        deadline = time.monotonic() + IDLE_LEAVE_S
        for w in idle:
            w.wait_or_kill(deadline - time.monotonic())
        for end in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                end.close()
        shutil.rmtree(self._folder, ignore_errors=True)


def _exit_words(w: _Worker) -> str:
    code = w.process.exitcode
    if code is not None and code < 0:
        try:
            status = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            status = f"killed by signal {-code}"
    else:
        status = f"exit code {code}"
    tail = w.stderr_tail()
    return f"{status}: {tail.splitlines()[-1]}" if tail else status


def run_jobs(
    fn: Callable,
    jobs: Sequence[tuple],
    workers: int,
    timeout_s: float,
    memory_bytes: int = 0,
) -> list[Any | JobFailed]:
    """`fn(*args)` for each args in `jobs` in up to `workers` processes; results in the order of
    `jobs`; a job that outlives `timeout_s` from when its worker started it, raises or kills its
    worker yields a JobFailed."""
    pool = WorkerPool(min(workers, len(jobs)) or 1)
    try:
        futures = [pool.submit(fn, args, timeout_s, memory_bytes) for args in jobs]
        return [f.result() for f in futures]
    finally:
        pool.close()
