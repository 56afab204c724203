"""kernel-lsp's temporary folders (issue 45: `kernel-lsp-nvcc-*` folders stayed behind when the
server exited mid-compile, and the test suite left about 220 worker and accused folders): each is
removed when its work ends, also when the process that made it is killed, and what a killed
process left is reaped later, safely: only folders of this user, named kernel-lsp-..., whose
owner file names a process of this pid namespace that is gone."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kernel_lsp import tempdirs
from kernel_lsp.compile.jobs import WorkerPool

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tmp_root(tmp_path, monkeypatch):
    """The temporary folder, for this process and its children: tmp_path."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    return tmp_path


def ours(root: Path) -> list[str]:
    """kernel-lsp's folders there (not the GPU turns' lock files, which stay by design)."""
    return sorted(p.name for p in root.iterdir() if p.name.startswith("kernel-lsp-") and p.is_dir())


def made_by_a_process_that_was_killed(root: Path, prefix: str = "kernel-lsp-nvcc-") -> Path:
    """A folder whose maker was SIGKILLed before it could remove it."""
    code = (
        "import os, signal, sys\n"
        "from kernel_lsp import tempdirs\n"
        f"print(tempdirs.make({prefix!r}), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(root))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    folder = Path(done.stdout.strip())
    assert done.returncode == -9 and folder.parent == root and folder.is_dir(), done
    return folder


def test_a_folder_is_private_names_its_owner_and_a_temporary_one_goes_at_the_end(tmp_root):
    with tempdirs.temporary("kernel-lsp-nvcc-") as folder:
        assert os.stat(folder).st_mode & 0o777 == 0o700
        pid, started, namespace = (Path(folder) / tempdirs.OWNER_FILE).read_text().split()
        assert int(pid) == os.getpid() and started.isdigit() and namespace.startswith("pid:")
        assert tempdirs.reap() == 0 and os.path.isdir(folder)  # its owner runs
    assert ours(tmp_root) == []
    with pytest.raises(RuntimeError), tempdirs.temporary("kernel-lsp-nvcc-"):
        raise RuntimeError("a compile that raised")
    assert ours(tmp_root) == []


def test_the_folders_of_a_killed_process_are_reaped_and_nothing_else(tmp_root):
    left = made_by_a_process_that_was_killed(tmp_root)
    (left / "k.cu").write_text("__global__ void k() {}\n")
    (left / "inner").mkdir()
    alive = Path(tempdirs.make("kernel-lsp-accused-"))  # this process's: kept
    foreign = tmp_root / "kernel-lsp-nvcc-foreign"  # no owner file (another tool's, an older one's)
    foreign.mkdir()
    other_ns = tmp_root / "kernel-lsp-nvcc-otherns"  # a dead pid, but of another pid namespace
    other_ns.mkdir()
    (other_ns / tempdirs.OWNER_FILE).write_text(f"{left.stat().st_ino % 10**6 + 4_000_000} 1 pid:[1]\n")
    reused = tmp_root / "kernel-lsp-nvcc-reused"  # our pid, another start time: a pid reused
    reused.mkdir()
    (reused / tempdirs.OWNER_FILE).write_text(f"{os.getpid()} 1 {os.readlink('/proc/self/ns/pid')}\n")
    target = tmp_root / "precious"
    target.mkdir()
    (target / "keep").write_text("x")
    link = tmp_root / "kernel-lsp-nvcc-link"  # a link named like ours: never followed
    link.symlink_to(target)
    lying = tmp_root / "kernel-lsp-nvcc-lying"  # an owner file that is a link to ours
    lying.mkdir()
    (lying / tempdirs.OWNER_FILE).symlink_to(left / tempdirs.OWNER_FILE)

    assert tempdirs.reap() == 2
    assert not left.exists() and not reused.exists()
    assert alive.is_dir() and foreign.is_dir() and other_ns.is_dir() and lying.is_dir()
    assert link.is_symlink() and (target / "keep").exists()


def test_a_process_reaps_what_killed_ones_left_when_it_makes_its_first_folder(tmp_root, monkeypatch):
    left = made_by_a_process_that_was_killed(tmp_root)
    monkeypatch.setattr(tempdirs, "_reaped", False)
    with tempdirs.temporary("kernel-lsp-nvcc-"):
        assert not left.exists()


def until(condition, within_s: float = 30.0) -> bool:
    deadline = time.monotonic() + within_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(condition())


def _make_and_hang(prefix: str) -> None:
    tempdirs.make(prefix)
    time.sleep(300)


def test_the_pool_removes_the_folders_of_a_worker_it_kills_and_its_own_when_closed(tmp_root):
    """A compile cut short at its deadline, or by the server's exit, leaves nothing (nvcc's
    folder is removed by `temporary` only when the compile returns)."""
    pool = WorkerPool(1, "spawn")
    try:
        timed_out = pool.submit(_make_and_hang, ("kernel-lsp-nvcc-",), 5.0)
        assert timed_out.result(120).reason == "timeout"
        # The job's result is set, then its worker killed and its folders removed.
        assert until(lambda: not [n for n in ours(tmp_root) if n.startswith("kernel-lsp-nvcc-")])
        pool.submit(_make_and_hang, ("kernel-lsp-nvcc-",), 300.0)
        assert until(lambda: any(n.startswith("kernel-lsp-nvcc-") for n in ours(tmp_root)))
        assert [n for n in ours(tmp_root) if n.startswith("kernel-lsp-pool-")]  # the workers' logs
    finally:
        pool.close()  # the server's exit, mid-compile
    assert ours(tmp_root) == []


def test_a_gpu_workers_folders_and_its_accused_ones_go_with_it(tmp_root):
    """The GPU worker (a judge, on the fake GPU) and the accused processes it started: their
    folders are removed when the session closes, and when the worker is killed."""
    from kernel_lsp.evaluation.worker_process import WorkerProcess

    for end in ("close", "kill"):
        worker = WorkerProcess(0, fake=True, env=dict(os.environ, PYTHONPATH=str(REPO)), sandboxed=True)
        try:
            reply = worker.request({"op": "hello"}, None, 120.0)
            assert reply.get("available"), reply
            assert any(n.startswith("kernel-lsp-gpu-worker-") for n in ours(tmp_root))
            assert any(n.startswith("kernel-lsp-accused-") for n in ours(tmp_root))
        finally:
            getattr(worker, end)()
        assert ours(tmp_root) == [], end
