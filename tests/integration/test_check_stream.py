"""`check` as one pipeline on fake GPUs (scheduler.check_files): each file is reported as it
finishes, before later files are verified; spec'd files are spread over every GPU; the verdicts
equal the serial path's (compile everything, then verify file after file on one GPU); a spec'd
file's compile for the GPU's arch, made in its check worker, is what verification runs."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from fixture_sources import FAKE_VADD_SPEC, VADD

from kernel_lsp.check import FileCheck
from kernel_lsp.cli.check import check_main
from kernel_lsp.config import Settings
from kernel_lsp.gpu import GpuSession
from kernel_lsp.gpu_check import check_lanes, expected_arch, verify_checks
from kernel_lsp.gpu_request import FileDone, GpuPlan
from kernel_lsp.model import CompileResult, KernelResources
from kernel_lsp.runner.fake import fake_cubin
from kernel_lsp.runner.worker import WAITED
from kernel_lsp.scheduler import check_files
from kernel_lsp.workspace import Workspace

SPEC = FAKE_VADD_SPEC
SYMBOL = "_Z4vaddPKfS0_Pfi"
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def fake_compile(self, source: str, path: str, options=None) -> CompileResult:
    """GpuSession.compile on the fake GPU: `// fake: BEHAVIOUR` picks the kernel's behaviour."""
    behaviour = source.split("// fake: ", 1)[1].split()[0] if "// fake: " in source else "vadd"
    kernels = [KernelResources("vadd", SYMBOL, "sm_90", 16, 0, 0, 0, 0)]
    return CompileResult(path, "sm_90", True, kernels=kernels, cubin=fake_cubin({SYMBOL: behaviour}))


@pytest.fixture
def fake_gpus(monkeypatch, fake_gpu):
    monkeypatch.setattr(GpuSession, "compile", fake_compile)


def project(tmp_path: Path, behaviours: list[str], plain: int = 0) -> list[str]:
    """Spec'd vadds with these fake behaviours (a_*.cu ...), and `plain` files without a spec."""
    paths = []
    for i, behaviour in enumerate(behaviours):
        cu = tmp_path / f"k{i}.cu"
        cu.write_text(VADD.replace("if (i < n)", f"// fake: {behaviour}\n    if (i < n)"))
        (tmp_path / f"k{i}.spec.py").write_text(SPEC)
        paths.append(str(cu))
    for i in range(plain):
        cu = tmp_path / f"plain{i}.cu"
        cu.write_text(VADD)
        paths.append(str(cu))
    return paths


def verdicts(checks: list[FileCheck]) -> list[tuple[str, str, bool, str]]:
    return [(Path(c.path).name, k.status, k.ok, k.message) for c in checks for k in c.gpu_checks]


def test_each_file_is_reported_before_later_files_are_verified(fake_gpus, tmp_path, monkeypatch):
    paths = project(tmp_path, ["slow", "const", "slow", "slow"], plain=2)
    seen: list[tuple[str, int, str]] = []  # (file, spec'd files verified by then, thread)

    def on_file(d: FileDone) -> None:
        verified = sum(1 for c in checks_so_far if c.gpu_checks)
        seen.append((Path(d.check.path).name, verified, threading.current_thread().name))

    checks_so_far: list[FileCheck] = []
    real_verify = GpuSession.check

    def check_and_note(self, request, *args, **kwargs):
        result = real_verify(self, request, *args, **kwargs)
        checks_so_far.append(FileCheck(request.path, gpu_checks=[result]))
        return result

    monkeypatch.setattr(GpuSession, "check", check_and_note)
    checks = check_files(
        Workspace.fixed(Settings()), paths, 2, GpuPlan(gpus="1", log=lambda _: None), on_file
    )
    assert [Path(c.path).name for c in checks] == [Path(p).name for p in paths]  # the files' order
    assert len(seen) == len(paths)
    # Every file is reported once, counting up; a spec'd file's line comes as soon as it is
    # verified, while the next one has not been (one GPU: one file at a time).
    spec_d = [(name, verified) for name, verified, _ in seen if name.startswith("k")]
    assert [verified for _, verified in spec_d] == [1, 2, 3, 4]
    assert sorted(name for name, _, _ in seen) == sorted(Path(p).name for p in paths)


