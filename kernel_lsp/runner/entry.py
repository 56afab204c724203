"""Host entries inside the worker: a `.cu` built as a shared library (compile/shared_lib.py),
loaded with ctypes, its entry called with the case's device buffers and scalars exactly where a
kernel would be launched, so the verifier and the timer treat a call like a pipeline.

- The CUDA runtime the library needs (`libcudart.so.<major>`, linked by SONAME) is loaded once,
  from this environment (cuda.pathfinder: the cudart wheel), RTLD_GLOBAL. It runs in the device's
  primary context, the one the worker's driver calls use: device pointers are shared.
- Arguments: pointers as `c_void_p`, scalars as their exact C type (ArgKind codes from
  kernel_lsp/host_entry.py), a `cudaStream_t` parameter gets the worker's stream; an entry
  without one runs on the legacy default stream, which the worker then times on.
- After each call: `cudaGetLastError` (a launch the entry did not check still fails the case) and
  the entry's own status (a non-zero `int`/`cudaError_t`).
- State: before every call the library's writable host data (.data/.bss, not RELRO) goes back to
  its image right after loading, and its `__device__` variables (addresses from
  `cudaGetSymbolAddress` on their host shadows) to their loaded values; no result cached in a
  static survives from one call to the next.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernel_lsp.elf import PF_W, PT_GNU_RELRO, PT_LOAD, Elf
from kernel_lsp.runner.device import DeviceFault
from kernel_lsp.runner.isolation import ModuleState

CTYPES: dict[str, Any] = {
    "ptr": ctypes.c_void_p,
    "stream": ctypes.c_void_p,
    "i8": ctypes.c_int8,
    "i16": ctypes.c_int16,
    "i32": ctypes.c_int32,
    "i64": ctypes.c_int64,
    "u8": ctypes.c_uint8,
    "u16": ctypes.c_uint16,
    "u32": ctypes.c_uint32,
    "u64": ctypes.c_uint64,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
    "h16": ctypes.c_uint16,
    "b16": ctypes.c_uint16,
}
RETURNS: dict[str, Any] = {"void": None, "status": ctypes.c_int64, "value": ctypes.c_int64}
# cudaError_t values after which the context is gone (cudaErrorIllegalAddress, ...).
STICKY_RUNTIME_ERRORS = {700, 710, 714, 715, 716, 718, 719, 720}


class Runtime:
    """The CUDA runtime (cudart) every entry library of this process uses."""

    def __init__(self, lib: Any):
        self.lib = lib
        lib.cudaGetErrorName.restype = ctypes.c_char_p
        lib.cudaGetErrorString.restype = ctypes.c_char_p

    def error_text(self, code: int) -> str:
        name = self.lib.cudaGetErrorName(ctypes.c_int(code)) or b"?"
        text = self.lib.cudaGetErrorString(ctypes.c_int(code)) or b""
        return f"{name.decode()} ({text.decode()})"

    def last_error(self) -> int:
        return int(self.lib.cudaGetLastError())

    def symbol(self, host_address: int) -> tuple[int, int] | None:
        """(device address, bytes) of the `__device__` variable whose host shadow is there."""
        ptr, size = ctypes.c_void_p(), ctypes.c_size_t()
        if self.lib.cudaGetSymbolAddress(ctypes.byref(ptr), ctypes.c_void_p(host_address)) != 0:
            self.lib.cudaGetLastError()
            return None
        if self.lib.cudaGetSymbolSize(ctypes.byref(size), ctypes.c_void_p(host_address)) != 0:
            self.lib.cudaGetLastError()
            return None
        return int(ptr.value or 0), int(size.value)


_runtime: Runtime | None = None


def load_runtime() -> Runtime:
    """cudart from this environment (the wheel through cuda.pathfinder, else the loader's path),
    loaded RTLD_GLOBAL so the libraries' `libcudart.so.<major>` resolves to it."""
    global _runtime
    if _runtime is not None:
        return _runtime
    path = None
    try:
        from cuda import pathfinder

        path = pathfinder.load_nvidia_dynamic_lib("cudart").abs_path
    except Exception:
        path = None
    problems = []
    for candidate in [p for p in (path, "libcudart.so.13", "libcudart.so.12", "libcudart.so") if p]:
        try:
            _runtime = Runtime(ctypes.CDLL(candidate, mode=os.RTLD_NOW | os.RTLD_GLOBAL))
            return _runtime
        except OSError as e:
            problems.append(str(e))
    raise DeviceFault(
        "the CUDA runtime (libcudart) cannot be loaded for host entries: "
        + "; ".join(problems)
        + " (pip install nvidia-cuda-runtime)"
    )


@dataclass
class EntryLibrary:
    """One loaded library: its handle, where it sits, and the image of its writable host data."""

    path: str
    handle: Any
    elf: Elf
    base: int
    host_image: list[tuple[int, bytes]] = field(default_factory=list)

    def restore_host_state(self) -> None:
        for address, data in self.host_image:
            ctypes.memmove(address, data, len(data))

    def close(self) -> None:
        """dlclose: the runtime unregisters the library's kernels (its registration's atexit)."""
        with contextlib.suppress(OSError, AttributeError, ImportError):
            import _ctypes

            _ctypes.dlclose(self.handle._handle)
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def _writable_ranges(elf: Elf, base: int) -> list[tuple[int, int]]:
    """[start, end) of the library's writable data once loaded, less the RELRO part (read-only
    after relocation: writing it would fault)."""
    segments = elf.segments()
    relro = [(base + s.vaddr, base + s.vaddr + s.memsz) for s in segments if s.type == PT_GNU_RELRO]
    ranges = []
    for s in segments:
        if s.type != PT_LOAD or not s.flags & PF_W:
            continue
        start, end = base + s.vaddr, base + s.vaddr + s.memsz
        for r_start, r_end in relro:  # RELRO covers the start of the RW segment
            if r_start <= start < r_end:
                start = min(end, r_end)
        if end > start:
            ranges.append((start, end))
    return ranges


def load_library(
    image: bytes, folder: str, symbol: str, runtime: Runtime | None, path: str | None = None
) -> tuple[EntryLibrary, Any]:
    """Write the library into `folder` (or load it from `path`, a file that holds `image`
    already: a sandboxed process writes no file), load it (RTLD_LOCAL: two versions of one entry
    can live side by side), find the entry, and keep the image of its writable host data."""
    if runtime is None and b"libcudart" in image:
        raise DeviceFault("the library needs the CUDA runtime, which is not loaded")
    if path is None:
        digest = hashlib.sha256(image).hexdigest()[:16]
        path = os.path.join(folder, f"entry-{digest}-{os.getpid()}-{id(image):x}.so")
        with open(path, "wb") as f:
            f.write(image)
    try:
        handle = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as e:
        raise DeviceFault(f"the entry's library does not load: {e}") from None
    elf = Elf(image)
    try:
        fn = getattr(handle, symbol)
    except AttributeError:
        raise DeviceFault(f"no function `{symbol}` exported by the entry's library") from None
    exported = next((s for s in elf.symbols(dynamic=True) if s.name == symbol), None)
    address = ctypes.cast(fn, ctypes.c_void_p).value or 0
    base = address - exported.value if exported is not None else 0
    library = EntryLibrary(path, handle, elf, base)
    if exported is not None:
        library.host_image = [
            (start, ctypes.string_at(start, end - start)) for start, end in _writable_ranges(elf, base)
        ]
    return library, fn


def library_globals(
    library: EntryLibrary, names: list[str], runtime: Runtime | None
) -> list[tuple[str, int | None, int]]:
    """(name, device address, bytes) of the library's `__device__` variables, found through their
    host shadows (same names in the library's symbol table); None where it cannot be resolved."""
    if not names or runtime is None or not library.base:
        return [(n, None, 0) for n in names]
    by_name = {s.name: s for s in library.elf.symbols() if s.name}
    out: list[tuple[str, int | None, int]] = []
    for name in names:
        sym = by_name.get(name)
        found = runtime.symbol(library.base + sym.value) if sym is not None and sym.value else None
        out.append((name, found[0], found[1]) if found else (name, None, 0))
    return out


@dataclass
class LibraryState:
    """What `restorer` puts back before each call: host statics and `__device__` variables."""

    library: EntryLibrary
    device_state: ModuleState

    @property
    def names(self) -> list[str]:
        return ["(host statics)"] * bool(self.library.host_image) + self.device_state.names

    def restore(self) -> None:
        self.library.restore_host_state()
        self.device_state.restore()

    def free(self) -> None:
        self.device_state.free()


@dataclass
class EntryStep:
    """The call of one entry: the ctypes function and how each parameter is passed."""

    kernel: str  # the entry's name (what messages call it)
    fn: Any
    params: list[str]
    codes: list[str]
    returns: str
    runtime: Runtime | None
    library: EntryLibrary | None = None

    def __post_init__(self) -> None:
        self.fn.argtypes = [CTYPES[c] for c in self.codes]
        self.fn.restype = RETURNS.get(self.returns)

    @property
    def takes_stream(self) -> bool:
        return "stream" in self.codes

    def bind(self, device: Any, bufs: Any) -> Callable[[], None]:
        """The call with this case's buffers and scalars (values built once)."""
        values: list[Any] = []
        for name, code in zip(self.params, self.codes, strict=True):
            if code == "stream":
                values.append(device.stream_handle())
            elif code == "ptr":
                values.append(bufs.ptrs[name])
            else:
                value = bufs.spec.scalar_value(name, bufs.sizes)
                if code in ("h16", "b16"):
                    value = int(np.asarray(value).view(np.uint16))
                values.append(value.item() if hasattr(value, "item") else value)

        def call() -> None:
            result = self.fn(*values)
            self.check(result)

        return call

    def check(self, result: Any) -> None:
        if self.runtime is not None:
            code = self.runtime.last_error()
            if code:
                text = self.runtime.error_text(code)
                raise DeviceFault(
                    f"a CUDA call in `{self.kernel}` failed: {text}",
                    text,
                    sticky=code in STICKY_RUNTIME_ERRORS,
                )
        if self.returns == "status" and result:
            what = (
                f" = {self.runtime.error_text(int(result))}"
                if self.runtime is not None and 0 < result < 1000
                else ""
            )
            raise DeviceFault(
                f"`{self.kernel}` returned {int(result)}{what}", "entry_status", status=int(result)
            )


# --- leaks: what the timed calls left behind ------------------------------------------------------

DEVICE_LEAK_BYTES = 16 << 20  # device memory the timed calls may hold on to (allocator slack)
HOST_LEAK_BYTES = 64 << 20


def _resident_bytes() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def memory_in_use(device: Any) -> tuple[int, int, bool]:
    """(device bytes in use, host bytes resident, whether the device figure is this process's
    alone) now: NVML's per-process figure where the driver gives one, else the whole GPU's."""
    device.sync_all()
    used, own = device.used_memory()
    return int(used), _resident_bytes(), bool(own)


def check_leaks(before: tuple[int, int, bool], after: tuple[int, int, bool], calls: int, case: str) -> None:
    """A launcher that allocates without freeing (cudaMalloc, malloc) fails the case: over
    thousands of timed calls it would exhaust the device or the host."""
    from kernel_lsp.runner.verify import Failed, Problem

    whole_gpu = (
        ""
        if before[2] and after[2]
        else (
            "; measured on the whole GPU (NVML gave no per-process figure here), so another "
            "process's allocations count too"
        )
    )
    for lost, limit, where, how, scope in (
        (after[0] - before[0], DEVICE_LEAK_BYTES, "device", "cudaMalloc without cudaFree", whole_gpu),
        (after[1] - before[1], HOST_LEAK_BYTES, "host", "malloc/new without free/delete", ""),
    ):
        if lost > limit:
            raise Failed(
                Problem(
                    "leak",
                    case,
                    f"case {case}: {lost / 2**20:.0f} MiB of {where} memory were not given back over "
                    f"{calls} timed calls ({how}? a buffer kept in a static is allocated anew on each "
                    f"call here, because statics are reset between calls){scope}",
                )
            )
