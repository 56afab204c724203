"""The fault table of issue 23: for each bad input or fault, the time until kernel-lsp gives a clear
message (or ends, for a broken stream), the peak RSS of its whole process tree meanwhile, and the
message. `--before DIR` runs the cases that are safe to run on a shared machine against another
checkout (DIR/kernel_lsp) too, side by side, each capped at `--cap` seconds; the memory cases are
not run there (`-include /dev/zero` grew cc1plus to 24 GB).

    python benchmarks/faults.py [--before /path/to/old/checkout] [--cap 30] [--db-entries 300000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fault_inputs import (  # noqa: E402
    KERNEL,
    MACRO_BOMB,
    MEMORY_BOMB,
    NUL_AFTER_8K,
    SLEEPING_SPEC,
    alive,
    descendants,
    wait_gone,
)

HOST_CODE = "#include <cstdio>\n" + KERNEL + 'int main() { printf("hi\\n"); return 0; }\n'


# --- measuring ----------------------------------------------------------------------------------


def tree_rss_mib(pid: int) -> float:
    total = 0
    for p in {pid} | descendants(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += next(int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total / 1024


class PeakRss:
    """Samples the RSS of a process tree every 50 ms until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss_mib(self.pid))
            self._stop.wait(0.05)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


@dataclass
class Row:
    case: str
    seconds: float | None  # None: no message within the cap
    peak_mib: float
    message: str


