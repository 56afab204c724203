"""How long an editor waits for the server: from spawning `kernel-lsp` to its `initialize` answer.

Each run spawns the server as editors do (the `kernel-lsp` script next to this interpreter, else
`python -m kernel_lsp`), writes `initialize` at once (an editor does not wait before writing it),
and times the answer; then `shutdown` and `exit`. Plain JSON-RPC over the pipes: no client library
is imported in the timed part. Prints each run, the median and the spread.

    .venv/bin/python benchmarks/startup.py [--runs 5] [--no-clangd]

The settings are the defaults but `gpu.enabled: false` (the GPU probe runs after `initialized`
either way); `--no-clangd` turns clangd off too (clangd itself starts after `initialized`).
Target (issue 33): median <= 0.2 s on a 2-core machine. Printed: the first start (no answer
saved yet: the server loads pygls and answers), later starts (answered early from the saved
answer, kernel_lsp/early_initialize.py), starts in a folder never opened before (each its own
new folder, with the answer the first start saved in another: issue 45), and starts with the
early answer turned off.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_message(stream) -> dict:
    length = None
    while True:
        line = stream.readline()
        if not line:
            raise EOFError("the server closed stdout")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    assert length is not None
    return json.loads(stream.read(length))


def server_command() -> list[str]:
    script = Path(sys.executable).with_name("kernel-lsp")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "kernel_lsp"]


def one_start(root: str, clangd: bool, **extra: str) -> float:
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **extra)
    options = {"gpu": {"enabled": False}, "clangd": {"enabled": clangd}}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "processId": os.getpid(),
            "rootUri": Path(root).as_uri(),
            "capabilities": {},
            "initializationOptions": options,
        },
    }
    started = time.perf_counter()
    proc = subprocess.Popen(
        server_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write(frame(initialize))
    proc.stdin.flush()
    while True:
        message = read_message(proc.stdout)
        if message.get("id") == 1:  # window/logMessage and the like may come before it
            break
    elapsed = time.perf_counter() - started
    assert "result" in message, message
    proc.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
    proc.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
    proc.stdin.flush()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return elapsed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--no-clangd", action="store_true", help="clangd.enabled: false")
    args = p.parse_args()
    root = tempfile.mkdtemp(prefix="kernel-lsp-startup-")
    clangd = not args.no_clangd
    # A cache of its own: the first start below is a first start (early_initialize.py).
    cache = {"XDG_CACHE_HOME": os.path.join(root, "cache")}
    try:
        one_start(root, clangd, KERNEL_LSP_EARLY_INITIALIZE="0")  # warms the page cache: not counted
        first = one_start(root, clangd, **cache)  # nothing saved yet: the server answers
        times = [one_start(root, clangd, **cache) for _ in range(args.runs)]
        new_folders = [one_start(tempfile.mkdtemp(dir=root), clangd, **cache) for _ in range(args.runs)]
        late = [one_start(root, clangd, KERNEL_LSP_EARLY_INITIALIZE="0") for _ in range(args.runs)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("server:", " ".join(server_command()))
    print(f"load {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    print(f"first start (no saved answer; the server answers after loading pygls): {first * 1e3:.0f} ms")
    for label, runs in (
        ("later starts (answered early)", times),
        ("a folder never opened before", new_folders),
        ("KERNEL_LSP_EARLY_INITIALIZE=0", late),
    ):
        print(
            f"{label}: median {statistics.median(runs) * 1e3:.0f} ms "
            f"(min {min(runs) * 1e3:.0f}, max {max(runs) * 1e3:.0f}) over {len(runs)} starts; "
            f"runs {' '.join(f'{t * 1e3:.0f}' for t in runs)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
