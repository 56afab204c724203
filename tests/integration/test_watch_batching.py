"""The watcher engine: debounced batches, what is ignored, real inotify events, symlink loops
and folders that cannot be read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from kernel_lsp.watch import Batch, BatchCollector, IgnoreRules, WorkspaceWatcher, scan_tree


class Batches:
    def __init__(self) -> None:
        self.items: list[Batch] = []
        self.arrived = threading.Event()

    def __call__(self, batch: Batch) -> None:
        self.items.append(batch)
        self.arrived.set()

    def wait(self, count: int = 1, timeout: float = 10.0) -> list[Batch]:
        deadline = time.monotonic() + timeout
        while len(self.items) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.items

    def wait_quiet(self, quiet_s: float = 0.5, timeout: float = 10.0) -> list[Batch]:
        """Until no batch has come for `quiet_s`: on a loaded machine one write's events can
        arrive as two batches, the second after a fixed sleep."""
        deadline = time.monotonic() + timeout
        seen, since = len(self.items), time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - since < quiet_s:
            time.sleep(0.02)
            if len(self.items) != seen:
                seen, since = len(self.items), time.monotonic()
        return self.items


def test_500_events_become_one_batch_after_the_quiet_period():
    got = Batches()
    c = BatchCollector(got, debounce_s=0.2, max_delay_s=5.0)
    c.start()
    try:
        t0 = time.monotonic()
        for i in range(500):
            c.file_event(f"/w/f{i}.cu", True)
        got.wait(1)
        elapsed = time.monotonic() - t0
        time.sleep(0.4)  # nothing more comes
        assert len(got.items) == 1
        assert len(got.items[0].changed) == 500 and got.items[0].events == 500
        assert 0.18 <= elapsed < 2.0
    finally:
        c.stop()


def test_last_event_per_path_wins():
    got = Batches()
    c = BatchCollector(got, debounce_s=0.05)
    c.start()
    try:
        c.file_event("/w/a.cu", True)
        c.file_event("/w/a.cu", False)  # deleted ...
        c.file_event("/w/b.cu", False)
        c.file_event("/w/b.cu", True)  # ... and written again (an atomic save)
        c.dir_gone("/w/old")
        c.rules_changed()
        (batch,) = got.wait(1)
        assert batch.deleted == {"/w/a.cu"}
        assert batch.changed == {"/w/b.cu"}
        assert batch.deleted_dirs == {"/w/old"}
        assert batch.rules_changed
    finally:
        c.stop()


def test_a_steady_stream_is_cut_into_batches_by_the_max_delay():
    got = Batches()
    c = BatchCollector(got, debounce_s=0.2, max_delay_s=0.5)
    c.start()
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.6:  # an event every 50 ms: never quiet for 200 ms
            c.file_event("/w/busy.cu", True)
            time.sleep(0.05)
        got.wait(3, timeout=3)
        assert len(got.items) >= 2  # delivered while the stream went on
    finally:
        c.stop()


def test_ignore_rules(tmp_path):
    (tmp_path / ".gitignore").write_text("gen/\n*.tmp.cu\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("local.cu\n!keep.tmp.cu\n")
    rules = IgnoreRules(str(tmp_path), exclude=(str(tmp_path / "vendor"),))
    ignored = lambda rel, is_dir=False: rules.ignored(str(tmp_path / rel), is_dir)  # noqa: E731
    assert not ignored("a.cu")
    assert ignored(".git/a.cu")
    assert ignored("build/a.cu")
    assert ignored("node_modules/x/a.cu")
    assert ignored("cmake-build-debug/a.cu")
    assert ignored("gen/a.cu")
    assert ignored("gen", is_dir=True)
    assert ignored("x.tmp.cu")
    assert ignored("sub/local.cu")
    assert not ignored("local.cu")  # sub/.gitignore applies below sub only
    assert not ignored("sub/keep.tmp.cu")  # the deeper .gitignore decides last
    assert ignored("vendor/lib/a.cu")  # settings' exclude: a folder skips its subtree
    assert ignored("/elsewhere/a.cu")  # outside the root
    (tmp_path / ".gitignore").write_text("")
    assert ignored("gen/a.cu")  # cached until told ...
    rules.invalidate()
    assert not ignored("gen/a.cu")  # ... that a .gitignore changed


def _settle(watcher: WorkspaceWatcher, got: Batches) -> None:
    time.sleep(0.3)
    got.items.clear()


def test_real_events_are_filtered_and_batched(tmp_path):
    (tmp_path / ".gitignore").write_text("ignored/\n")
    got = Batches()
    w = WorkspaceWatcher(str(tmp_path), got, debounce_s=0.15)
    w.start()
    try:
        _settle(w, got)
        for d in ("src", ".git", "build", "ignored"):
            (tmp_path / d).mkdir()
            (tmp_path / d / "k.cu").write_text("x")
        (tmp_path / "src" / "k.spec.py").write_text("x")
        (tmp_path / "src" / "notes.txt").write_text("x")
        (tmp_path / "src" / "h.cuh").write_text("x")
        got.wait(1)
        time.sleep(0.4)
        changed = set().union(*(b.changed for b in got.items))
        assert changed == {str(tmp_path / "src" / n) for n in ("k.cu", "k.spec.py", "h.cuh")}
        got.items.clear()
        os.rename(tmp_path / "src" / "h.cuh", tmp_path / "src" / "h2.cuh")
        (tmp_path / "src" / "k.cu").unlink()
        got.wait(1)
        time.sleep(0.3)
        merged_changed = set().union(*(b.changed for b in got.items))
        merged_deleted = set().union(*(b.deleted for b in got.items))
        assert merged_changed == {str(tmp_path / "src" / "h2.cuh")}
        assert merged_deleted == {str(tmp_path / "src" / "h.cuh"), str(tmp_path / "src" / "k.cu")}
        got.items.clear()
        # Reading files (as the compiler does) is no event at all.
        for _ in range(20):
            (tmp_path / "src" / "h2.cuh").read_text()
        time.sleep(0.4)
        assert got.items == []
    finally:
        w.stop()


def test_a_compilation_database_counts_even_in_an_ignored_build_folder(tmp_path):
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "build").mkdir()
    got = Batches()
    w = WorkspaceWatcher(str(tmp_path), got, debounce_s=0.15)
    w.start()
    try:
        _settle(w, got)
        (tmp_path / "build" / "compile_commands.json").write_text("[]")
        (tmp_path / "build" / "other.json").write_text("[]")
        got.wait(1)
        got.wait_quiet()  # every batch of these writes is in before the list is cleared
        assert any(b.database_changed for b in got.items)
        assert not set().union(*(b.changed for b in got.items))  # the database is no file to check
        got.items.clear()
        # CMake rewriting the same text (every configure does): nothing to re-check.
        (tmp_path / "build" / "compile_commands.json").write_text("[]")
        time.sleep(0.5)
        assert not any(b.database_changed for b in got.items)
        (tmp_path / "build" / "compile_commands.json").write_text('[{"file": "k.cu"}]')
        got.wait(1)
        time.sleep(0.3)
        assert any(b.database_changed for b in got.items)
    finally:
        w.stop()


def test_a_database_rewritten_slowly_with_the_same_text_is_no_change(tmp_path):
    """A writer that truncates the database and writes it again a moment later (as a generator
    writing in place does, or any writer on a loaded machine): the text is read once the batch
    is due, not at the truncation, so the same text is no change. Read at each event, the empty
    file counted as new text, then the old text again (CI, 2026-11-29, under load)."""
    (tmp_path / "build").mkdir()
    database = tmp_path / "build" / "compile_commands.json"
    got = Batches()
    w = WorkspaceWatcher(str(tmp_path), got, debounce_s=0.4)
    w.start()
    try:
        _settle(w, got)
        database.write_text('[{"file": "k.cu"}]')  # the text the watcher then knows
        got.wait(1)
        got.wait_quiet()
        assert any(b.database_changed for b in got.items), got.items
        got.items.clear()
        with open(database, "w") as f:  # truncated: an inotify event for an empty file
            f.flush()
            time.sleep(0.1)  # within the quiet period
            f.write('[{"file": "k.cu"}]')
        time.sleep(1.0)
        assert not any(b.database_changed for b in got.items), got.items
        with open(database, "w") as f:
            f.flush()
            time.sleep(0.1)
            f.write('[{"file": "other.cu"}]')
        got.wait(1)
        got.wait_quiet()
        assert [b.database_changed for b in got.items] == [True], got.items
    finally:
        w.stop()


def test_symlink_loop_is_neither_followed_nor_fatal(tmp_path):
    (tmp_path / "sub").mkdir()
    os.symlink("..", tmp_path / "sub" / "up")
    os.symlink(str(tmp_path), tmp_path / "abs_loop")
    (tmp_path / "sub" / "a.cu").write_text("x")
    got = Batches()
    w = WorkspaceWatcher(str(tmp_path), got, debounce_s=0.1)
    w.start()
    try:
        scan = w.scan()
        assert scan.files == [str(tmp_path / "sub" / "a.cu")]
        _settle(w, got)
        (tmp_path / "sub" / "b.cu").write_text("x")
        got.wait(1)
        assert got.items and got.items[0].changed == {str(tmp_path / "sub" / "b.cu")}
    finally:
        w.stop()


def test_unwatchable_root_raises_a_clear_error(tmp_path):
    with pytest.raises(OSError, match="not a folder"):
        WorkspaceWatcher(str(tmp_path / "missing"), lambda b: None).start()


def test_unreadable_folder_is_reported_by_the_walk(tmp_path, monkeypatch):
    # os.walk reports unreadable folders through onerror; root ignores permissions, so the
    # error is injected here; the next test makes it real as another user.
    real_scandir = os.scandir

    def scandir(path="."):
        if os.fspath(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "x.cu").write_text("x")
    (tmp_path / "ok.cu").write_text("x")
    scan = scan_tree(str(tmp_path), IgnoreRules(str(tmp_path)))
    assert scan.files == [str(tmp_path / "ok.cu")]
    assert scan.problems == [f"cannot read folder {tmp_path / 'locked'}: Permission denied"]


NOBODY_SCRIPT = """
import json, sys, time, threading
from kernel_lsp.watch import WorkspaceWatcher
root = sys.argv[1]
got = []
w = WorkspaceWatcher(root, got.append, debounce_s=0.1)
w.start()
scan = w.scan()
print(json.dumps({"files": scan.files, "problems": scan.problems}), flush=True)
sys.stdin.readline()  # the test writes a file, then says go on
deadline = time.time() + 10
while not got and time.time() < deadline:
    time.sleep(0.05)
