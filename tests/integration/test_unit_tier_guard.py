"""The unit tier's guard (tests/unit_tier.py) fails a unit test that starts a process or
compiles, however it does so and even when the code under test swallows the refusal; it lets a
pure test pass, and it leaves the tests outside its folder alone. Without the guard the same tests
pass, so each one below is a real way in. (An integration test: it runs pytest as a child.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SPAWNING_TESTS = textwrap.dedent(
    """\
    import asyncio, multiprocessing, os, subprocess, sys

    import pytest


    def test_runs_a_subprocess():
        subprocess.run([sys.executable, "-c", "pass"], check=True)


    def test_swallows_the_refusal():
        try:
            subprocess.check_output([sys.executable, "-c", "print('a compiler, say')"])
        except Exception:
            pass


    def test_starts_a_multiprocessing_worker():
        p = multiprocessing.get_context("spawn").Process(target=int)
        p.start()
        p.join()


    def test_forks():
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)


    def test_starts_an_asyncio_subprocess():
        async def child():
            proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
            await proc.wait()

        asyncio.run(child())


    def test_compiles_with_nvrtc():
        from kernel_lsp.compile import CompileOptions, compile_source

        result = compile_source("__global__ void k(int* x) { *x = 1; }", "k.cu", CompileOptions(arch="sm_90"))
        assert result.ok, [d.message for d in result.diagnostics]


    @pytest.fixture
    def built():
        subprocess.run([sys.executable, "-c", "pass"], check=True)


    def test_spawns_in_a_fixture(built):
        pass
    """
)
SPAWNING = [
    "test_runs_a_subprocess",
    "test_swallows_the_refusal",
    "test_starts_a_multiprocessing_worker",
    "test_forks",
    "test_starts_an_asyncio_subprocess",
    "test_compiles_with_nvrtc",
    "test_spawns_in_a_fixture",
]

PURE_TEST = "def test_pure():\n    assert sorted([3, 1, 2]) == [1, 2, 3]\n"
ELSEWHERE_TEST = (
    "import subprocess, sys\n\n\ndef test_a_process_outside_the_unit_tier():\n"
    "    subprocess.run([sys.executable, '-c', 'pass'], check=True)\n"
)


def _suite(tmp_path: Path, guarded: bool) -> Path:
    root = tmp_path / ("guarded" if guarded else "bare")
    (root / "unit").mkdir(parents=True)
    (root / "integration").mkdir()
    if guarded:  # registered as tests/conftest.py does
        shutil.copy(REPO / "tests" / "unit_tier.py", root / "unit_tier.py")
        (root / "conftest.py").write_text(
            "from unit_tier import pytest_runtest_call, pytest_runtest_setup, pytest_runtest_teardown\n"
        )
    (root / "unit" / "test_spawns.py").write_text(SPAWNING_TESTS)
    (root / "unit" / "test_pure.py").write_text(PURE_TEST)
    (root / "integration" / "test_elsewhere.py").write_text(ELSEWHERE_TEST)
    return root


def _outcomes(root: Path) -> dict[str, str]:
    """Each test's outcome line (`-rA`: `PASSED unit/test_pure.py::test_pure`, `FAILED ... - why`)."""
    env = dict(os.environ, COLUMNS="1000")  # the reasons whole in the short summary
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "."],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines: dict[str, str] = {}
    for line in out.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR") and "::" in rest:
            name = rest.split("::", 1)[1].split(" ", 1)[0]
            lines[name] = line
    assert lines, out.stdout[-3000:] + out.stderr[-3000:]
    return lines


def test_the_guard_fails_every_way_a_unit_test_starts_a_process_or_compiles(tmp_path):
    guarded = _outcomes(_suite(tmp_path, guarded=True))
    for name in SPAWNING:
        assert guarded[name].startswith(("FAILED", "ERROR")), guarded[name]
        assert "the unit tier (tests/unit/) starts no process" in guarded[name], guarded[name]
    assert guarded["test_pure"].startswith("PASSED"), guarded["test_pure"]
    # The guard reaches only its own folder: a process started by a test beside it is fine.
    assert guarded["test_a_process_outside_the_unit_tier"].startswith("PASSED")

    # The same tests with no guard: each really starts a process or compiles, and passes.
    bare = _outcomes(_suite(tmp_path, guarded=False))
    for name in [*SPAWNING, "test_pure", "test_a_process_outside_the_unit_tier"]:
        assert bare[name].startswith("PASSED"), bare[name]
