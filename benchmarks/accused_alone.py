"""What the accused's own setup costs a run, with no judge and no socket: l2_normalize's original
launcher (samples/entries/l2_normalize_coop.cu, built as the judge builds an entry: a shared
library on the shared cudart) called in a child process the way the accused calls it (kernel-lsp's
CudaDevice, the cudart this environment gives, `load_library`, a wait for the whole context after
each call), on `--sets` inputs in turn, in two modes side by side, alternated, and built two
ways (`judge`: as the judge links an entry; `static`: one nvcc step, its static cudart):

- plain: nothing else;
- confined: first the accused's sandbox (`enter_sandbox(cuda_start=True)` before CUDA starts,
  then `close_after_start` and `limit_memory` once it is up), exactly as runner/accused.main.

benchmarks/l2_end_to_end.py times the same launcher in one process on cupy buffers (about 100 us
a call on an H200); a judged run of it took 160-220 us in the accused by its own clock
(the trace it kept then, since removed). `--variants` changes one thing at a time (how the context starts, how
the inputs are allocated and written, the sync call, a busy GPU first, cupy's way in this
harness with the accused's parts added one by one, small allocations held first), and the
launcher says where its scratch landed. On an H200 the cause was the scratch: in a process with
no small allocation alive, the launcher's per-call cudaMalloc/cudaFree mapped a fresh page each
call (`small-512`: 98 us). Every CudaDevice now holds one (section 8 of
benchmarks/results/gpu_h200_2026-11-29.md), so today's plain child is the fast one.

    python3 benchmarks/accused_alone.py [--n 16777216] [--sets 10] [--calls 10] [--rounds 15] [--repeat 3] [--modes plain,confined] [--builds judge,static] [--variants ,cupy-buffers]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "samples/entries/l2_normalize_coop.cu"
MODES = ("plain", "confined")
BUILDS = ("judge", "static")


# Says the launch's grid once (stderr): the launcher sizes it from the occupancy API.
SHOW_GRID = """    static int shown = 0;
    if (!shown++) fprintf(stderr, "grid: sms=%d per_sm=%d blocks=%d\\n", sms, per_sm, blocks);
    float* block_sums = nullptr;"""


# Says where the launcher's block sums landed on its first call (stderr): a 4 KiB cudaMalloc that
# every block then reads whole, one load after another.
SHOW_SCRATCH = """    static int placed = 0;
    if (!placed++) fprintf(stderr, "scratch: %p (+%zu KiB in its 2 MiB page)\\n", (void*)block_sums, ((size_t)block_sums & ((1u << 21) - 1)) >> 10);
    if (err != cudaSuccess) return (int)err;"""


def build(folder: Path, arch: str, how: str) -> None:
    """`folder`/l2.so: as runner/judge's entries are linked (`judge`: cudart none, then the shared
    cudart) or in one nvcc step with its static cudart (`static`, as l2_end_to_end.py builds)."""
    from kernel_lsp.compile.shared_lib import _link

    nvcc = shutil.which("nvcc")
    assert nvcc, "nvcc is not on PATH"
    src, obj, lib = folder / "l2.cu", folder / "l2.o", folder / "l2.so"
    text = SOURCE.read_text().replace(
        "#include <cuda_runtime.h>", "#include <cuda_runtime.h>\n#include <cstdio>"
    )
    text = text.replace("    float* block_sums = nullptr;", SHOW_GRID, 1)
    src.write_text(text.replace("    if (err != cudaSuccess) return (int)err;", SHOW_SCRATCH, 1))
    if how == "static":
        subprocess.run(
            [nvcc, "-O3", f"-arch={arch}", "-shared", "-Xcompiler", "-fPIC", "-o", str(lib), str(src)],
            check=True,
        )
        return
    subprocess.run(
        [nvcc, f"-arch={arch}", "-lineinfo", "-Xcompiler", "-fPIC", "-c", "-o", str(obj), str(src)],
        check=True,
    )
    linked, log = _link(nvcc, [], arch, str(obj), str(lib))  # the judge's own link step
    assert linked, log


def child(mode: str, folder: str, n: int, sets: int, calls: int, rounds: int) -> dict[str, object]:
    report = None
    if mode == "confined":
        from kernel_lsp.fence.sandbox import enter_sandbox

        report = enter_sandbox(folder, "", cuda_start=True)
    import numpy as np

    from kernel_lsp.runner.device import CudaDevice
    from kernel_lsp.runner.entry import load_library, load_runtime

    variant = os.environ.get("ACCUSED_ALONE_VARIANT", "")
    if variant.startswith("cupy-all"):
        return cupy_child(mode, folder, n, sets, calls, rounds, set(variant.split("+")[1:]))
    if variant == "runtime-first":  # the primary context made by cudart, as cupy makes it
        load_runtime().lib.cudaFree(None)
    device = CudaDevice(0)
    if report is not None:
        from kernel_lsp.fence.sandbox import close_after_start, limit_memory

        close_after_start(report)
        limit_memory(report)
    runtime = load_runtime()
    image = Path(folder, "l2.so").read_bytes()
    _library, fn = load_library(image, folder, "l2_normalize", runtime)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_float]
    fn.restype = ctypes.c_int
    rng = np.random.default_rng(7)
    keep = []
    if variant.startswith("small-"):  # small allocations held first: where the launcher's land
        _held_small = [device.alloc(int(variant[6:])) for _ in range(4)]
    if variant == "cupy-buffers":  # allocated and written by cupy, as l2_end_to_end.py's are
        import cupy as cp

        keep = [cp.random.standard_normal(n, dtype=cp.float32) for _ in range(sets)]
        keep += [cp.empty(n, cp.float32) for _ in range(sets)]
        xs = [int(a.data.ptr) for a in keep[:sets]]
        ys = [int(a.data.ptr) for a in keep[sets:]]
    elif variant == "cupy-alloc-upload":  # cupy's allocations, written by copies from the host
        import cupy as cp

        keep = [cp.empty(n, cp.float32) for _ in range(2 * sets)]
        xs = [int(a.data.ptr) for a in keep[:sets]]
        ys = [int(a.data.ptr) for a in keep[sets:]]
        for x in xs:
            device.upload(x, rng.standard_normal(n, dtype=np.float32))
    elif variant == "xs-first":  # the inputs allocated together, then the outputs (as cupy's were)
        xs = [device.alloc(4 * n) for _ in range(sets)]
        ys = [device.alloc(4 * n) for _ in range(sets)]
    else:
        xs, ys = [], []
        for _ in range(sets):
            xs.append(device.alloc(4 * n))
            ys.append(device.alloc(4 * n))
    for x in xs if not keep else []:
        host = rng.standard_normal(n, dtype=np.float32)
        if variant == "device-data":  # written on the device, not copied from the host
            device.fill(x, 0x3F, 4 * n)
        elif variant == "upload-sync":  # the synchronous copy, no stream
            device._ck(device.d.cuMemcpyHtoD(x, host.ctypes.data, 4 * n))
        elif variant == "upload-pinned":  # from page-locked host memory
            pinned = device._ck(device.d.cuMemAllocHost(4 * n))
            ctypes.memmove(int(pinned), host.ctypes.data, 4 * n)
            device._ck(device.d.cuMemcpyHtoDAsync(x, pinned, 4 * n, device.stream))
            device.sync()
            device._ck(device.d.cuMemFreeHost(pinned))
        elif variant == "upload-dtod":  # copied in to a staging buffer, then device to device
            staging = device.alloc(4 * n)
            device.upload(staging, host)
            device._ck(device.d.cuMemcpyDtoD(x, staging, 4 * n))
            device.free(staging)
        elif variant == "upload-cupy":  # the runtime's copy, as cupy makes it
            import cupy as cp

            cp.cuda.runtime.memcpy(x, host.ctypes.data, 4 * n, cp.cuda.runtime.memcpyHostToDevice)
        else:
            device.upload(x, host)
    if variant == "upload-then-kernel":  # copied from the host, then rewritten by a kernel
        import cupy as cp

        for x in xs:
            view = cp.ndarray(
                (n,), cp.float32, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(x, 4 * n, None), 0)
            )
            view *= 1.0
        cp.cuda.runtime.deviceSynchronize()
    for x, y in zip(xs, ys, strict=True):  # warm: every set once
        assert fn(x, y, n, 1e-6) == 0
    device.sync_all()
    sync = runtime.lib.cudaDeviceSynchronize if variant == "cuda-sync" else device.sync_all
    if variant.startswith("busy-"):  # the GPU kept busy this long first (its clocks up)
        until = time.perf_counter() + float(variant[5:])
        while time.perf_counter() < until:
            fn(xs[0], ys[0], n, 1e-6)
            sync()
    d = device.d  # CUDA events on the legacy stream around each round: the GPU's own time
    legacy = d.CUstream(d.CU_STREAM_LEGACY)
    start, stop = device._ck(d.cuEventCreate(0)), device._ck(d.cuEventCreate(0))
    per_call: list[float] = []
    on_gpu: list[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        device._ck(d.cuEventRecord(start, legacy))
        for i in range(calls):
            fn(xs[i % sets], ys[i % sets], n, 1e-6)
            sync()
        device._ck(d.cuEventRecord(stop, legacy))
        device._ck(d.cuEventSynchronize(stop))
        per_call.append((time.perf_counter() - t0) / calls)
        on_gpu.append(float(device._ck(d.cuEventElapsedTime(start, stop))) / 1e3 / calls)
    return child_figures(mode, per_call, on_gpu, report.to_dict() if report is not None else None)


def child_figures(
    mode: str, per_call: list[float], on_gpu: list[float], sandbox: dict[str, object] | None
) -> dict[str, object]:
    """A child's answer: its rounds' seconds a call, by the host clock and by events, in us."""
    return {
        "mode": mode,
        "median_us": statistics.median(per_call) * 1e6,
        "min_us": min(per_call) * 1e6,
        "max_us": max(per_call) * 1e6,
        "events_us": statistics.median(on_gpu) * 1e6,
        "sandbox": sandbox,
    }


def cupy_child(
    mode: str, folder: str, n: int, sets: int, calls: int, rounds: int, add: set[str]
) -> dict[str, object]:
    """l2_end_to_end.py's way in this harness (`cupy-all`): cupy's context and allocations,
    numpy's samples copied in by cupy, the library by ctypes.CDLL, cupy's device sync; then one
    of the accused's parts added at a time (`+dev`: a CudaDevice, `+rt`: load_runtime, `+loadlib`:
    load_library, `+devsync`: the device's context sync, `+devupload`: the driver's uploads,
    `+devalloc`: the driver's allocations), to find the one that costs the original its time.
    On an H200 none did: cupy's first small allocation was what this harness had and the
    accused lacked (section 8 of benchmarks/results/gpu_h200_2026-11-29.md)."""
    import cupy as cp
    import numpy as np

    from kernel_lsp.runner.device import CudaDevice
    from kernel_lsp.runner.entry import load_library, load_runtime

    keep = cp.zeros(1, cp.float32)  # cupy's context first, as in l2_end_to_end.py
    device = CudaDevice(0) if "dev" in add else None
    runtime = load_runtime() if "rt" in add else None
    if "loadlib" in add:
        _library, fn = load_library(Path(folder, "l2.so").read_bytes(), folder, "l2_normalize", runtime)
    else:
        fn = ctypes.CDLL(str(Path(folder, "l2.so"))).l2_normalize
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_float]
    fn.restype = ctypes.c_int
    hosts = [np.random.default_rng(k).standard_normal(n, dtype=np.float32) for k in range(sets)]
    if "devalloc" in add:  # the driver's allocations (CudaDevice.alloc), cupy's copies into them
        dev = device or CudaDevice(0)
        owned = [dev.alloc(4 * n) for _ in range(2 * sets)]

        def view(ptr: int):
            return cp.ndarray(
                (n,), cp.float32, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(ptr, 4 * n, None), 0)
            )

        xs, ys = [view(p) for p in owned[:sets]], [view(p) for p in owned[sets:]]
        for x, h in zip(xs, hosts, strict=True):
            x.set(h)
    elif "devupload" in add:  # cupy's allocations, the driver's copies (CudaDevice.upload)
        dev = device or CudaDevice(0)
        xs, ys = (
            [cp.empty(n, cp.float32) for _ in range(sets)],
            [cp.empty(n, cp.float32) for _ in range(sets)],
        )
        for x, h in zip(xs, hosts, strict=True):
            dev.upload(x.data.ptr, h)
    else:
        xs = [cp.asarray(h) for h in hosts]
        ys = [cp.empty(n, cp.float32) for _ in range(sets)]
    sync = device.sync_all if device is not None and "devsync" in add else cp.cuda.runtime.deviceSynchronize
    for x, y in zip(xs, ys, strict=True):
        assert fn(x.data.ptr, y.data.ptr, n, 1e-6) == 0
    sync()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    per_call: list[float] = []
    on_gpu: list[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        start.record(cp.cuda.Stream.null)
        for i in range(calls):
            fn(xs[i % sets].data.ptr, ys[i % sets].data.ptr, n, 1e-6)
            sync()
        stop.record(cp.cuda.Stream.null)
        stop.synchronize()
        per_call.append((time.perf_counter() - t0) / calls)
        on_gpu.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / calls)
    del keep
    return child_figures(mode, per_call, on_gpu, None)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1 << 24)
    parser.add_argument("--sets", type=int, default=10)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES), help="plain,confined")
    parser.add_argument("--builds", default=",".join(BUILDS), help="judge,static")
    parser.add_argument(
        "--variants",
        default="",
        help="comma-separated, '' the accused's way: runtime-first, xs-first, device-data, cuda-sync, busy-SECONDS, cupy-buffers, cupy-all[+dev][+rt][+loadlib][+devsync]",
    )
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.folder, args.n, args.sets, args.calls, args.rounds)))
        return 0
    from kernel_lsp.runner.device import CudaDevice

    info = CudaDevice(0).info()  # this process's context stays, idle (as the judge's does)
    arch, name = str(info["arch"]), str(info["name"])
    kinds = [
        (m, b, v)
        for v in args.variants.split(",")
        for b in args.builds.split(",")
        for m in args.modes.split(",")
    ]
    results: dict[tuple[str, str, str], list[dict[str, object]]] = {k: [] for k in kinds}
    grids: dict[tuple[str, str, str], set[str]] = {k: set() for k in kinds}
    with tempfile.TemporaryDirectory(prefix="klsp-accused-alone-") as d:
        for b in {b for _m, b, _v in kinds}:
            Path(d, b).mkdir()
            build(Path(d, b), arch, b)
        for _ in range(args.repeat):
            for mode, how, variant in kinds:
                folder = tempfile.mkdtemp(prefix=f"klsp-{mode}-")
                shutil.copy(Path(d, how, "l2.so"), Path(folder, "l2.so"))
                env = dict(os.environ, HOME=folder, TMPDIR=folder, ACCUSED_ALONE_VARIANT=variant)
                argv = [sys.executable, __file__, "--child", mode, "--folder", folder, "--n", str(args.n)]
                argv += ["--sets", str(args.sets), "--calls", str(args.calls), "--rounds", str(args.rounds)]
                proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
                shutil.rmtree(folder, ignore_errors=True)
                lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
                if proc.returncode != 0 or not lines:
                    print(f"{mode}: exit {proc.returncode}: {proc.stderr.strip()[-600:]}")
                    continue
                got = json.loads(lines[-1])
                got["scratch"] = next(
                    (ln[9:] for ln in proc.stderr.splitlines() if ln.startswith("scratch:")), ""
                )
                results[mode, how, variant].append(got)
                grids[mode, how, variant].update(
                    ln for ln in proc.stderr.splitlines() if ln.startswith("grid:")
                )
    print(
        f"device: {name}; {arch}; l2_normalize n={args.n}; {args.sets} sets in turn, {args.calls} calls "
        f"a round, a context sync after each, {args.rounds} rounds; modes alternated {args.repeat} times"
    )
    print("| mode | build | variant | median us a call (per child) | min | max | launch |")
    print("|---|---|---|---|---|---|---|")
    for (mode, how, variant), got in results.items():
        if got:
            medians = ", ".join(
                f"{float(g['median_us']):.1f} (events {float(g['events_us']):.1f}; scratch {g['scratch']})"  # type: ignore[arg-type]
                for g in got
            )
            low = min(float(g["min_us"]) for g in got)  # type: ignore[arg-type]
            high = max(float(g["max_us"]) for g in got)  # type: ignore[arg-type]
            grid = "; ".join(sorted(grids[mode, how, variant]))
            print(f"| {mode} | {how} | {variant or '-'} | {medians} | {low:.1f} | {high:.1f} | {grid} |")
    confined = next(
        (g["sandbox"] for (m, _b, _v), got in results.items() if m == "confined" for g in got), None
    )
    if confined:
        print(f"confined as: {confined}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