w.stop()
print(json.dumps({"changed": sorted(p for b in got for p in b.changed)}), flush=True)
"""


AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _public_copy_for_nobody(dest: Path) -> tuple[str | None, str]:
    """Copy what NOBODY_SCRIPT imports (kernel_lsp and its third-party imports) into `dest`, a
    folder anyone can read, and find an interpreter `nobody` can start: the checkout and its venv
    may sit under a private folder (a home folder with mode 700, a `mktemp -d`), where `nobody`
    reaches neither. Returns (python, "") or (None, why not)."""
    # Which files the import reads, asked of a fresh interpreter (this one has them loaded).
    listing = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, sysconfig, kernel_lsp.watch\n"
            "std = sysconfig.get_paths()['stdlib']\n"
            "tops = {m.split('.')[0] for m in list(sys.modules)}\n"
            "files = [getattr(sys.modules[t], '__file__', None) for t in tops]\n"
            "print(json.dumps(sorted(f for f in files if f and not f.startswith(std))))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    for origin in json.loads(listing.stdout):
        if os.path.basename(origin) == "__init__.py":
            top = os.path.basename(os.path.dirname(origin))
            shutil.copytree(os.path.dirname(origin), dest / top, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(origin, dest)
    for dirpath, _dirnames, filenames in os.walk(dest):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), 0o644)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [
        sys.executable,
        os.path.realpath(sys.executable),
        shutil.which(version),
        f"/usr/bin/{version}",
    ]
    for python in dict.fromkeys(c for c in candidates if c):
        probe = subprocess.run(
            [*AS_NOBODY, python, "-c", "import kernel_lsp.watch"],
            capture_output=True,
            env={**os.environ, "PYTHONPATH": str(dest)},
            cwd="/",
            check=False,
        )
        if probe.returncode == 0:
            return python, ""
    return None, f"user nobody cannot start a Python {version} that imports kernel_lsp.watch from {dest}"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_unreadable_folder_as_an_unprivileged_user():
    root = Path(tempfile.mkdtemp(prefix="kernel-lsp-watch-unit-"))
    code = Path(tempfile.mkdtemp(prefix="kernel-lsp-watch-code-"))
    try:
        code.chmod(0o755)
        python, why_not = _public_copy_for_nobody(code)
        if python is None:
            pytest.skip(why_not)
        root.chmod(0o777)
        locked = root / "locked"
        locked.mkdir()
        (locked / "x.cu").write_text("x")
        locked.chmod(0)
        (root / "ok.cu").write_text("x")
        env = {**os.environ, "PYTHONPATH": str(code)}
        p = subprocess.Popen(
            [*AS_NOBODY, python, "-c", NOBODY_SCRIPT, str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd="/",
        )
        first = json.loads(p.stdout.readline())
        assert first["files"] == [str(root / "ok.cu")]
        assert first["problems"] == [f"cannot read folder {locked}: Permission denied"]
        (root / "new.cu").write_text("x")
        p.stdin.write("go\n")
        p.stdin.flush()
        second = json.loads(p.stdout.readline())
        assert p.wait(timeout=20) == 0
        assert second["changed"] == [str(root / "new.cu")]
    finally:
        if (root / "locked").exists():
            os.chmod(root / "locked", 0o755)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(code, ignore_errors=True)
