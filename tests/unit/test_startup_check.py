"""The server's start-up check of a workspace (issue 45): bounded by the `startupCheckFiles`
setting, and run in the background, after the files the editor has open, one file at a time."""

from __future__ import annotations

import asyncio
import json

from kernel_lsp.check import FileCheck
from kernel_lsp.config import Settings, settings_from_dict
from kernel_lsp.server.analysis import Analysis, Snapshot
from kernel_lsp.server.watching import Watching
from kernel_lsp.workspace import Workspace


class FakeAnalysis:
    """Records each request; a check ends when the test says so."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.results: dict[str, object] = {}
        self.rechecked: list[list[str]] = []
        self.done: dict[str, asyncio.Event] = {}

    def request(self, path: str, trigger: str = "save") -> None:
        self.requests.append((path, trigger))
        self.done.setdefault(path, asyncio.Event())

    async def wait(self, path: str, timeout: float = 60.0) -> None:
        await asyncio.wait_for(self.done[path].wait(), timeout)

    def checked_paths(self) -> list[str]:
        return sorted(self.results)

    async def recheck_changed(self, paths: list[str]) -> None:
        self.rechecked.append(paths)

    def finish(self, path: str) -> None:
        self.results[path] = object()
        self.done[path].set()


class FakeServer:
    def __init__(self, open_files: set[str]) -> None:
        self.analysis = FakeAnalysis()
        self.settings = Settings()
        self.open = open_files
        self.root: str | None = None
        self.log_file = None
        self.workspace = None

    def root_path(self) -> str | None:
        return self.root

    @property
    def engine(self) -> Workspace:
        return Workspace.fixed(self.settings, self.root)

    def open_document(self, path: str):
        return object() if path in self.open else None


def test_the_setting_is_read_and_validated():
    assert Settings().startup_check_files == 50
    settings, problems = settings_from_dict({"startupCheckFiles": 3})
    assert problems == [] and settings.startup_check_files == 3
    _, problems = settings_from_dict({"startupCheckFiles": -1})
    assert problems and "startupCheckFiles" in problems[0]


def test_files_are_checked_one_at_a_time_in_the_background_skipping_open_and_checked_ones():
    async def run() -> None:
        server = FakeServer(open_files={"/w/open.cu"})
        watching = Watching(server)
        analysis = server.analysis
        analysis.results["/w/done.cu"] = object()  # a batch checked it meanwhile
        watching._check_at_startup(["/w/c.cu", "/w/open.cu", "/w/a.cu", "/w/done.cu", "/w/b.cu"])
        for expected in ("/w/a.cu", "/w/b.cu", "/w/c.cu"):
            for _ in range(50):
                await asyncio.sleep(0)
            # One request at a time: the next only once this one's check ended.
            assert analysis.requests[-1] == (expected, "batch")
            assert len(analysis.requests) == ("/w/a.cu", "/w/b.cu", "/w/c.cu").index(expected) + 1
            analysis.finish(expected)
        for _ in range(50):
            await asyncio.sleep(0)
        assert [p for p, _ in analysis.requests] == ["/w/a.cu", "/w/b.cu", "/w/c.cu"]
        assert not watching._starting and not watching._startup

    asyncio.run(run())


def test_files_checked_before_the_folder_was_watched_are_checked_again_once_it_is(tmp_path):
    """A compile_commands.json or header written between a file's check and the inotify watch
    reaches no batch: starting the watch asks for those files again (the cache answers where
    nothing changed). CI once saw the end-to-end test of a database rewritten on disk miss this."""

    async def run() -> None:
        server = FakeServer(open_files=set())
        root = server.root = str(tmp_path)
        (tmp_path / "a.cu").write_text("__global__ void a() {}\n")
        server.analysis.results = {f"{root}/a.cu": object(), f"{root}-other/b.cu": object()}
        watching = Watching(server)
        watching.loop, watching._slots = asyncio.get_running_loop(), asyncio.Semaphore(4)
        await watching._start(root)
        try:
            for _ in range(50):
                await asyncio.sleep(0)
            assert server.analysis.rechecked == [[f"{root}/a.cu"]]
            assert server.analysis.requests == [] and root in watching.ready
        finally:
            watching.stop()

    asyncio.run(run())


def test_a_file_is_checked_again_only_when_an_input_of_its_last_check_changed(tmp_path):
    # Its compile_commands.json rewritten: checked again; nothing changed: not published again
    # (an editor redraws, and Neovim re-notifies, on each publication).
    kernel = tmp_path / "src" / "k.cu"
    kernel.parent.mkdir()
    text = "__global__ void k(float* x) { x[0] = FACTOR; }\n"
    kernel.write_text(text)
    db = tmp_path / "compile_commands.json"
    db.write_text(json.dumps([{"directory": str(tmp_path), "command": "nvcc -DFACTOR=1 -c src/k.cu", "file": "src/k.cu"}]))
    path = str(kernel)

    async def run() -> list[str]:
        analysis = Analysis(
            publish=lambda path, diagnostics: None,
            snapshot=lambda p: Snapshot(text, 1) if p == path else Snapshot(None, None),
            workspace=lambda: Workspace.fixed(Settings(), str(tmp_path)),
            workers=1,
        )
        asked: list[str] = []
        analysis.request = lambda p, background=False: asked.append(p)  # type: ignore[method-assign]
        snap, workspace, _, spec_path, spec_text, includers = analysis._inputs(path)
        key, _ = workspace.check_key(path, snap.text, spec_path, spec_text, includers)
        assert key is not None
        analysis.results[path], analysis._keys[path] = FileCheck(path, [], []), key
        await analysis.recheck_changed([path])
        assert asked == []
        db.write_text(db.read_text().replace("FACTOR=1", "FACTOR=2") + " ")
        await analysis.recheck_changed([path])
        return asked

    assert asyncio.run(run()) == [path]