def test_files_spread_over_two_gpus_with_the_serial_verdicts(fake_gpus, tmp_path):
    behaviours = ["slow", "const", "crash", "slow", "half", "slow"]
    paths = project(tmp_path, behaviours)
    serial = [FileCheck(p) for p in paths]
    assert verify_checks(serial, Workspace.fixed(Settings()), gpus="1", progress=lambda _: None)
    done: list[FileDone] = []
    plan = GpuPlan(gpus="2", log=lambda _: None)
    parallel = check_files(Workspace.fixed(Settings()), paths, 2, plan, done.append)
    assert plan.device is not None and plan.device.startswith("2 GPUs")
    assert [(n, s, ok) for n, s, ok, _ in verdicts(parallel)] == [
        ("k0.cu", "ok", True),
        ("k1.cu", "failed", False),
        ("k2.cu", "failed", False),
        ("k3.cu", "ok", True),
        ("k4.cu", "failed", False),
        ("k5.cu", "ok", True),
    ]
    assert [(n, s, ok) for n, s, ok, _ in verdicts(parallel)] == [
        (n, s, ok) for n, s, ok, _ in verdicts(serial)
    ]
    # Both GPUs verified files, and each line names the one that did.
    assert {d.gpu for d in done} == {"GPU 0", "GPU 1"}
    assert {k.device_index for c in parallel for k in c.gpu_checks} == {0, 1}
    assert all(d.verify_s > 0 for d in done)


def test_the_check_workers_build_for_the_gpu_and_verification_reuses_it(fake_gpu, monkeypatch, tmp_path):
    """With the real compilers (the fake GPU, sm_90, cannot load their CUBINs: the kernels'
    verdicts are the same load failure), the prebuilt path compiles nothing and builds no entry
    library in the GPU phase, and gives the verdicts of the path that does."""
    paths = [*project(tmp_path, ["vadd", "vadd"]), str(SAMPLES / "entries" / "vector_add_bf16.cu")]
    assert expected_arch() is None  # no nvidia-smi here: the CLI compiles in the GPU phase
    built_there: list[str] = []
    real_compile, real_library = GpuSession.compile, GpuSession.build_library

    def compile_counted(self, source, path, options=None):
        built_there.append(Path(path).name)
        return real_compile(self, source, path, options)

    def library_counted(self, source, path, *args, **kwargs):
        built_there.append(f"library of {Path(path).name}")
        return real_library(self, source, path, *args, **kwargs)

    monkeypatch.setattr(GpuSession, "compile", compile_counted)
    monkeypatch.setattr(GpuSession, "build_library", library_counted)
    workspace = Workspace.fixed(Settings())
    reused = check_files(workspace, paths, 2, GpuPlan(gpus="1", log=lambda _: None, arch="sm_90"))
    assert built_there == []
    again = check_files(workspace, paths, 2, GpuPlan(gpus="1", log=lambda _: None, arch="sm_80"))
    # Another arch than the device's: compiled and built in the GPU phase, as before.
    assert sorted(built_there) == ["k0.cu", "k1.cu", "library of vector_add_bf16.cu", "vector_add_bf16.cu"]
    assert [v[:3] for v in verdicts(reused)] == [v[:3] for v in verdicts(again)]
    assert len(verdicts(reused)) == 3


