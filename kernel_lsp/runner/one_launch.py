"""One launch of a job in a fresh process, for a tool that watches the process: ncu (profile.py)
and compute-sanitizer (sanitizer.py) run `python -m kernel_lsp.runner.one_launch JOB_DIR`.

JOB_DIR holds `job.json` ({spec, steps, sizes, device, fake}) and `kernel.cubin` (the CUBIN, or a
host entry's shared library). The process opens the GPU, makes the case's buffers and inputs,
poisons the outputs, launches (or calls) once and synchronises.

Host code the user did not write runs here only inside the sandbox (kernel_lsp/fence/sandbox.py),
entered before CUDA starts, and this process never loads the spec (the user's Python, which may
read the user's files): `prepare_command` runs it first in a process of its own, which writes the
case as data (runner/case_file.py). The sandbox is the accused's (runner/accused.py), but for
what the tool needs: its injected libraries readable, and AF_UNIX sockets and shared maps until
the GPU is open. A launch that cannot be confined ends with SANDBOX_EXIT, and the gate that
watched it blocks the offer. `tool_command` builds the tool's command line and environment.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from typing import Any

from kernel_lsp.child_python import python_module

# Whether the launch may start threads once the GPU is open (a tool's own, started late).
TOOL_THREADS = False
SANDBOX_EXIT = 77  # the launch of host code an LLM wrote could not be confined here
PREPARE_TIMEOUT_S = 120.0


def untrusted(job: dict[str, Any]) -> bool:
    """Whether the job calls host code the user did not write (an LLM's entry)."""
    return any(s.get("kind") == "entry" and not s.get("trusted") for s in job["steps"])


def tool_libraries(env: dict[str, str]) -> list[str]:
    """The folders of the libraries a watching tool injects into the launch (LD_PRELOAD,
    CUDA_INJECTION64_PATH, as compute-sanitizer and ncu set them): the launch must read them
    once its sandbox is entered, when the driver loads them."""
    found = []
    for entry in [*re.split(r"[: ]", env.get("LD_PRELOAD", "")), env.get("CUDA_INJECTION64_PATH", "")]:
        if os.path.isabs(entry):
            found.append(os.path.dirname(os.path.realpath(entry)))
    return found


def tool_command(tool: list[str], job: dict[str, Any], job_dir: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run `tool` (compute-sanitizer or ncu, with its options)
    over one launch of the job written in `job_dir`. For host code the user did not write, the
    environment keeps no secret, the tool and the launch run inside bubblewrap wherever it works
    (its mount namespace holds the threads the tool starts in the launch before the launch's
    first line, which Landlock before ABI 8 cannot; the tool's own files go to `job_dir`, which
    only the tool may write), and the launch confines itself (Landlock and seccomp, entered
    before CUDA starts, the rest closed once the GPU is open, as the accused). Without
    bubblewrap it confines itself alone, and refuses to run where a thread came first."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [*tool, *python_module("kernel_lsp.runner.one_launch"), job_dir]
    if not untrusted(job):
        return command, env
    from kernel_lsp.fence.sandbox import KEPT_ENVIRONMENT, SINGLE_THREADED, bwrap_command, find_bwrap

    clean = {k: v for k, v in env.items() if k in KEPT_ENVIRONMENT}
    clean.update(HOME=job_dir, TMPDIR=job_dir, CUDA_CACHE_DISABLE="1", **SINGLE_THREADED)
    if in_bwrap(job):
        wrapped = [*command, "--sandbox-outer", "bwrap"]
        tool_home = [os.path.dirname(os.path.realpath(tool[0]))] if os.path.isabs(tool[0]) else []
        bwrap = find_bwrap() or "bwrap"
        return bwrap_command(bwrap, job_dir, wrapped, readable=tool_home, writable=True), clean
    return command, clean


@functools.cache
def bwrap_usable() -> bool:
    """Whether bubblewrap can wrap a process here (asked once a process)."""
    import tempfile

    from kernel_lsp.fence.sandbox import bwrap_available

    with tempfile.TemporaryDirectory(prefix="kernel-lsp-bwrap-probe-") as folder:
        return bwrap_available(folder) is None


def in_bwrap(job: dict[str, Any]) -> bool:
    """Whether `tool_command` runs the job's tool and launch inside bubblewrap."""
    return untrusted(job) and (job.get("sandbox") == "bwrap" or bwrap_usable())


def prepare_command(job_dir: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment of `prepare_case` (the user's own Python: the spec)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return [*python_module("kernel_lsp.runner.one_launch"), "--prepare", job_dir], env


def write_job(job_dir: str, job: dict[str, Any], blob: bytes, runs: Any = None) -> str | None:
    """`job_dir`/job.json and kernel.cubin, and for host code the user did not write the case's
    data (`prepare_case`, in a process of its own). `runs`: the owner's ToolRuns. Returns why the
    job could not be written, or None."""
    import subprocess

    from kernel_lsp.procs import ToolRuns

    with open(os.path.join(job_dir, "job.json"), "w", encoding="utf-8") as f:
        json.dump(job, f)
    with open(os.path.join(job_dir, "kernel.cubin"), "wb") as f:
        f.write(blob)
    if not untrusted(job):
        return None
    cmd, env = prepare_command(job_dir)
    try:
        code, printed = (runs or ToolRuns()).run(cmd, PREPARE_TIMEOUT_S, env)
    except subprocess.TimeoutExpired:
        return f"the spec did not make the case's inputs in {PREPARE_TIMEOUT_S:.0f} s"
    except OSError as e:
        return f"the case's inputs could not be made: {e}"
    if code != 0:
        last = (printed.strip().splitlines() or [f"exit code {code}"])[-1]
        return f"the case's inputs could not be made: {last[:300]}"
    return None


def prepare_case(job_dir: str) -> None:
    """The trusted half of an untrusted job, in a process of its own: run the user's spec for the
    case's inputs and write them beside the job (runner/case_file.py), so that the launch under
    the tool never loads the spec."""
    from kernel_lsp.runner.case_file import write_case
    from kernel_lsp.runner.worker import load_spec
    from kernel_lsp.spec import make_inputs
    from kernel_lsp.spec.inputs import TIMING_SEED

    with open(os.path.join(job_dir, "job.json"), encoding="utf-8") as f:
        job = json.load(f)
    spec = load_spec(job["spec"])
    sizes = {k: int(v) for k, v in job["sizes"].items()}
    write_case(job_dir, spec, sizes, make_inputs(spec, sizes, TIMING_SEED + spec.seed, 0))


def _confine(job_dir: str, outer: str) -> Any:
    """Enter the sandbox before CUDA starts; reads: what any sandboxed process may read, and the
    tool's injected libraries. The launch's own output goes nowhere (what a candidate prints
    never mixes with the tool's report)."""
    from kernel_lsp.fence.sandbox import enter_sandbox

    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    # AF_UNIX sockets and shared maps stay open for the driver's start and the tool's own channel
    # until `close_after_start`; abstract sockets are not scoped (the tool's may be one).
    # Inside bubblewrap too, Landlock: the tool beside it may write the folder, and its /proc
    # entries (its memory, its report's pipe) are in the same PID namespace.
    return enter_sandbox(
        job_dir,
        outer,
        readable=tool_libraries(dict(os.environ)),
        allow_unix_sockets=True,
        cuda_start=True,
        landlock_in_bwrap=True,
    )


def run_job(job_dir: str, outer: str = "") -> int:
    with open(os.path.join(job_dir, "job.json"), encoding="utf-8") as f:
        job = json.load(f)
    image = os.path.join(job_dir, "kernel.cubin")
    with open(image, "rb") as f:
        blob = f.read()
    confined = untrusted(job)
    if confined:
        from kernel_lsp.fence.sandbox import SandboxUnavailable
        from kernel_lsp.runner.case_file import read_case

        spec, sizes, inputs = read_case(job_dir)  # the spec as data: no user code runs here
        try:
            report = _confine(job_dir, outer)
        except SandboxUnavailable:
            return SANDBOX_EXIT

    from kernel_lsp.runner.device import CudaDevice
    from kernel_lsp.runner.fake import FakeDevice
    from kernel_lsp.runner.loading import build_steps
    from kernel_lsp.runner.verify import Buffers, launcher

    fake = job.get("fake")  # the backend's, set in every job it hands a tool (evaluation/local.py)
    device = FakeDevice(job["device"]) if fake else CudaDevice(job["device"])
    if confined:
        from kernel_lsp.fence.sandbox import close_after_start, limit_memory

        try:
            close_after_start(report, new_threads=TOOL_THREADS)
            limit_memory(report)
        except SandboxUnavailable:
            return SANDBOX_EXIT
    else:
        from kernel_lsp.runner.worker import load_spec
        from kernel_lsp.spec import make_inputs
        from kernel_lsp.spec.inputs import TIMING_SEED

        spec = load_spec(job["spec"])
        sizes = {k: int(v) for k, v in job["sizes"].items()}
        inputs = make_inputs(spec, sizes, TIMING_SEED + spec.seed, 0)
    steps = build_steps(device, blob, job["steps"], [], [], confined, job_dir, image)
    legacy = any(s.get("kind") == "entry" and "stream" not in s["codes"] for s in job["steps"])
    with device.legacy_stream(legacy):
        bufs = Buffers(device, spec, sizes)
        for name, array in inputs.items():
            bufs.upload(name, array)
        bufs.poison(0xFF)
        launcher(device, steps, bufs)()
        device.sync_all()
        bufs.free()
    return 0


def main(argv: list[str]) -> int:
    """`JOB_DIR [--sandbox-outer bwrap]`, or `--prepare JOB_DIR`."""
    if argv[:1] == ["--prepare"]:
        prepare_case(argv[1])
        return 0
    outer = argv[argv.index("--sandbox-outer") + 1] if "--sandbox-outer" in argv else ""
    return run_job(argv[0], outer)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
