"""Workspace watching, measured through the real server (a subprocess driven over stdio):

1. latency from a file written on disk to the publishDiagnostics that reflects it, for a `.cu`
   and for a header (published on the `.cu` that includes it); median and p95 over N writes,
   each write unique so no compile cache answers;
2. CPU used by the idle server (and its compile workers) while it watches a tree of 10,000 files:
   utime + stime from /proc before and after an idle window;
3. a `git checkout`-like burst: 500 files rewritten at once; batches, compiles and the time until
   every file's diagnostics are out.

    .venv/bin/python benchmarks/watch.py [--writes 25] [--idle 10] [--tree 10000] [--burst 500]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kernel_lsp.server.uris import path_to_uri  # noqa: E402

HEADER = "__device__ float scale(float x) {{ return {k}.0f * x; }}\n"
KERNEL = '#include "h.cuh"\n// version {i}\n__global__ void k(float* x) {{ x[threadIdx.x] = scale(x[threadIdx.x]){tail}; }}\n'
TREE_FILE = "__global__ void k{i}(float* x) {{ x[threadIdx.x] += {i}; }}\n"


class Bench:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.client = LanguageClient("kernel-lsp-bench", "1")
        self.published: dict[str, list[tuple[float, list[types.Diagnostic]]]] = {}
        published = self.published

        # pygls tags handlers with attributes: plain functions, not bound methods.
        def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
            published.setdefault(params.uri, []).append((time.monotonic(), list(params.diagnostics)))

        def ignore(params) -> None:
            pass

        self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)(on_diagnostics)
        self.client.feature("kernelLsp/status")(ignore)

    async def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        await self.client.start_io(sys.executable, "-m", "kernel_lsp", "--log-level", "WARNING", env=env)
        uri = path_to_uri(str(self.root))
        await self.client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(),
                root_uri=uri,
                workspace_folders=[types.WorkspaceFolder(uri=uri, name="bench")],
            )
        )
        self.client.initialized(types.InitializedParams())

    async def stats(self, method: str = "kernelLsp/watchStats") -> dict:
        r = await self.client.protocol.send_request_async(method, None)
        return r._asdict() if hasattr(r, "_asdict") else dict(r)

    async def ready(self, timeout: float = 300.0) -> float:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if (await self.stats())["folders"]:
                return time.monotonic() - t0
            await asyncio.sleep(0.05)
        raise RuntimeError("the server never started watching")

    async def published_after(self, path: Path, t0: float, want_error: bool, timeout: float = 60.0) -> float:
        uri = path_to_uri(str(path))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, diags in self.published.get(uri, ()):
                has_error = any(d.severity == types.DiagnosticSeverity.Error for d in diags)
                if t >= t0 and has_error == want_error:
                    return t - t0
            await asyncio.sleep(0.002)
        raise RuntimeError(f"no diagnostics for {path} within {timeout} s")

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` and its live children, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ppid, utime, stime = int(fields[1]), int(fields[11]), int(fields[12])
        if int(entry) == pid or ppid == pid:
            total += (utime + stime) / tick
    return total


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


async def latency(writes: int) -> list[tuple[str, str]]:
    root = Path(tempfile.mkdtemp(prefix="kernel-lsp-bench-latency-"))
    try:
        header, main = root / "h.cuh", root / "main.cu"
        header.write_text(HEADER.format(k=1))
        main.write_text(KERNEL.format(i=0, tail=""))
        bench = Bench(root)
        await bench.start()
        await bench.ready()
        await bench.published_after(main, 0.0, want_error=False)  # the start-up check
        await asyncio.sleep(1.0)
        cu_times, header_times = [], []
        for i in range(1, writes + 1):
            error = i % 2 == 1
            t0 = time.monotonic()
            main.write_text(KERNEL.format(i=i, tail=" + broken_here" if error else ""))
            cu_times.append(await bench.published_after(main, t0, want_error=error))
            await asyncio.sleep(0.3)
        main.write_text(KERNEL.format(i=writes + 1, tail=""))
        await asyncio.sleep(1.0)
        for i in range(1, writes + 1):
            error = i % 2 == 1
            t0 = time.monotonic()
            header.write_text(HEADER.format(k=f"{i} + broken" if error else i))
            header_times.append(await bench.published_after(main, t0, want_error=error))
            await asyncio.sleep(0.3)
        compiles = (await bench.stats())["compiles"]
        await bench.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = []
    for name, ts in (
        (".cu written -> its diagnostics", cu_times),
        (".cuh written -> includer's", header_times),
    ):
        rows.append(
            (
                name,
                f"median {statistics.median(ts) * 1000:.0f} ms, p95 {pct(ts, 0.95) * 1000:.0f} ms, "
                f"min {min(ts) * 1000:.0f} ms, max {max(ts) * 1000:.0f} ms (n={len(ts)})",
            )
        )
    rows.append(
        (
            "compiles for those writes",
            f"{compiles} (2 files at start-up; a header write compiles it and its includer)",
        )
    )
    return rows


async def idle_and_burst(files: int, idle_s: float, burst: int) -> list[tuple[str, str]]:
    root = Path(tempfile.mkdtemp(prefix="kernel-lsp-bench-tree-"))
    try:
        per_dir = 100
        paths = []
        for i in range(files):
            d = root / f"d{i // per_dir:03d}"
            if i % per_dir == 0:
                d.mkdir()
            p = d / (f"f{i:05d}.cu" if i % 10 else f"f{i:05d}.cuh")
            p.write_text(TREE_FILE.format(i=i))
            paths.append(p)
        bench = Bench(root)
        t_start = time.monotonic()
        await bench.start()
        ready_s = await bench.ready() + 0.0
        startup_s = time.monotonic() - t_start
        pid = (await bench.stats("kernelLsp/stats"))["pid"]
        await asyncio.sleep(3.0)  # workers warmed up, start-up walk done
        c0, t0 = cpu_seconds(pid), time.monotonic()
        await asyncio.sleep(idle_s)
        c1, t1 = cpu_seconds(pid), time.monotonic()
        idle_cpu = c1 - c0
        before = await bench.stats()
        # A checkout: `burst` files rewritten at once, one in ten with an error.
        targets = [p for p in paths if p.suffix == ".cu"][:burst]
        tb = time.monotonic()
        for j, p in enumerate(targets):
            p.write_text(
                TREE_FILE.format(i=j) + ("__device__ int bad() { return nope; }\n" if j % 10 == 0 else "")
            )
        for j, p in enumerate(targets):
            await bench.published_after(p, tb, want_error=j % 10 == 0, timeout=600)
        burst_s = time.monotonic() - tb
        after = await bench.stats()
        await bench.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return [
        (
            f"watch start-up, {files} files",
            f"{startup_s:.2f} s to initialize + walk ({ready_s:.2f} s after initialized)",
        ),
        (
            f"idle server CPU over {t1 - t0:.1f} s",
            f"{idle_cpu:.3f} CPU s ({100 * idle_cpu / (t1 - t0):.2f} % of one core), server + workers",
        ),
        (
            f"checkout burst: {len(targets)} files rewritten",
            f"{after['batches'] - before['batches']} batch(es), {after['compiles'] - before['compiles']} compiles, "
            f"all diagnostics out in {burst_s:.1f} s",
        ),
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--writes", type=int, default=25)
    p.add_argument("--idle", type=float, default=10.0)
    p.add_argument("--tree", type=int, default=10_000)
    p.add_argument("--burst", type=int, default=500)
    args = p.parse_args()
    rows = asyncio.run(latency(args.writes))
    rows += asyncio.run(idle_and_burst(args.tree, args.idle, args.burst))
    width = max(len(r[0]) for r in rows)
    print(f"kernel-lsp workspace watching ({os.cpu_count()} CPUs, debounce 200 ms)")
    print(f"{'measure'.ljust(width)} | result")
    print(f"{'-' * width}-+-{'-' * 60}")
    for name, value in rows:
        print(f"{name.ljust(width)} | {value}")


if __name__ == "__main__":
    main()
