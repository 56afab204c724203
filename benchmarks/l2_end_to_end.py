"""What l2_normalize's launchers cost a caller, measured in one process with no judge: each file
(samples/entries/l2_normalize_coop.cu and the two LLM-style rewrites judge_cost.py offers for it)
is built with nvcc as a shared library and its `extern "C"` entry called through ctypes on cupy
buffers, the three interleaved round after round, on two clocks at once:

- end to end: the host clock around `calls` calls and a device sync (what a caller that calls
  the launcher in a loop pays: its attribute queries, cudaMalloc, launch, cudaFree);
- kernels only: CUDA events on the legacy stream around the same calls (what the old in-process
  judge timed).

The judge (runner/judge.py) times end to end, so its A/B should be near the first ratio, on the
same kind of inputs (`--data numpy` is the judge's kind; on an H200 every data kind and layout
gave the original 98-105 us a call: section 8 of benchmarks/results/gpu_h200_2026-11-29.md,
where the judged run's extra 100 us turned out to be its scratch allocation, not its inputs).
These modes put one part of the judged path under
the same loop (none of them moved the original's time there):

- `--confine`: once CUDA is up, the accused's second seccomp filter (no sockets, no shared
  anonymous maps: fence/sandbox.close_after_start) and its memory limit (limit_memory);
- `--idle-context`: another process holds a context on the same GPU, idle, as the judge does
  while the accused runs a request;
- `--between other-tiny|other-flush|own-flush`: before each timed group of calls (not timed),
  another process does GPU work of its own (a 4 KiB fill, or a fill the size of twice the L2)
  and waits for it, as the judge does between two requests (its copy of the outputs, its L2
  flush); `own-flush`: this process fills twice the L2 itself;
- `--buffers vmm`: the buffers are VMM allocations with a file-descriptor handle, as the judge
  makes them; `--buffers vmm-other-process`: made so by another process and mapped here from the
  fds it sends, as the accused maps the judge's.

    python3 benchmarks/l2_end_to_end.py [--n 16777216] [--rounds 30] [--calls 20] [--sets 16] [--sync] [--confine] [--confine-first all|seccomp|limit] [--idle-context] [--between other-tiny|other-flush|own-flush] [--buffers vmm|vmm-other-process] [--data cupy|cupy-dma|numpy|numpy-kernel|fill|zeros] [--layout packed|skewed]
"""

from __future__ import annotations

import argparse
import ctypes
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILES = {
    "original": REPO / "samples/entries/l2_normalize_coop.cu",
    "two_kernels": REPO / "tests/fixtures/entry_rewrites/l2_normalize_coop.two_kernels.md",
    "coop_variant": REPO / "tests/fixtures/entry_rewrites/l2_normalize_coop.coop_variant.md",
}


def source_of(path: Path) -> str:
    text = path.read_text()
    if path.suffix == ".md":  # an LLM answer: the one fenced block, after the original's includes
        match = re.search(r"```cuda\n(.*?)```", text, re.S)
        assert match, f"{path}: no ```cuda block"
        includes = re.findall(r"^#include .*$", FILES["original"].read_text(), re.M)
        return "\n".join(includes) + "\n" + match.group(1)
    return text


def build(name: str, path: Path, workdir: Path, arch: str) -> ctypes.CDLL:
    src = workdir / f"{name}.cu"
    src.write_text(source_of(path))
    lib = workdir / f"lib{name}.so"
    cmd = ["nvcc", "-O3", f"-arch={arch}", "-shared", "-Xcompiler", "-fPIC", "-o", str(lib), str(src)]
    subprocess.run(cmd, check=True)
    entry = ctypes.CDLL(str(lib)).l2_normalize
    entry.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_float]
    entry.restype = ctypes.c_int
    return entry


OWNER = """
import socket, sys
import cupy as cp
from kernel_lsp.runner.device import CudaDevice
n, sets, fd = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
device, sock = CudaDevice(0), socket.socket(fileno=fd)
for k in range(2 * sets):
    ptr = device.alloc_shared(4 * n)
    a = cp.ndarray((n,), cp.float32, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(ptr, 4 * n, None), 0))
    a[...] = cp.random.standard_normal(n, dtype=cp.float32) if k < sets else 0
    cp.cuda.runtime.deviceSynchronize()
    handle, nbytes = device.export(ptr)
    socket.send_fds(sock, [str(nbytes).encode()], [handle])
sys.stdin.read()  # holds the buffers until the reader is done
"""


