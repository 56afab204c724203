"""One launch of a job in a fresh process, for a tool that watches the process: ncu (profile.py)
and compute-sanitizer (sanitizer.py) run `python -m kernel_lsp.runner.one_launch JOB_DIR`.

JOB_DIR holds `job.json` ({spec, steps, sizes, device, fake}) and `kernel.cubin` (the CUBIN, or a
host entry's shared library). The process opens the GPU, makes the case's buffers and inputs,
poisons the outputs, launches (or calls) once and synchronises. Host code the user did not write
runs here only inside the sandbox (kernel_lsp/fence/sandbox.py), entered before CUDA starts;
`tool_command` builds the tool's command line and environment for it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from kernel_lsp.child_python import python_module


def untrusted(job: dict[str, Any]) -> bool:
    """Whether the job calls host code the user did not write (an LLM's entry)."""
    return any(s.get("kind") == "entry" and not s.get("trusted") for s in job["steps"])


def tool_command(tool: list[str], job: dict[str, Any], job_dir: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run `tool` (compute-sanitizer or ncu, with its options)
    over one launch of the job written in `job_dir`. For host code the user did not write, the
    environment keeps no secret, and the launch sandboxes itself as the job's GPU worker was
    sandboxed (`job["sandbox"]`): in-process (Landlock + seccomp, entered by the launch once the
    tool started it), or bubblewrap around the tool and the launch together (the tool's own
    files then go to `job_dir`, the one writable folder)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [*tool, *python_module("kernel_lsp.runner.one_launch"), job_dir]
    if not untrusted(job):
        return command, env
    from kernel_lsp.fence.sandbox import KEPT_ENVIRONMENT, READ_EVERYTHING, bwrap_command, find_bwrap

    clean = {k: v for k, v in env.items() if k in KEPT_ENVIRONMENT}
    clean.update(HOME=job_dir, TMPDIR=job_dir, CUDA_CACHE_DISABLE="1")
    if job.get("sandbox") == "bwrap":
        wrapped = [*command, "--sandbox-outer", "bwrap"]
        return bwrap_command(find_bwrap() or "bwrap", job_dir, wrapped, readable=READ_EVERYTHING), clean
    return command, clean


def run_job(job_dir: str, outer: str = "") -> int:
    with open(os.path.join(job_dir, "job.json"), encoding="utf-8") as f:
        job = json.load(f)
    with open(os.path.join(job_dir, "kernel.cubin"), "rb") as f:
        blob = f.read()
    if untrusted(job):
        from kernel_lsp.fence.sandbox import READ_EVERYTHING, enter_sandbox

        # Where the watching tool needs it: reads open (the launch runs the user's spec), AF_UNIX
        # sockets and shared anonymous maps allowed (the tool's IPC; the driver's start: under
        # compute-sanitizer on an H200 the context failed with CUDA_ERROR_OUT_OF_MEMORY without
        # the maps). The verdict and the timing never come from this process.
        enter_sandbox(
            job_dir, outer, readable=READ_EVERYTHING, allow_unix_sockets=True, deny_shared_anonymous=False
        )

    from kernel_lsp.procs import env_flag
    from kernel_lsp.runner.device import CudaDevice
    from kernel_lsp.runner.fake import FakeDevice
    from kernel_lsp.runner.loading import build_steps
    from kernel_lsp.runner.verify import Buffers, launcher
    from kernel_lsp.runner.worker import load_spec
    from kernel_lsp.spec import make_inputs
    from kernel_lsp.spec.inputs import TIMING_SEED

    fake = job.get("fake") or env_flag("KERNEL_LSP_FAKE_GPU")
    device = FakeDevice(job["device"]) if fake else CudaDevice(job["device"])
    spec = load_spec(job["spec"])
    steps = build_steps(device, blob, job["steps"], [], [], untrusted(job), job_dir)
    sizes = {k: int(v) for k, v in job["sizes"].items()}
    legacy = any(s.get("kind") == "entry" and "stream" not in s["codes"] for s in job["steps"])
    with device.legacy_stream(legacy):
        bufs = Buffers(device, spec, sizes)
        for name, array in make_inputs(spec, sizes, TIMING_SEED + spec.seed, 0).items():
            bufs.upload(name, array)
        bufs.poison(0xFF)
        launcher(device, steps, bufs)()
        device.sync_all()
        bufs.free()
    return 0


def main(argv: list[str]) -> int:
    """`JOB_DIR [--sandbox-outer bwrap]`."""
    outer = argv[argv.index("--sandbox-outer") + 1] if "--sandbox-outer" in argv else ""
    return run_job(argv[0], outer)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
