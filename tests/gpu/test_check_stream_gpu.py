"""`check` on a real GPU as one pipeline (scheduler.check_files): samples verify with the
compile their check worker made for the GPU's arch (no compile in the GPU phase), each file is
reported as it finishes, the verdicts equal the serial path's, and with two GPUs visible both
verify files."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_lsp.check import FileCheck
from kernel_lsp.config import Settings
from kernel_lsp.evaluation.pool import visible_gpu_count
from kernel_lsp.gpu import GpuSession
from kernel_lsp.gpu_check import expected_arch, verify_checks
from kernel_lsp.gpu_request import FileDone, GpuPlan
from kernel_lsp.scheduler import check_files
from kernel_lsp.workspace import Workspace

pytestmark = pytest.mark.gpu

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
FILES = [
    str(SAMPLES / name)
    for name in (
        "vector_add/vector_add_fp32.cu",
        "vector_add/vector_add_bf16.cu",
        "rmsnorm/rmsnorm_fp32.cu",
        "transpose/transpose_fp32.cu",
        "entries/vector_add_bf16.cu",  # an entry spec: its shared library is built beforehand too
    )
]


def verdicts(checks: list[FileCheck]) -> list[tuple[str, str, bool]]:
    return [(Path(c.path).name, k.status, k.ok) for c in checks for k in c.gpu_checks]


def test_samples_stream_verify_with_their_prebuilt_compile_and_match_the_serial_path(monkeypatch):
    arch = expected_arch()
    assert arch is not None  # nvidia-smi answers on a GPU machine
    compiled_there: list[str] = []
    real_compile, real_library = GpuSession.compile, GpuSession.build_library

    def counting(self, source, path, options=None):
        compiled_there.append(path)
        return real_compile(self, source, path, options)

    def library_counted(self, source, path, *args, **kwargs):
        compiled_there.append(f"library of {path}")
        return real_library(self, source, path, *args, **kwargs)

    monkeypatch.setattr(GpuSession, "compile", counting)
    monkeypatch.setattr(GpuSession, "build_library", library_counted)
    done: list[FileDone] = []
    plan = GpuPlan(gpus="all", log=lambda _: None, arch=arch)
    streamed = check_files(Workspace.fixed(Settings()), FILES, 4, plan, done.append)
    assert compiled_there == []  # every file ran the compile its check worker made
    assert [d.done for d in done] == [1, 2, 3, 4, 5]
    assert all(k.ok for c in streamed for k in c.gpu_checks), verdicts(streamed)
    assert len(verdicts(streamed)) == 5
    if visible_gpu_count() >= 2:
        assert len({d.gpu for d in done}) >= 2, [d.gpu for d in done]
    monkeypatch.undo()
    serial = [FileCheck(p) for p in FILES]
    verify_checks(serial, Workspace.fixed(Settings()), gpus="1", log=lambda _: None)
    assert verdicts(serial) == verdicts(streamed)