def check_cli(root: Path, code: Path, args: list[str], cap: float, env: dict | None = None) -> Row:
    """`kernel-lsp --check` in `root` with the kernel_lsp of `code`: time, peak RSS, first line."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_lsp", "--check", "--no-gpu", "--arch", "sm_90", *args],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(code), **(env or {})},
        start_new_session=True,
    )
    rss = PeakRss(proc.pid)
    try:
        out, err = proc.communicate(timeout=cap)
        seconds: float | None = time.perf_counter() - start
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        seconds = None
    peak = rss.stop()
    lines = [ln for ln in (out + err).splitlines() if ln and not ln.startswith("checked ")]
    text = lines[0] if lines else (out + err).strip()
    return Row("", seconds, peak, text if seconds is not None else f"nothing after {cap:.0f} s (killed)")


# --- a raw LSP client -------------------------------------------------------------------------


class Server:
    def __init__(self, code: Path, cwd: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernel_lsp", *args],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(code)},
        )
        self.messages: queue.Queue[tuple[float, dict]] = queue.Queue()
        self._id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while (line := out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line or length is None:
                return
            m = json.loads(out.read(length))
            if "method" in m and "id" in m:
                self.send({"jsonrpc": "2.0", "id": m["id"], "result": None})
            self.messages.put((time.perf_counter(), m))

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass

    def send(self, m: dict) -> None:
        body = json.dumps(m).encode()
        self.send_raw(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def request(self, method: str, params, timeout: float) -> dict | None:
        self._id += 1
        self.send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        return self.wait(lambda m: m.get("id") == self._id and "method" not in m, timeout)

    def wait(self, match: Callable[[dict], bool], timeout: float) -> dict | None:
        deadline = time.perf_counter() + timeout
        while (left := deadline - time.perf_counter()) > 0:
            try:
                _, m = self.messages.get(timeout=min(left, 0.1))
            except queue.Empty:
                continue
            if match(m):
                return m
        return None

    def initialize(self, root: Path, options: dict | None = None) -> None:
        params = {
            "processId": os.getpid(),
            "rootUri": root.as_uri(),
            "capabilities": {},
            "initializationOptions": {"arch": ["sm_90"], "gpu": {"enabled": False}, **(options or {})},
        }
        self.request("initialize", params, 60)
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def open(self, path: Path) -> str:
        uri = path.resolve().as_uri()
        item = {"uri": uri, "languageId": "cuda", "version": 1, "text": path.read_text(errors="replace")}
        self.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}})
        return uri

    def diagnostics(self, uri: str, timeout: float) -> dict | None:
        return self.wait(
            lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri,
            timeout,
        )

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def first_message(m: dict | None) -> str:
    ds = (m or {}).get("params", {}).get("diagnostics") or []
    return ds[0]["message"] if ds else "(no diagnostic)"


# --- the cases ----------------------------------------------------------------------------------


def cli_cases(work: Path, code: Path, cap: float, old: bool) -> list[Row]:
    """`old`: the checkout before issue 23 (no `--specs`; only the cases safe on a shared machine)."""
    rows = []

    def case(name: str, files: dict[str, str | bytes], args: list[str], env: dict | None = None) -> None:
        root = work / name.replace(" ", "_").replace("/", "_")
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        for rel, content in files.items():
            p = root / rel
            if content == "FIFO":
                os.mkfifo(p)
            elif content == "SPARSE":
                with open(p, "wb") as f:
                    f.truncate(2 * 2**30)
            elif isinstance(content, bytes):
                p.write_bytes(content)
            else:
                p.write_text(content)
        row = check_cli(root, code, args, cap, env)
        row.case = name
        rows.append(row)

    db = lambda cmd: json.dumps([{"directory": ".", "file": "f.cu", "command": cmd}])  # noqa: E731
    case("NUL after 8 KiB (--check)", {"f.cu": NUL_AFTER_8K}, ["f.cu"])
    case("#include of a FIFO (--check)", {"f.cu": '#include "p.cuh"\n' + KERNEL, "p.cuh": "FIFO"}, ["f.cu"])
    case(
        "@/dev/zero response file",
        {"f.cu": KERNEL, "compile_commands.json": db("nvcc @/dev/zero -c f.cu")},
        ["f.cu"],
    )
    case(
        "macro bomb, no spec (timeout 5 s)",
        {"f.cu": MACRO_BOMB},
        ["f.cu"],
        {"KERNEL_LSP_JOB_TIMEOUT_S": "5"},
    )
    case(
        "spec that never returns (timeout 5 s)",
        {"f.cu": KERNEL, "f.spec.py": "while True:\n    pass\n"},
        ["f.cu"] if old else ["--specs", "run", "f.cu"],
        {"KERNEL_LSP_JOB_TIMEOUT_S": "5"},
    )
    if not old:
        case(
            "-include /dev/zero (compile_commands)",
            {"f.cu": HOST_CODE, "compile_commands.json": db("nvcc -include /dev/zero -c f.cu")},
            ["f.cu"],
        )
        case("2 GiB sparse header", {"f.cu": '#include "big.cuh"\n' + KERNEL, "big.cuh": "SPARSE"}, ["f.cu"])
        case(
            "1 GiB device array (memory limit 512 MiB)",
            {"f.cu": MEMORY_BOMB},
            ["f.cu"],
            {"KERNEL_LSP_COMPILE_MEMORY_MB": "512"},
        )
        case(
            "2 GiB sparse compile_commands.json",
            {"f.cu": KERNEL, "compile_commands.json": "SPARSE"},
            ["f.cu"],
        )
    return rows


def server_cases(work: Path, code: Path, cap: float, db_entries: int) -> list[Row]:
    rows: list[Row] = []

    # A FIFO named .cuh in the workspace: the start, the file's message, and the exit.
    root = work / "fifo_workspace"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "ok.cu").write_text(KERNEL)
    os.mkfifo(root / "pipe.cuh")
    s = Server(code, root)
    rss = PeakRss(s.proc.pid)
    t = time.perf_counter()
    s.initialize(root)
    m = s.diagnostics((root / "pipe.cuh").resolve().as_uri(), cap)
    shown = time.perf_counter() - t if m else None
    s.request("shutdown", None, 10)
    s.send({"jsonrpc": "2.0", "method": "exit"})
    try:
        s.proc.wait(cap)
        exit_note = f"; exited {time.perf_counter() - t:.1f} s after start"
    except subprocess.TimeoutExpired:
        exit_note = f"; did not exit within {cap:.0f} s of exit"
    rows.append(Row("FIFO named *.cuh at start (server)", shown, rss.stop(), first_message(m) + exit_note))
    s.close()

    # Framing errors and bad params.
    for name, frame in (
        ("Content-Length: abc", b"Content-Length: abc\r\n\r\n{}"),
        ("no Content-Length", b"X: 1\r\n\r\n{}"),
    ):
        s = Server(code, work)
        s.initialize(work)
        t = time.perf_counter()
        s.send_raw(frame)
        try:
            s.proc.wait(cap)
            row = Row(
                f"framing error: {name}", time.perf_counter() - t, 0.0, f"exit code {s.proc.returncode}"
            )
        except subprocess.TimeoutExpired:
            ok = s.request("kernelLsp/stats", None, 5)
            row = Row(
                f"framing error: {name}",
                None,
                0.0,
                "still running; " + ("answers" if ok else "never answers"),
            )
        rows.append(row)
        s.close()
    s = Server(code, work)
    s.initialize(work)
    t = time.perf_counter()
    reply = s.request("textDocument/hover", "a string", cap)
    rows.append(
        Row(
            "hover with a string for params",
            time.perf_counter() - t if reply else None,
            0.0,
            json.dumps(reply.get("error"))[:90] if reply else "no reply",
        )
    )
    s.close()

    # kill -9 with a spec that started `sleep 300`.
    root = work / "orphans"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "k.cu").write_text(KERNEL)
    (root / "k.spec.py").write_text(SLEEPING_SPEC)
    s = Server(code, root)
    s.initialize(root)
    s.open(root / "k.cu")  # the user's action: its spec runs
    deadline = time.monotonic() + cap
    while not (root / "sleep.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    tree = descendants(s.proc.pid)
    peak = tree_rss_mib(s.proc.pid)
    t = time.perf_counter()
    s.proc.send_signal(signal.SIGKILL)
    left = wait_gone(tree, cap)
    took = time.perf_counter() - t
    rows.append(
        Row(
            f"kill -9 server ({len(tree)} descendants, a spec's sleep)",
            took if not left else None,
            peak,
            "all gone" if not left else f"{len(left)} still running ({tree_rss_mib_sum(left):.0f} MiB)",
        )
    )
    for p in left:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)
    s.close()

    # A large compile_commands.json: the longest wait for an answer while it loads.
    root = work / "big_database"
    shutil.rmtree(root, ignore_errors=True)
    (root / "src").mkdir(parents=True)
    (root / "src" / "k.cu").write_text(KERNEL)
    command = (
        "/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DPROJ_VERSION=3 -DMODULE_{1} -I{0}/include "
        "-I{0}/src/mod{1} -isystem /usr/local/cuda/include -O3 -std=c++17 "
        "--generate-code=arch=compute_90,code=[compute_90,sm_90] -Xcompiler=-fPIC -o f{2}.o -c {0}/src/mod{1}/f{2}.cu"
    )
    with open(root / "compile_commands.json", "w") as f:
        f.write("[")
        for i in range(db_entries):
            e = {
                "directory": str(root),
                "command": command.format(root, i % 300, i),
                "file": f"src/mod{i % 300}/f{i}.cu",
            }
            f.write(("," if i else "") + json.dumps(e))
        f.write("]")
    size_mb = (root / "compile_commands.json").stat().st_size / 1e6
    s = Server(code, root)
    s.initialize(root, {"compileCommandsMaxBytes": 1 << 30})
    s.request("kernelLsp/stats", None, 60)
    rss = PeakRss(s.proc.pid)
    t = time.perf_counter()
    uri = s.open(root / "src" / "k.cu")
    worst = 0.0
    m = None
    while time.perf_counter() - t < max(cap, 120):
        q = time.perf_counter()
        s._id += 1
        s.send({"jsonrpc": "2.0", "id": s._id, "method": "kernelLsp/stats", "params": None})
        got = None
        while got is None and time.perf_counter() - q < max(cap, 120):
            _, msg = s.messages.get()
            if msg.get("method") == "textDocument/publishDiagnostics" and msg["params"]["uri"] == uri:
                m = msg
            elif msg.get("id") == s._id:
                got = msg
        worst = max(worst, time.perf_counter() - q)
        if m is not None:
            break
        time.sleep(0.05)
    took = time.perf_counter() - t if m else None
    rows.append(
        Row(
            f"{db_entries} database entries ({size_mb:.0f} MB), first check",
            took,
            rss.stop(),
            f"longest wait for an answer meanwhile: {worst * 1000:.0f} ms",
        )
    )
    s.close()

    # --log-file inside the workspace at DEBUG: how fast the log grows when nothing happens.
    root = work / "log_workspace"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "k.cu").write_text(KERNEL)
    log = root / "server.log"
    s = Server(code, root, "--log-file", str(log), "--log-level", "DEBUG")
    s.initialize(root)
    s.diagnostics((root / "k.cu").resolve().as_uri(), cap)
    time.sleep(1.0)
    size = log.stat().st_size
    time.sleep(3.0)
    rate = (log.stat().st_size - size) / 3.0
    rows.append(
        Row(
            "--log-file in the workspace, DEBUG, idle",
            3.0,
            tree_rss_mib(s.proc.pid),
            f"log grows {rate / 1024:.1f} KiB/s",
        )
    )
    s.close()
    return rows


def tree_rss_mib_sum(pids: set[int]) -> float:
    return sum(tree_rss_mib(p) for p in pids if alive(p))


def disk_full_case(work: Path, code: Path, cap: float) -> Row | None:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-Urm", "true"]).returncode != 0:
        return None
    root = work / "disk_full"
    shutil.rmtree(root, ignore_errors=True)
    (root / "tmp").mkdir(parents=True)
    (root / "host.cu").write_text(HOST_CODE)
    script = (
        f"mount -t tmpfs -o size=64k tmpfs {root / 'tmp'} && head -c 40000 /dev/zero > {root / 'tmp' / 'fill'} && "
        f"TMPDIR={root / 'tmp'} {sys.executable} -m kernel_lsp --check --no-gpu --arch sm_90 host.cu"
    )
    t = time.perf_counter()
    p = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", script],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=cap * 4,
        env={**os.environ, "PYTHONPATH": str(code)},
    )
    lines = [ln for ln in (p.stderr + p.stdout).splitlines() if ln and not ln.startswith("checked ")]
    return Row("temporary folder full (nvcc file)", time.perf_counter() - t, 0.0, lines[0] if lines else "")


def table(rows: list[Row], title: str) -> str:
    out = [
        f"### {title}",
        "",
        "| case | time to a clear message | peak RSS (tree) | message |",
        "|---|---|---|---|",
    ]
    for r in rows:
        seconds = f"{r.seconds:.2f} s" if r.seconds is not None else "—"
        rss = f"{r.peak_mib:.0f} MiB" if r.peak_mib else ""
        message = r.message.replace("|", "\\|")
        if len(message) > 160:
            message = message[:157] + "..."
        out.append(f"| {r.case} | {seconds} | {rss} | {message} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, help="another checkout to run the safe cases against")
    ap.add_argument(
        "--cap", type=float, default=30.0, help="seconds a case may take before it counts as a hang"
    )
    ap.add_argument("--db-entries", type=int, default=300_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kernel-lsp-faults-") as tmp:
        work = Path(tmp)
        rows = cli_cases(work / "cli", REPO, args.cap, old=False)
        if (row := disk_full_case(work, REPO, args.cap)) is not None:
            rows.append(row)
        rows += server_cases(work / "server", REPO, args.cap, args.db_entries)
        print(table(rows, f"kernel-lsp at {REPO}"))
        if args.before:
            before = cli_cases(work / "cli_before", args.before, args.cap, old=True)
            print()
            print(table(before, f"before: {args.before} (safe cases only, capped at {args.cap:.0f} s)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
