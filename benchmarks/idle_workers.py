"""What ending idle compile workers saves (memory) and costs (the next diagnostic's latency),
through the real server.

The server runs with `workerIdleSeconds: 1`. Each round: wait until the workers have ended, save
a changed file (a cold check: the pool starts again, NVRTC loads), then save another change at
once (a warm check). Memory is the RSS of the server plus its child processes, with the workers
running and after they ended.

    .venv/bin/python benchmarks/idle_workers.py [--rounds 8] [--file samples/vector_add/vector_add_fp32.cu]
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


def rss_mib(pid: int) -> float:
    """RSS of `pid` and its descendants, MiB."""
    from kernel_lsp.procs import descendants

    total = 0
    for p in descendants(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += next(int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total / 1024


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.3f} | {min(values):.3f}-{max(values):.3f} | {len(values)}"


async def run(rounds: int, sample: Path) -> None:
    client = LanguageClient("kernel-lsp-idle-bench", "1")
    published: dict[str, tuple[int | None, float]] = {}
    arrived = asyncio.Event()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_publish(params: types.PublishDiagnosticsParams) -> None:
        published[params.uri] = (params.version, time.perf_counter())
        arrived.set()

    @client.feature("kernelLsp/status")
    def on_status(params) -> None:
        pass

    async def stats():
        return await client.protocol.send_request_async("kernelLsp/stats", None)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / sample.name
        shutil.copy(sample, path)
        base = path.read_text()
        uri = path.as_uri()
        await client.start_io(
            sys.executable,
            "-m",
            "kernel_lsp",
            "--log-level",
            "WARNING",
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
        await client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(),
                root_uri=root.as_uri(),
                initialization_options={"arch": ["sm_90"], "gpu": {"enabled": False}, "workerIdleSeconds": 1},
            )
        )
        client.initialized(types.InitializedParams())
        pid = client._server.pid
        version = 1
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="cuda", version=version, text=base)
            )
        )

        async def save_and_wait() -> float:
            nonlocal version
            version += 1
            text = base + f"// round {version}\n"
            path.write_text(text)
            arrived.clear()
            t0 = time.perf_counter()
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(version=version, uri=uri),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
                )
            )
            client.text_document_did_save(
                types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
            )
            while published.get(uri, (None, 0.0))[0] != version:
                await asyncio.wait_for(arrived.wait(), 60)
                arrived.clear()
            return published[uri][1] - t0

        cold, warm, rss_warm, rss_idle = [], [], [], []
        await save_and_wait()
        for _ in range(rounds):
            rss_warm.append(rss_mib(pid))
            while (await stats()).workersRunning:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # the terminated workers leave the process table
            rss_idle.append(rss_mib(pid))
            cold.append(await save_and_wait())
            warm.append(await save_and_wait())
        stops = (await stats()).idleStops
        await asyncio.wait_for(client.shutdown_async(None), 10)
        client.exit(None)
        await client.stop()

    print(f"{sample.relative_to(REPO)}, sm_90, workerIdleSeconds=1, {stops} idle stops\n")
    print("| save -> publishDiagnostics      | median s | min-max | n |")
    print("|---|---|---|---|")
    print(f"| workers running (warm)          | {spread(warm)} |")
    print(f"| first check after an idle stop  | {spread(cold)} |")
    print("\n| RSS, server + children          | median MiB | min-max | n |")
    print("|---|---|---|---|")
    print(f"| workers running                 | {spread(rss_warm)} |")
    print(f"| workers ended                   | {spread(rss_idle)} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--file", default=str(REPO / "samples" / "vector_add" / "vector_add_fp32.cu"))
    args = parser.parse_args()
    asyncio.run(run(args.rounds, Path(args.file).resolve()))


if __name__ == "__main__":
    main()
