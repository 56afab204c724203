"""Shared fixtures and marker hooks. Other engineers append fixtures here; keep what exists."""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from unit_tier import (  # noqa: F401  (the unit tier's guard: its hooks act on tests/unit/ only)
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
BROKEN = SAMPLES / "broken"


@functools.cache
def gpu_absent_reason() -> str | None:
    """None when an NVIDIA GPU and its driver answer, else why not (shown in the skip)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return "no NVIDIA GPU here (nvidia-smi not found)"
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi failed: {e}"
    if out.returncode != 0 or "GPU" not in out.stdout:
        return "nvidia-smi lists no GPU"
    return None


# The fast tier's workers (pytest-xdist): `python -m pytest` with no test named runs the tier on
# this many processes. Most of its time is spent waiting on children (servers, nvcc, CLI runs,
# deadlines), not computing, so more workers than cores help, and beside a CPU-bound job the
# tier's processes get a larger share of the cores.
FAST_TIER_WORKERS = 4


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """`python -m pytest` (the README's command, CI's) runs the fast tier in parallel when
    pytest-xdist is installed (the `test` extra). Not a run that names files, folders or tests
    (`python -m pytest tests/unit`: one process starts faster than workers), nor one given its own
    `-n` (`-n 0`: in one process; the GPU images' `-n 6 --dist loadgroup`), its own -m, -k or
    --collect-only, nor a debugger's. Runs before pytest-xdist's own hook, which turns `-n` into
    its workers."""
    if not config.pluginmanager.has_plugin("xdist") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    option = config.option
    if (
        config.args_source != pytest.Config.ArgsSource.TESTPATHS  # files, folders or tests named
        or option.numprocesses is not None
        or option.markexpr != "not slow"
        or option.keyword
        or option.collectonly
        or option.usepdb
        or option.trace
    ):
        return
    config.option.numprocesses = FAST_TIER_WORKERS
    # Tests of one xdist_group run one at a time on one worker (the GPU tests' lanes).
    config.option.dist = "loadgroup"


def pytest_configure(config):
    """`python -m pytest` is the fast tier (pyproject's addopts: `-m 'not slow'`). A run that names
    test files or tests (`python -m pytest tests/e2e/test_neovim.py`) gets them all, slow or not,
    unless it gives its own -m."""
    from hang_guard import HangGuard

    config.pluginmanager.register(HangGuard(), "kernel-lsp-hang-guard")
    if not hasattr(config, "workerinput"):  # once, in the controller, before any worker starts
        _compile_bytecode()
    args = list(config.invocation_params.args)
    named = [a for a in args if not a.startswith("-") and (".py" in a or "::" in a)]
    user_markexpr = any(a.startswith("-m") for a in args)
    if named and not user_markexpr and config.option.markexpr == "not slow":
        config.option.markexpr = ""


def _compile_bytecode() -> None:
    """Bytecode for kernel_lsp and the tests' helper modules, written once before the run. With
    PYTHONDONTWRITEBYTECODE set (as on CI's machines) and an editable install, every Python
    process the tests start (servers, spawned workers, accused) compiled kernel_lsp's source
    anew: 0.23 s of CPU for the server's and the worker's imports. Measured on the fast tier in
    one process: the end-to-end tests' CPU 251 s without, 221 s with. Python reads a valid .pyc
    whatever that variable says, and checks each one against its source's size and time."""
    import compileall

    compileall.compile_dir(REPO / "kernel_lsp", quiet=2)
    compileall.compile_dir(REPO / "tests", maxlevels=0, quiet=2)  # not fixtures: copied as they are


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    """pytest keeps each test module's rewritten asserts in a .pyc, unless bytecode is not to be
    written (PYTHONDONTWRITEBYTECODE, as on CI's machines): then every collection, in each
    pytest-xdist worker, rewrote all 300 modules again, 6 to 9 s of CPU each. Written while
    collecting only: what the tests themselves import (a workspace's modules) writes nothing."""
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = saved


def pytest_collection_modifyitems(config, items):
    # The long GPU tests first, longest first: pytest-xdist hands out work in this order, and
    # the workers then end close together. A stable sort: the rest keep their order.
    def seconds(item) -> float:
        long = item.get_closest_marker("long")
        return -float(long.args[0]) if long and long.args else 0.0

    items.sort(key=seconds)
    gpu_reason = gpu_absent_reason()
    unit_tier = REPO / "tests" / "unit"
    for item in items:
        if unit_tier in item.path.parents:  # the unit tier, by its folder: `-m unit` selects it too
            item.add_marker(pytest.mark.unit)
        if gpu_reason and "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=f"gpu test skipped: {gpu_reason}"))
        editor = item.get_closest_marker("editor")
        if editor is not None:  # @pytest.mark.editor("emacs", "emacs-nox elpa-eglot"); default nvim
            program = editor.args[0] if editor.args else "nvim"
            package = editor.args[1] if len(editor.args) > 1 else "neovim"
            if not shutil.which(program):
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"editor test skipped: `{program}` not on PATH (apt-get install -y {package})"
                    )
                )


def pytest_runtest_logreport(report):
    """With KERNEL_LSP_TEST_TIMES=FILE, each test's phase (setup, call, teardown) is appended as it
    ends: the wall clock at its end, the pytest-xdist worker, its seconds, then the CPU seconds this
    test process and its reaped children have used so far (a difference between two lines is
    roughly what ran between them: a process is counted when it is reaped). A run stopped at a
    time limit still says where its time went, and each worker's lane can be drawn from it."""
    out = os.environ.get("KERNEL_LSP_TEST_TIMES")
    if out and not hasattr(report, "node"):  # pytest-xdist's controller gets a copy of each report
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        cpu = sum(
            u.ru_utime + u.ru_stime
            for u in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        )
        with open(out, "a") as f:
            f.write(
                f"{time.time():.1f} {worker} {report.duration:8.2f} {report.when} {report.outcome} {report.nodeid}"
                f" cpu={cpu:.2f}\n"
            )
        if report.failed:  # the reason too: a run cut off at its limit prints no summary
            with open(out + ".failures", "a") as f:
                f.write(f"=== {report.nodeid} ({report.when})\n{report.longreprtext[-6000:]}\n")


@pytest.fixture(autouse=True)
def _not_in_ci(monkeypatch):
    """Tests run kernel-lsp as a developer does: `CI` (set by CI services) makes `--check` read
    specs without running them; the tests of that behaviour set it themselves."""
    monkeypatch.delenv("CI", raising=False)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    return SAMPLES


@pytest.fixture(scope="session")
def broken_dir() -> Path:
    return BROKEN


def server_command() -> list[str]:
    """The real server as a subprocess, as an editor would start it."""
    return [sys.executable, "-m", "kernel_lsp"]


def server_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # The e2e tests compile for sm_90 whatever machine they run on; no GPU work in the server.
    env.setdefault("PYTHONPATH", str(REPO))
    env.update(extra)
    return env


@pytest.fixture
def fake_gpu(monkeypatch):
    """GPU backends opened in this process without `fake=` run on the fake GPU (runner/fake.py),
    and hand that to their worker processes (`--fake`, a job's "fake", a Ray actor's argument).
    kernel-lsp reads no setting that selects it: the test sets the engine's default here. A
    front end started as a process: tests/kernel_lsp_on_fake_gpu.py."""
    from kernel_lsp.evaluation import local

    monkeypatch.setattr(local, "FAKE_GPU_DEFAULT", True)