def test_check_verbose_streams_one_line_per_file(fake_gpus, tmp_path, capsys):
    project(tmp_path, ["slow"], plain=1)
    code = check_main([str(tmp_path), "-v", "--specs", "run", "--gpus", "1"])
    err = capsys.readouterr().err.splitlines()
    lines = [ln for ln in err if ln.startswith("kernel-lsp: [")]
    assert code == 0, err
    assert len(lines) == 2
    assert any("k0.cu: GPU 0: vadd ok (" in ln for ln in lines)
    # Where the kernel's seconds went, by phase, in the order they ran.
    (verified,) = [ln for ln in lines if "k0.cu" in ln]
    phases = verified.split(" s: ", 1)[1]
    named = [part.rsplit(" ", 1)[0] for part in phases.rstrip(")").split(", ")]
    known = {"compile", "prepare", "spec", "load", "inputs+reference", "verify", "timing inputs"}
    known |= {"waiting for the GPU", "timed runs", "timed outputs checked", "unload", "transfer"}
    # A part of the phase before it, shown where it took 5 ms or more (on a loaded machine).
    known |= {WAITED}
    assert set(named) <= known, verified  # (the phases under 5 ms are left out)
    assert named.index("verify") < named.index("timed runs"), verified
    assert any("plain0.cu: 0 error(s), 0 warning(s), 1 kernel(s)" in ln for ln in lines)
    assert {ln.split("]")[0] for ln in lines} == {"kernel-lsp: [1/2", "kernel-lsp: [2/2"}


def test_lanes_verify_files_side_by_side_on_one_gpu_with_the_serial_verdicts(
    fake_gpus, tmp_path, monkeypatch
):
    """Two lanes on one (fake) GPU: two worker processes verify two files at once, and the
    verdicts are the one-lane run's."""
    behaviours = ["slow", "const", "slow", "half", "slow", "slow"]
    paths = project(tmp_path, behaviours)
    in_flight: list[int] = []
    most = 0
    workers: set[tuple[int, int | None]] = set()
    lock = threading.Lock()
    real_check = GpuSession.check

    def held_check(self, request, *args, **kwargs):
        nonlocal most
        with lock:
            in_flight.append(1)
            most = max(most, len(in_flight))
            workers.add((self.device_index, self.worker_pid))
        try:
            result = real_check(self, request, *args, **kwargs)
            time.sleep(0.8)  # a file's verification that lasts: the next one starts on the other lane
            return result
        finally:
            with lock:
                in_flight.pop()

    monkeypatch.setattr(GpuSession, "check", held_check)
    plan = GpuPlan(gpus="1", log=lambda _: None, lanes=2)
    done: list[FileDone] = []
    laned = check_files(Workspace.fixed(Settings()), paths, 2, plan, done.append)
    assert most == 2  # two files in flight on GPU 0, never more
    assert {d.gpu for d in done} == {"GPU 0"}
    assert len({pid for index, pid in workers if index == 0}) == 2  # a worker process per lane
    monkeypatch.undo()
    monkeypatch.setattr("kernel_lsp.evaluation.local.FAKE_GPU_DEFAULT", True)  # undone above
    monkeypatch.setattr(GpuSession, "compile", fake_compile)
    one = check_files(Workspace.fixed(Settings()), paths, 2, GpuPlan(gpus="1", log=lambda _: None, lanes=1))
    assert [(n, s, ok) for n, s, ok, _ in verdicts(laned)] == [(n, s, ok) for n, s, ok, _ in verdicts(one)]
    assert [s for _, s, _, _ in verdicts(laned)] == ["ok", "failed", "ok", "failed", "ok", "ok"]


def test_check_lanes_follow_the_cpus_and_the_environment(monkeypatch):
    monkeypatch.delenv("KERNEL_LSP_CHECK_LANES", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(32)))
    assert check_lanes(1, fake=False) == 4
    assert check_lanes(2, fake=False) == 4
    assert check_lanes(8, fake=False) == 1
    assert check_lanes(1, fake=False, profile=True) == 1  # ncu's replays want the GPU alone
    assert check_lanes(1, fake=True) == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(6)))
    assert check_lanes(1, fake=False) == 1
    monkeypatch.setenv("KERNEL_LSP_CHECK_LANES", "3")
    assert check_lanes(8, fake=True) == 3
