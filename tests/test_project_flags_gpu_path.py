"""The GPU side gets the project's flags too: `--check`'s verification compiles with the
compile_commands.json flags its compile used (no GPU needed: the session is a stand-in)."""

from __future__ import annotations

from fixture_sources import flags_project

import kernel_lsp.gpu_check as gpu_check
from kernel_lsp.check import check_path
from kernel_lsp.config import Settings


class StandInSession:
    available = True
    reason = ""
    device = None

    def __init__(self, **_):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_verification_compiles_with_the_projects_flags(tmp_path, monkeypatch):
    kernel = flags_project(tmp_path)
    settings = Settings(arch=("sm_90",))
    check = check_path(kernel, settings)
    assert check.diagnostics == [], "the compile needs the database's -I and -D"
    seen = []
    monkeypatch.setattr(gpu_check, "GpuSession", StandInSession)
    monkeypatch.setattr(
        gpu_check, "check_file", lambda gpu, path, compile_options: seen.append(compile_options) or []
    )
    gpu_check.verify_checks([check], settings, log=lambda *a: None)
    [options] = seen
    assert options.include_dirs == (str(tmp_path / "include"),) and options.defines == ("ONE=1.0f",)
