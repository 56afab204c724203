"""The GPU side gets the project's flags too: `--check`'s verification builds its compile options
with the compile_commands.json flags (no GPU needed: the session is a stand-in that stops the
verification once the options are built)."""

from __future__ import annotations

import contextlib

from fixture_sources import flags_project

import kernel_lsp.gpu as gpu
import kernel_lsp.gpu_check as gpu_check
from kernel_lsp.check import check_path
from kernel_lsp.config import Settings
from kernel_lsp.workspace import Workspace


class Stop(Exception):
    """Raised where the verification would start using the GPU."""


class StandInSession:
    available = True
    reason = ""
    device = None

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __getattr__(self, name):
        raise Stop(name)


def test_verification_compiles_with_the_projects_flags(tmp_path, monkeypatch):
    kernel = flags_project(tmp_path)
    settings = Settings(arch=("sm_90",))
    check = check_path(kernel, settings)
    assert check.diagnostics == [], "the compile needs the database's -I and -D"
    built = []
    real = Settings.compile_options

    def spy(self, *args, **kwargs):
        built.append(real(self, *args, **kwargs))
        return built[-1]

    def stop(*args, **kwargs):
        raise Stop("check_file")

    monkeypatch.setattr(Settings, "compile_options", spy)
    monkeypatch.setattr(gpu, "GpuSession", StandInSession)
    monkeypatch.setattr(gpu, "check_file", stop)
    with contextlib.suppress(Stop):
        gpu_check.verify_checks([check], Workspace.fixed(settings), log=lambda *a: None)
    assert built, "the verification built no compile options"
    for options in built:
        assert options.include_dirs == (str(tmp_path / "include"),) and options.defines == ("ONE=1.0f",)
