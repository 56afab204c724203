"""One launch of a job in a fresh process, for a tool that watches the process: ncu (profile.py)
and compute-sanitizer (sanitizer.py) run `python -m kernel_lsp.runner.one_launch JOB_DIR`.

JOB_DIR holds `job.json` ({spec, steps, sizes, device, fake}) and `kernel.cubin` (the CUBIN, or a
host entry's shared library). The process opens the GPU, makes the case's buffers and inputs,
poisons the outputs, launches (or calls) once and synchronises. Host code the user did not write
runs here only inside the sandbox (kernel_lsp/fence/sandbox.py), entered before CUDA starts.
"""

from __future__ import annotations

import json
import os
import sys


def run_job(job_dir: str) -> int:
    with open(os.path.join(job_dir, "job.json"), encoding="utf-8") as f:
        job = json.load(f)
    with open(os.path.join(job_dir, "kernel.cubin"), "rb") as f:
        blob = f.read()
    untrusted = any(s.get("kind") == "entry" and not s.get("trusted") for s in job["steps"])
    if untrusted:
        from kernel_lsp.fence.sandbox import enter_sandbox

        enter_sandbox(job_dir)

    from kernel_lsp.runner.device import CudaDevice
    from kernel_lsp.runner.fake import FakeDevice
    from kernel_lsp.runner.verify import Buffers, launcher
    from kernel_lsp.runner.worker import build_steps, load_spec
    from kernel_lsp.spec import make_inputs
    from kernel_lsp.spec.inputs import TIMING_SEED

    fake = job.get("fake") or os.environ.get("KERNEL_LSP_FAKE_GPU", "") not in ("", "0")
    device = FakeDevice(job["device"]) if fake else CudaDevice(job["device"])
    spec = load_spec(job["spec"])
    steps = build_steps(device, blob, job["steps"], [], [], untrusted, job_dir)
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


if __name__ == "__main__":
    sys.exit(run_job(sys.argv[1]))