IDLE = """
import sys, cupy as cp
keep = cp.zeros(1 << 20, cp.float32)  # a context on the GPU, with memory, doing nothing
cp.cuda.runtime.deviceSynchronize()
print("ready", flush=True)
sys.stdin.read()
"""


BUSY = """
import sys, cupy as cp
tiny, big = cp.zeros(1024, cp.float32), cp.zeros(int(sys.argv[1]) // 4, cp.float32)
cp.cuda.runtime.deviceSynchronize()
print("ready", flush=True)
while line := sys.stdin.readline():  # one fill a line, waited for, then answered
    (tiny if line.strip() == "tiny" else big).fill(1.0)
    cp.cuda.runtime.deviceSynchronize()
    print("done", flush=True)
"""


def inputs(cp, n: int, data: str, k: int):
    """Set k's input: normal samples from cupy's generator (made on the GPU), or from numpy's
    (made on the host and copied, as the judge's are: runner/case_memo.inputs), or one value.
    A ratio says which it was measured on (on an H200 none of them changed the original's time:
    section 8 of benchmarks/results/gpu_h200_2026-11-29.md)."""
    if data.startswith("numpy"):
        import numpy as np

        host = np.random.default_rng(k).standard_normal(n, dtype=np.float32)
        if data == "numpy":  # copied in by the copy engine, as the judge's uploads are
            return cp.asarray(host)
        x = cp.empty(n, cp.float32)  # numpy-kernel: first written by a kernel, from a staging copy
        cp.multiply(cp.asarray(host), 1.0, out=x)
        return x
    if data == "cupy-dma":  # cupy's samples, copied into fresh memory by the copy engine
        staged = cp.random.standard_normal(n, dtype=cp.float32)
        x = cp.empty(n, cp.float32)
        cp.cuda.runtime.memcpy(x.data.ptr, staged.data.ptr, 4 * n, cp.cuda.runtime.memcpyDeviceToDevice)
        return x
    if data in ("fill", "zeros"):
        return cp.full(n, 0.75 if data == "fill" else 0.0, cp.float32)
    return cp.random.standard_normal(n, dtype=cp.float32)


SKEW = (5 << 20) + (352 << 10)  # bytes: no power of two divides the distances it makes


def laid_out(cp, n: int, sets: int, skewed: bool):
    """Every set's input and output as views of one allocation, input k then output k, each
    input holding numpy's normal samples copied in (the judge's kind). `packed`: each view
    right after the last, so an output starts 2^k bytes after its input (64 MiB at n = 2^24);
    `skewed`: SKEW bytes between views. The same data and the same copies either way: only the
    distances between the addresses differ."""
    import numpy as np

    gap = SKEW if skewed else 0
    arena = cp.empty(2 * sets * (4 * n + gap) // 4, cp.float32)
    base = int(arena.data.ptr)

    def view(k: int):
        ptr = cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(base + k * (4 * n + gap), 4 * n, arena), 0)
        return cp.ndarray((n,), cp.float32, ptr)

    xs = [view(2 * k) for k in range(sets)]
    ys = [view(2 * k + 1) for k in range(sets)]
    for k, x in enumerate(xs):
        x.set(np.random.default_rng(k).standard_normal(n, dtype=np.float32))
    return xs, ys  # each view keeps the allocation alive


