"""The server's start-up check of a workspace (issue 45): bounded by the `startupCheckFiles`
setting, and run in the background, after the files the editor has open, one file at a time."""

from __future__ import annotations

import asyncio

from kernel_lsp.config import Settings, settings_from_dict
from kernel_lsp.server.watching import Watching


class FakeAnalysis:
    """Records each request; a check ends when the test says so."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, bool]] = []
        self.results: dict[str, object] = {}
        self.done: dict[str, asyncio.Event] = {}

    def request(self, path: str, background: bool = False) -> None:
        self.requests.append((path, background))
        self.done.setdefault(path, asyncio.Event())

    async def wait(self, path: str, timeout: float = 60.0) -> None:
        await asyncio.wait_for(self.done[path].wait(), timeout)

    def checked_paths(self) -> list[str]:
        return sorted(self.results)

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
            assert analysis.requests[-1] == (expected, True)
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
            assert server.analysis.requests == [(f"{root}/a.cu", False)]
            assert root in watching.ready
        finally:
            watching.stop()

    asyncio.run(run())
