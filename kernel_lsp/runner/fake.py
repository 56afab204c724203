"""A pretend GPU for CI: same methods as CudaDevice, memory in numpy, kernels from a fixed menu.

Selected by the worker's `--fake` flag (a backend's `fake=True`). A fake "CUBIN" is
`b"FAKE\\n"` followed by JSON `{"<symbol>": "<behaviour>"}`. Every behaviour takes a vadd-shaped
parameter list (two float32 inputs, one float32 output, then the element count) so the whole
verifier can be exercised on a CPU:

    vadd     correct: c = a + b
    noop     writes nothing (relies on a stale output)
    const    writes 1.0 everywhere
    half     does only the first half of the elements
    oob      correct, plus one element written past the end of c
    clobber  correct, but also overwrites a[0]
    flaky    correct, but a different element is wrong on every launch (a race)
    hang     never returns (the client's launch timeout must fire)
    stall:PATH  correct, but its first launch on this machine never returns (marked by creating
             the file PATH; `stall` without one never stalls): a launch that waited on a GPU
             stalled by another process's fault
    crash    an illegal memory access (sticky: the worker must exit)
    slow     correct, and takes 2 ms of CPU (the fake GPU times CPU, not the wall clock)
    counter  counts its launches in a module global and computes only on the first one (a
             launch-counting cheat: right only while the global is at its loaded image)
    smem_uninit  c = a + b plus what it reads of shared memory no thread of its block wrote
             (the published reduction whose first warp reads warp_sums[8..31]): right only
             where that holds zeros, as it does after any launch here, unless the shared
             memory was poisoned just before it (`poison_shared_memory`, in its own process)

Behaviours with state get a fake module global `<symbol>_state` (see `module_globals`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import mmap
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from kernel_lsp.runner.device import DeviceFault

FAKE_COPY_BANDWIDTH_BPS = 1e15  # 1 PB/s: above any host's copy rate
GATE_POLL_S = 20e-6  # how often a fake gate's wait looks at its flag
GATE_TIMEOUT_S = 60.0  # a gate's wait without a timeout of its own

FAKE_MAGIC = b"FAKE\n"
BEHAVIOURS = (
    "vadd",
    "noop",
    "const",
    "half",
    "oob",
    "clobber",
    "flaky",
    "hang",
    "stall",
    "crash",
    "slow",
    "counter",
    "smem_uninit",
)
STATEFUL = ("counter",)
STATE_BYTES = 64


class FakeFunction(str):
    """A behaviour name, with the address of its module global where it has one, and what
    followed its `:` in the image (`stall`'s mark)."""

    state: int | None = None
    argument: str = ""


def fake_cubin(symbols: dict[str, str]) -> bytes:
    """The fake image that maps each entry symbol to a behaviour of the menu above (`name` or
    `name:argument`)."""
    for b in symbols.values():
        if b.partition(":")[0] not in BEHAVIOURS:
            raise ValueError(f"unknown fake behaviour {b!r}")
    return FAKE_MAGIC + json.dumps(symbols).encode()


class FakeDevice:
    fake = True
    share_buffers = False  # set by a judge: the accused maps the case's buffers (runner/verify.py)
    # The host's caches are never flushed here (flush_l2 does nothing): a run on new inputs pays
    # their misses, 278 us against 153 us for a 4096-element add on a loaded CI machine. The
    # judge reads no gap below this as a result kept between runs (runner/judge.py).
    first_use_noise_s = 0.5e-3

    def __init__(self, index: int = 0):
        self.index = index
        self._mem: dict[int, np.ndarray] = {}
        self._maps: dict[int, tuple[mmap.mmap, int]] = {}  # shared allocations: ptr -> (map, fd)
        self._launches = 0
        # What every SM's shared memory holds: the poison byte written just before a launch,
        # else zeros (what the last kernel left, here always: the luck that hides a read of
        # shared memory nothing wrote).
        self._smem_byte = 0

    def info(self) -> dict[str, Any]:
        return {
            "name": "Fake GPU (no-GPU mode)",
            "index": self.index,
            "arch": "sm_90",
            "sm_count": 1,
            "sm_clock_mhz": 1000,
            "mem_clock_mhz": 1000,
            "mem_bus_bits": 64,
            "l2_bytes": 1 << 20,
            "smem_per_sm": 228 * 1024,
            "regs_per_sm": 65536,
            "max_threads_per_sm": 2048,
            "total_mem_bytes": 1 << 30,
            "pci_bus_id": 0,
            "driver_version": 0,
        }

    # --- memory: numpy byte arrays at their real host addresses -----------------------------------
    # A host entry built for the CPU (a launcher whose "device" pointers are host memory) can then
    # be called on them: the fake GPU runs the real ctypes path of host-entry specs.

    def alloc(self, nbytes: int) -> int:
        buf = np.zeros(max(1, nbytes), np.uint8)
        ptr = int(buf.ctypes.data)
        self._mem[ptr] = buf
        return ptr

    def free_memory(self) -> int:
        return max(0, self.info()["total_mem_bytes"] - sum(b.size for b in self._mem.values()))

    def used_memory(self) -> tuple[int, bool]:
        return sum(b.size for b in self._mem.values()), True

    def free(self, ptr: int) -> None:
        self._mem.pop(ptr, None)
        if ptr in self._maps:
            mapped, fd = self._maps.pop(ptr)
            os.close(fd)
            with contextlib.suppress(BufferError):  # a view still exported: the GC unmaps it
                mapped.close()

    # --- memory another process maps: a memfd each, as the real device's VMM file descriptors ---

    def shared_size(self, nbytes: int) -> int:
        return -(-max(1, nbytes) // mmap.PAGESIZE) * mmap.PAGESIZE

    def _map_fd(self, fd: int, nbytes: int) -> int:
        # Populated at once: a first touch of each page would make a run on a new input set
        # slower than a repeat, which the judge reads as a result kept between runs.
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        mapped = mmap.mmap(fd, nbytes, flags, mmap.PROT_READ | mmap.PROT_WRITE)
        buf = np.frombuffer(mapped, np.uint8)
        ptr = int(buf.ctypes.data)
        self._mem[ptr] = buf
        self._maps[ptr] = (mapped, fd)
        return ptr

    def alloc_shared(self, nbytes: int) -> int:
        size = self.shared_size(nbytes)
        fd = os.memfd_create("kernel-lsp-buffer", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, size)
        # Its size is fixed: the process it is sent to can neither grow it (memory the limits do
        # not count) nor shrink it under the judge's mapping (a SIGBUS in the judge).
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
        return self._map_fd(fd, size)

    def export(self, ptr: int) -> tuple[int, int]:
        mapped, fd = self._maps[ptr]
        return os.dup(fd), len(mapped)

    def import_shared(self, fd: int, nbytes: int) -> int:
        return self._map_fd(os.dup(fd), nbytes)

    def _locate(self, addr: int, nbytes: int) -> tuple[np.ndarray, int]:
        for base, buf in self._mem.items():
            if base <= addr and addr + nbytes <= base + buf.size:
                return buf, addr - base
        raise DeviceFault("illegal memory access", "CUDA_ERROR_ILLEGAL_ADDRESS", sticky=True)

    def upload(self, ptr: int, data: np.ndarray) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        buf, off = self._locate(ptr, raw.size)
        buf[off : off + raw.size] = raw

    def download(self, ptr: int, nbytes: int) -> np.ndarray:
        buf, off = self._locate(ptr, nbytes)
        return buf[off : off + nbytes].copy()

    def fill(self, ptr: int, byte: int, nbytes: int) -> None:
        buf, off = self._locate(ptr, nbytes)
        buf[off : off + nbytes] = byte & 0xFF

    fill_async = fill  # one queue: everything here is in order

    def copy_async(self, dst: int, src: int, nbytes: int) -> None:
        self.upload(dst, self.download(src, nbytes))

    def _f32(self, ptr: int, count: int) -> np.ndarray:
        buf, off = self._locate(ptr, 4 * count)
        return buf[off : off + 4 * count].view(np.float32)

    # --- modules --------------------------------------------------------------------------------

    def load(self, cubin: bytes) -> dict[str, FakeFunction]:
        if not cubin.startswith(FAKE_MAGIC):
            raise DeviceFault("the CUBIN image is invalid", "CUDA_ERROR_INVALID_IMAGE")
        module = {}
        for symbol, behaviour in json.loads(cubin[len(FAKE_MAGIC) :]).items():
            name, _, argument = behaviour.partition(":")
            fn = FakeFunction(name)
            fn.argument = argument
            if name in STATEFUL:
                fn.state = self.alloc(STATE_BYTES)  # zero-initialised, like a `__device__` int
            module[symbol] = fn
        return module

    def unload(self, module: Any) -> None:
        for fn in module.values():
            if fn.state is not None:
                self.free(fn.state)

    def function(self, module: dict[str, FakeFunction], symbol: str) -> FakeFunction:
        if symbol not in module:
            raise DeviceFault("kernel symbol not found in the CUBIN", "CUDA_ERROR_NOT_FOUND")
        return module[symbol]

    def module_globals(
        self, module: dict[str, FakeFunction], cubin: bytes
    ) -> list[tuple[str, int | None, int]]:
        return [(f"{s}_state", fn.state, STATE_BYTES) for s, fn in module.items() if fn.state is not None]

    def launch(self, fn: FakeFunction, grid: Any, block: Any, smem: int, args: list[np.ndarray]) -> None:
        self._launches += 1
        smem_byte, self._smem_byte = self._smem_byte, 0  # this kernel leaves zeros behind
        if fn == "hang":
            while True:
                time.sleep(3600)
        if fn == "stall":
            mark = fn.argument
            if mark and not os.path.exists(mark):
                with open(mark, "w", encoding="utf-8"):
                    pass
                while True:
                    time.sleep(3600)
        if fn == "crash":
            raise DeviceFault("illegal memory access", "CUDA_ERROR_ILLEGAL_ADDRESS", sticky=True)
        pa, pb, pc = (int(args[i].view(np.uint64)[0]) for i in range(3))
        n = int(args[3].view(np.int32)[0])
        a, b, c = self._f32(pa, n), self._f32(pb, n), self._f32(pc, n)
        if fn == "noop":
            return
        if fn == "counter":
            assert fn.state is not None  # load gives every STATEFUL behaviour its global
            count = self._locate(fn.state, 4)[0][:4].view(np.int32)
            count[0] += 1
            if count[0] > 1:
                return  # the output of the first launch is still there: "done"
        if fn == "const":
            c[:] = 1.0
            return
        if fn == "smem_uninit":
            unwritten = np.frombuffer(bytes([smem_byte]) * 4, np.float32)[0]
            with np.errstate(over="ignore", invalid="ignore"):
                c[:] = a + b + unwritten
            return
        if fn == "half":
            c[: n // 2] = a[: n // 2] + b[: n // 2]
            return
        c[:] = a + b
        if fn == "oob":
            self._f32(pc, n + 1)[n] = 0.0
        elif fn == "clobber" and n:
            a[0] = 42.0
        elif fn == "flaky" and n:
            c[self._launches % n] += 1.0
        elif fn == "slow":  # 2 ms of CPU: the fake GPU's clocks count CPU time, not the wall's
            until = time.thread_time() + 0.002
            while time.thread_time() < until:
                pass

    def sync(self) -> None:
        pass

    sync_all = sync

    def stream_handle(self) -> int:
        return 0

    @contextlib.contextmanager
    def legacy_stream(self, use: bool = True) -> Iterator[None]:
        yield

    def flush_l2(self) -> None:
        pass

    def poison_shared_memory(self, byte: int) -> None:
        self._smem_byte = byte & 0xFF

    def head_start(self, seconds: float) -> None:
        pass  # nothing is queued here: there is nothing to get ahead of

    def null_kernel(self) -> None:
        pass

    def helpers_image(self) -> bytes:
        """The judge's helpers as an accused loads them (runner/device.CudaDevice): nothing to
        compile here."""
        return fake_cubin({})

    def load_helpers(self, image: bytes) -> bool:
        return image.startswith(FAKE_MAGIC)

    # --- gates (runner/device.CudaDevice): here every call runs at once, so a wait polls ---------

    def _flag(self, addr: int) -> np.ndarray:
        buf, off = self._locate(addr, 4)
        return buf[off : off + 4].view(np.uint32)

    def gate_wait(self, addr: int, value: int, timeout_s: float = 0.0) -> None:
        """Returns once the flag has reached `value` (written by another process); past
        `timeout_s` (0: GATE_TIMEOUT_S), a launch timeout."""
        flag = self._flag(addr)
        deadline = time.monotonic() + (timeout_s or GATE_TIMEOUT_S)
        while (int(flag[0]) - value) & 0xFFFFFFFF >= 1 << 31:  # a cyclic "not yet reached"
            if time.monotonic() > deadline:
                raise DeviceFault("a gate was never opened", "CUDA_ERROR_LAUNCH_TIMEOUT")
            time.sleep(GATE_POLL_S)

    def gate_write(self, addr: int, value: int) -> None:
        self._flag(addr)[0] = value & 0xFFFFFFFF

    gate_release = gate_write

    def mark(self) -> float:
        return time.perf_counter()

    def seconds_between(self, start: float, end: float) -> float:
        return end - start

    def time_rounds(
        self,
        runs: list[Callable[[], None]],
        rounds: int,
        cold_l2: bool,
        prepare: Callable[[], None] | None = None,
    ) -> list[list[float]]:
        out: list[list[float]] = [[] for _ in runs]
        for r in range(rounds):
            order = range(len(runs)) if r % 2 == 0 else reversed(range(len(runs)))
            for j in order:
                if prepare is not None:
                    prepare()
                # CPU time, not the wall clock: the fake's kernels are host code run here, and a
                # loaded machine stretches a run's wall time at random (judge.AccusedProcess.cpu_seconds).
                start = time.process_time()
                runs[j]()
                out[j].append(time.process_time() - start)
        return out

    def copy_bandwidth(self, nbytes: int = 1 << 26, repeats: int = 3) -> float:
        # The fake kernels run on the host CPU, whose copy rate swings with load: a rate measured
        # here let honest fake kernels cross the speed-of-light bound on a busy CI machine. A bound
        # no host reaches keeps the CPU tests about verification; the bounds have unit tests with
        # fixed figures (tests/integration/test_isolation.py).
        return FAKE_COPY_BANDWIDTH_BPS
