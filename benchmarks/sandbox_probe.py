"""Which sandbox mechanisms work on this machine, and whether CUDA still works inside each.

    PYTHONPATH=. python benchmarks/sandbox_probe.py [--json out.json]

Run it on the GPU machine (possibly gVisor): it prints one table row per check. The fence
(kernel_lsp/fence/sandbox.py) uses Landlock + seccomp inside the worker where both work, else
bubblewrap around it, else refuses host code an LLM wrote. Each "CUDA ..." row runs the real path
in a child process: the sandbox entered first, then the GPU opened, memory allocated, a kernel
launched, a host entry (an nvcc-built shared library) called through the worker, and writes
outside the folder, sockets, exec, the parent's environ, chmod, io_uring and a shared anonymous
map tried from inside (each should say "refused").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CHILD = textwrap.dedent(
    """
    import os, socket, sys, json
    folder, outside, cuda = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    from kernel_lsp.fence.sandbox import enter_sandbox, limit_memory
    out = {}
    try:
        report = enter_sandbox(folder)
        out["sandbox"] = report.to_dict()
    except Exception as e:
        print(json.dumps({"error": f"{type(e).__name__}: {e}"})); sys.exit(0)
    def attempt(what, fn):
        try:
            fn(); out[what] = "allowed"
        except Exception as e:
            out[what] = f"refused ({type(e).__name__})"
    attempt("write outside", lambda: open(outside, "w").write("x"))
    attempt("tcp socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    attempt("unix socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    attempt("exec", lambda: os.execv("/bin/true", ["true"]))
    attempt("read the parent's environ", lambda: open(f"/proc/{os.getppid()}/environ", "rb").read())
    attempt("chmod outside", lambda: os.chmod(outside, 0o600))  # EPERM: refused; ENOENT: let through
    import ctypes, mmap
    libc = ctypes.CDLL(None, use_errno=True)
    def io_uring():
        if libc.syscall(425, 1, ctypes.create_string_buffer(120)) < 0:  # io_uring_setup
            raise OSError(ctypes.get_errno(), "io_uring_setup")
    attempt("io_uring", io_uring)
    attempt("shared anonymous map", lambda: mmap.mmap(-1, 1 << 20, flags=mmap.MAP_SHARED))
    if cuda:
        from kernel_lsp.runner.device import CudaDevice
        try:
            d = CudaDevice(0)
            limit_memory(report)
            p = d.alloc(1 << 20); d.fill(p, 7, 1 << 20); d.flush_l2(); d.sync(); d.free(p)
            out["cuda"] = f"ok ({d.info()['name']}); {report.memory}"
            out["protections"] = report.protections
        except Exception as e:
            out["cuda"] = f"FAILED: {type(e).__name__}: {e}"
    print(json.dumps(out))
    """
)


def row(rows: list[tuple[str, str, str]], check: str, ok: bool | None, detail: str) -> None:
    rows.append((check, {True: "yes", False: "no", None: "-"}[ok], detail))
    print(f"| {check} | {rows[-1][1]} | {detail} |", flush=True)


def gvisor() -> str:
    text = platform.release()
    try:
        dmesg = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        dmesg = ""
    return "gVisor" if "gVisor" in dmesg or text.startswith("4.4.0") else f"not gVisor ({text})"


def child(folder: str, cuda: bool, env: dict[str, str] | None = None) -> dict:
    outside = os.path.join(tempfile.gettempdir(), f"kernel-lsp-probe-outside-{os.getpid()}")
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, folder, outside, "1" if cuda else "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env or {**os.environ, "PYTHONPATH": str(REPO)},
    )
    if os.path.exists(outside):
        os.unlink(outside)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": (proc.stdout + proc.stderr).strip()[-400:]}


def entry_through_worker(mechanism: str) -> str:
    """The real path: GpuSession(sandboxed=True) checks a bf16 launcher (nvcc shared library)."""
    from kernel_lsp.compile import CompileOptions
    from kernel_lsp.gpu import GpuSession, check_file
    from kernel_lsp.model import TimingSettings

    os.environ["KERNEL_LSP_SANDBOX"] = mechanism
    cu = REPO / "tests" / "gpu" / "fixtures" / "entries" / "vector_add_bf16.cu"
    start = time.perf_counter()
    try:
        with GpuSession(timing=TimingSettings(budget_s=0.1), sandboxed=True) as gpu:
            if not gpu.available:
                return f"refused: {gpu.reason}"
            (check,) = check_file(gpu, str(cu), compile_options=CompileOptions())
            how = gpu.backend.sandbox
            return f"{check.status}: {check.headline or check.message} in {time.perf_counter() - start:.1f} s; {how}"
    finally:
        os.environ.pop("KERNEL_LSP_SANDBOX", None)


def sanitizer_inside(mechanism: str) -> str:
    """compute-sanitizer attached to a sandboxed one-launch process (an untrusted candidate)."""
    from kernel_lsp.compile import CompileOptions
    from kernel_lsp.gpu import GpuCheckRequest, GpuSession
    from kernel_lsp.runner.sanitizer import find_sanitizer

    if find_sanitizer() is None:
        return "compute-sanitizer not installed"
    cu = REPO / "tests" / "gpu" / "fixtures" / "entries" / "vector_add_bf16.cu"
    text = cu.read_text()
    with GpuSession(sandboxed=True) as gpu:
        build = gpu.build_library(text, str(cu), CompileOptions(), candidate_of=text)
        report = gpu.prove(GpuCheckRequest(text, str(cu), artifact=build), tools=("memcheck",))
    return f"tools {report.tools} findings {[f.describe() for f in report.findings]} note {report.note!r}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    rows: list[tuple[str, str, str]] = []
    print("| check | works | detail |\n|---|---|---|")
    row(
        rows,
        "kernel",
        None,
        f"{platform.system()} {platform.release()} {platform.machine()}; {gvisor()}; uid {os.getuid()}",
    )
    from kernel_lsp.fence.sandbox import bwrap_available, find_bwrap, in_process_available

    try:
        import landlockpy

        abi = landlockpy.abi_version()
        row(rows, "landlock (landlockpy)", abi >= 1, f"ABI {abi}")
    except Exception as e:
        row(rows, "landlock (landlockpy)", False, f"{type(e).__name__}: {e}")
    try:
        import pyseccomp

        pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
        row(rows, "seccomp (pyseccomp + libseccomp)", True, "filter can be built")
    except Exception as e:
        row(rows, "seccomp (pyseccomp + libseccomp)", False, f"{type(e).__name__}: {e}")
    with tempfile.TemporaryDirectory(prefix="kernel-lsp-probe-") as folder:
        why = bwrap_available(folder)
        row(rows, "bubblewrap", why is None, why or f"{find_bwrap()} wraps a process")
        why = in_process_available()
        row(rows, "landlock + seccomp usable", why is None, why or "the worker sandboxes itself")
        result = child(folder, cuda=False)
        row(rows, "sandboxed child (no CUDA)", "error" not in result, json.dumps(result))
        result = child(folder, cuda=True)
        ok = "error" not in result and str(result.get("cuda", "")).startswith("ok")
        row(rows, "CUDA inside landlock + seccomp", ok, json.dumps(result))
    for mechanism in ("landlock", "bwrap"):
        try:
            detail = entry_through_worker(mechanism)
        except Exception as e:
            detail = f"{type(e).__name__}: {e}"
        row(rows, f"host entry in the sandboxed worker ({mechanism})", detail.startswith("ok"), detail)
    try:
        detail = sanitizer_inside("landlock")
    except Exception as e:
        detail = f"{type(e).__name__}: {e}"
    row(
        rows,
        "compute-sanitizer on a sandboxed candidate",
        "findings []" in detail and "note ''" in detail,
        detail,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
