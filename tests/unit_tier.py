"""The unit tier's guard: a test in tests/unit/ starts no process and compiles nothing (its hooks
are registered by tests/conftest.py, so that no second module named `conftest` shadows the one
the e2e tests import their helpers from).

No subprocess (so no nvcc, no clangd, no CLI run as a child), no fork, no `multiprocessing` worker
(so no compile pool, no GPU worker, no Ray), and no compile in this process either (NVRTC, through
`kernel_lsp.compile.nvrtc._run_nvrtc`; a hit in the in-memory compile cache is no compile). That
keeps `python -m pytest tests/unit` a tier of seconds. While a unit test runs (setup, call and
teardown), each of these raises `SpawnInUnitTier`; since the code under test may catch the error
(a failed compile becomes a diagnostic), the test fails afterwards all the same. A test that needs
a process or a compiler belongs in tests/integration/.

These hooks act only on tests in a folder named `unit` (`in_unit_tier`), so a whole-suite run
leaves tests/integration/ and tests/e2e/ alone.
tests/integration/test_unit_tier_guard.py proves the guard catches each way in.
"""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess

import pytest

TIER_MESSAGE = (
    "the unit tier (tests/unit/) starts no process and compiles nothing: no subprocess, compiler, "
    "CLI child, worker or NVRTC. "
    "Move this test to tests/integration/, or give the code a seam the test can fill in process"
)


class SpawnInUnitTier(RuntimeError):
    """Raised when a unit test tries to start a process or to compile."""


_violations: list[str] = []


def _refuse(what: str) -> None:
    _violations.append(what)
    raise SpawnInUnitTier(f"{what}: {TIER_MESSAGE}")


def _describe(args) -> str:
    if isinstance(args, (list, tuple)):
        return " ".join(str(a) for a in args[:3])
    return str(args)[:120]


def _patches():
    """(owner, name, replacement) for each way a process starts."""

    def popen_execute_child(self, args, *a, **k):
        _refuse(f"subprocess.Popen({_describe(args)})")

    def process_start(self):
        _refuse(f"multiprocessing {type(self).__name__}.start()")

    def run_nvrtc(source, path, flags):
        _refuse(f"NVRTC compile of {path}")

    def os_call(name):
        def refuse(*a, **k):
            _refuse(f"os.{name}({_describe(a[:1]) if a else ''})")

        return refuse

    # Popen._execute_child covers subprocess.run/check_output, os.popen and asyncio's
    # create_subprocess_exec/shell; BaseProcess.start covers multiprocessing (any start method),
    # ProcessPoolExecutor and the compile pool.
    patches = [
        (subprocess.Popen, "_execute_child", popen_execute_child),
        (multiprocessing.process.BaseProcess, "start", process_start),
    ]
    # The engine's compile (compile_nvrtc) calls this module global for every compile it does not
    # find in its cache; the error it raises becomes a diagnostic there, so the test fails afterwards.
    from kernel_lsp.compile import nvrtc

    patches.append((nvrtc, "_run_nvrtc", run_nvrtc))
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "spawnv", "spawnve"):
        if hasattr(os, name):
            patches.append((os, name, os_call(name)))
    return patches


_PATCHES: list = []  # made at the first unit test (the engine's compile module loads then)


def _phase():
    if not _PATCHES:
        _PATCHES.extend(_patches())
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in _PATCHES]
    _violations.clear()
    for owner, name, replacement in _PATCHES:
        setattr(owner, name, replacement)
    return saved


def _restore(saved) -> list[str]:
    for owner, name, original in saved:
        setattr(owner, name, original)
    found = list(_violations)
    _violations.clear()
    return found


def in_unit_tier(item) -> bool:
    return "unit" in item.path.relative_to(item.config.rootpath).parts[:-1]


def _phase_guard(where: str):
    """A hook wrapper that runs a unit test's phase with the guards on and fails it on a spawn."""

    def wrapper(item, *_args):
        if not in_unit_tier(item):
            return (yield)
        saved = _phase()
        try:
            result = yield
        finally:
            found = _restore(saved)
        if found:
            pytest.fail(f"{found[0]}{where}: {TIER_MESSAGE}", pytrace=False)
        return result

    return wrapper


pytest_runtest_setup = pytest.hookimpl(wrapper=True)(_phase_guard(" in setup"))
pytest_runtest_call = pytest.hookimpl(wrapper=True)(_phase_guard(""))
pytest_runtest_teardown = pytest.hookimpl(wrapper=True)(_phase_guard(" in teardown"))