def shared_buffers(cp, n: int, sets: int, other_process: bool):
    """`sets` inputs (normal) and outputs of n floats as the judge makes them: VMM allocations
    with a POSIX fd handle (runner/device.CudaDevice.alloc_shared), made here, or made by a child
    process and mapped here from the fds it sends (CudaDevice.import_shared), as the accused maps
    the judge's. Returns (the child or None, inputs, outputs) as cupy arrays."""
    import socket

    from kernel_lsp.runner.device import CudaDevice

    device = CudaDevice(0)
    ptrs: list[int] = []
    owner = None
    if other_process:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        owner = subprocess.Popen(
            [sys.executable, "-c", OWNER, str(n), str(sets), str(theirs.fileno())],
            stdin=subprocess.PIPE,
            pass_fds=[theirs.fileno()],
        )
        theirs.close()
        for _ in range(2 * sets):
            data, fds, _flags, _addr = socket.recv_fds(mine, 64, 1)
            ptrs.append(device.import_shared(fds[0], int(data)))
    else:
        ptrs = [device.alloc_shared(4 * n) for _ in range(2 * sets)]
    arrays = [
        cp.ndarray((n,), cp.float32, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(p, 4 * n, device), 0))
        for p in ptrs
    ]
    if owner is None:
        for a in arrays[:sets]:
            a[...] = cp.random.standard_normal(n, dtype=cp.float32)
    return owner, arrays[:sets], arrays[sets:]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1 << 24)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument(
        "--sets", type=int, default=1, help="inputs and outputs used in turn (the judge: one a call)"
    )
    parser.add_argument("--sync", action="store_true", help="wait for each call (as the judge's batches do)")
    parser.add_argument(
        "--confine", action="store_true", help="the accused's seccomp filter and memory limit"
    )
    parser.add_argument(
        "--confine-first",
        choices=["all", "seccomp", "limit"],
        help="confined as --confine, but before the buffers are made or mapped (as the accused "
        "maps the judge's): both parts, or only the second seccomp filter, or only the memory limit",
    )
    parser.add_argument(
        "--idle-context",
        action="store_true",
        help="another process holds a CUDA context on the GPU meanwhile, idle (as the judge's is during a request)",
    )
    parser.add_argument(
        "--data",
        choices=["cupy", "cupy-dma", "numpy", "numpy-kernel", "fill", "zeros"],
        default="cupy",
        help="the inputs (cupy buffers only): cupy's normal samples (made there, or copied into fresh memory), "
        "numpy's (copied in, or written by a kernel from a staging copy), 0.75 or 0 everywhere",
    )
    parser.add_argument(
        "--layout",
        choices=["pool", "packed", "skewed"],
        default="pool",
        help="where the buffers are: as --buffers makes them, or views of one allocation (numpy's "
        "samples copied in), each right after the last or with an odd gap between them",
    )
    parser.add_argument(
        "--between",
        choices=["none", "other-tiny", "other-flush", "own-flush"],
        default="none",
        help="GPU work before each timed group of calls, untimed: another process's (a 4 KiB fill, or twice the L2) or this one's",
    )
    parser.add_argument(
        "--buffers",
        choices=["cupy", "vmm", "vmm-other-process"],
        default="cupy",
        help="cudaMalloc'd by cupy; VMM allocations as the judge makes them; or those made by another process and mapped here",
    )
    args = parser.parse_args()
    import cupy as cp

    arch = f"sm_{cp.cuda.Device().compute_capability}"  # "90" on an H100 or H200
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    owner = None
    idle = None
    if args.idle_context:
        idle = subprocess.Popen(
            [sys.executable, "-c", IDLE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert idle.stdout is not None and idle.stdout.readline().strip() == "ready"
    l2_bytes = int(cp.cuda.runtime.getDeviceProperties(0)["l2CacheSize"])
    busy = None
    if args.between.startswith("other"):
        busy = subprocess.Popen(
            [sys.executable, "-c", BUSY, str(2 * l2_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert busy.stdout is not None and busy.stdout.readline().strip() == "ready"
    flush = cp.zeros(2 * l2_bytes // 4, cp.float32) if args.between == "own-flush" else None

    def between() -> None:
        if busy is not None:
            assert busy.stdin is not None and busy.stdout is not None
            busy.stdin.write(("tiny" if args.between == "other-tiny" else "flush") + "\n")
            busy.stdin.flush()
            assert busy.stdout.readline().strip() == "done"
        elif flush is not None:
            flush.fill(1.0)

    if args.confine_first:  # the context is up (cupy's, above); nothing is allocated yet
        from kernel_lsp.fence.sandbox import SandboxReport, close_after_start, limit_memory

        cp.cuda.runtime.deviceSynchronize()
        report = SandboxReport()
        if args.confine_first in ("all", "seccomp"):
            close_after_start(report)
        if args.confine_first in ("all", "limit"):
            limit_memory(report)
        print(f"confined first ({args.confine_first}): {report.to_dict()}")
    if args.layout != "pool":
        xs, ys = laid_out(cp, args.n, args.sets, args.layout == "skewed")
    elif args.buffers != "cupy":
        owner, xs, ys = shared_buffers(cp, args.n, args.sets, args.buffers == "vmm-other-process")
    else:
        xs = [inputs(cp, args.n, args.data, k) for k in range(args.sets)]
        ys = [cp.empty_like(xs[0]) for _ in range(args.sets)]
    x, y = xs[0], ys[0]
    zeros = float(cp.count_nonzero(x == 0)) / x.size
    data_seen = f"set 0: mean {float(x.mean()):.3g}, std {float(x.std()):.3g}, zeros {zeros:.1%}"
    want = x / cp.sqrt(cp.sum(x * x) + 1e-6)
    with tempfile.TemporaryDirectory() as d:
        entries = {k: build(k, p, Path(d), arch) for k, p in FILES.items()}
        if args.confine:  # as the accused is once its GPU is open (runner/accused.main)
            from kernel_lsp.fence.sandbox import SandboxReport, close_after_start, limit_memory

            report = SandboxReport()
            close_after_start(report)
            limit_memory(report)
            print(f"confined: {report.to_dict()}")
        for k, entry in entries.items():  # right first, and warm
            y.fill(0)
            assert entry(x.data.ptr, y.data.ptr, args.n, 1e-6) == 0, k
            cp.cuda.runtime.deviceSynchronize()
            assert float(cp.max(cp.abs(y - want))) < 1e-5, f"{k}: wrong output"
        wall: dict[str, list[float]] = {k: [] for k in entries}
        events: dict[str, list[float]] = {k: [] for k in entries}
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        null = cp.cuda.Stream.null
        for r in range(args.rounds):
            order = list(entries) if r % 2 == 0 else list(reversed(entries))
            for k in order:
                entry = entries[k]
                between()
                cp.cuda.runtime.deviceSynchronize()
                t0 = time.perf_counter()
                start.record(null)
                for i in range(args.calls):
                    entry(xs[i % args.sets].data.ptr, ys[i % args.sets].data.ptr, args.n, 1e-6)
                    if args.sync:
                        cp.cuda.runtime.deviceSynchronize()
                stop.record(null)
                stop.synchronize()
                cp.cuda.runtime.deviceSynchronize()
                wall[k].append((time.perf_counter() - t0) / args.calls)
                events[k].append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / args.calls)
    for child in (owner, idle, busy):
        if child is not None:
            child.stdin.close()
            child.wait(timeout=30)
    print(
        f"device: {name}; n={args.n}; {'confined; ' if args.confine else ''}"
        f"{'confined before the buffers: ' + args.confine_first + '; ' if args.confine_first else ''}"
        f"{'another process holds an idle context; ' if args.idle_context else ''}"
        f"{'before each group: ' + args.between + '; ' if args.between != 'none' else ''}"
        f"buffers: {args.buffers if args.layout == 'pool' else 'one allocation, ' + args.layout}; data: {args.data if args.buffers == 'cupy' and args.layout == 'pool' else 'cupy' if args.layout == 'pool' else 'numpy'}; {args.rounds} rounds of {args.calls} calls a file, interleaved; "
        f"{args.sets} input set(s) in turn ({data_seen}); {'a sync after each call' if args.sync else 'no sync between calls'}"
    )
    print(
        "| file | end to end us (median [min, max]) | kernels only us (events) | end-to-end ratio | events ratio |"
    )
    print("|---|---|---|---|---|")
    base_w, base_e = statistics.median(wall["original"]), statistics.median(events["original"])
    for k in entries:
        w, e = statistics.median(wall[k]), statistics.median(events[k])
        print(
            f"| {k} | {w * 1e6:.1f} [{min(wall[k]) * 1e6:.1f}, {max(wall[k]) * 1e6:.1f}] | {e * 1e6:.1f} "
            f"| {base_w / w:.2f}x | {base_e / e:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
