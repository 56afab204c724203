"""When the server runs a first look (nvcc's front end beside the full compile): for files whose
front end is well under the full compile, learned from clean checks; never for NVRTC files."""

from __future__ import annotations

import asyncio

from kernel_lsp.check import FileCheck
from kernel_lsp.config import Settings
from kernel_lsp.model import CompileResult, Diagnostic, Severity
from kernel_lsp.server.analysis import Analysis, Snapshot
from kernel_lsp.workspace import CheckRequest, Workspace


def _analysis() -> Analysis:
    return Analysis(
        publish=lambda path, diagnostics: None,
        snapshot=lambda path: Snapshot(None, None),
        workspace=lambda: Workspace.fixed(Settings()),
        workers=1,
    )


def _check(seconds: float, error: bool = False) -> FileCheck:
    result = CompileResult("k.cu", "sm_90", not error, compiler="nvcc", duration_s=seconds)
    found = [Diagnostic("k.cu", 1, 1, Severity.ERROR, "x")] if error else []
    return FileCheck("k.cu", found, [result])


def test_a_first_look_runs_until_the_front_end_proves_most_of_the_compile():
    a = _analysis()
    assert a._first_look_pays("k.cu")
    a._time_phases("k.cu", _check(20.0), front_s=1.0)  # templates slow to generate code for
    assert a._first_look_pays("k.cu")
    a._time_phases("k.cu", _check(10.0), front_s=9.0)  # CUB's headers: the front end is the compile
    assert not a._first_look_pays("k.cu")
    # Skipped since, but the full compile grew: the last front end is now well under it.
    a._time_phases("k.cu", _check(30.0), front_s=None)
    assert a._first_look_pays("k.cu")


def test_a_check_with_an_error_teaches_nothing():
    a = _analysis()
    a._time_phases("k.cu", _check(2.0, error=True), front_s=2.0)
    assert a._first_look_pays("k.cu")


def test_nvrtc_files_get_no_first_look():
    a = _analysis()
    a._nvrtc_only.add("k.cu")
    assert not a._first_look_pays("k.cu")


def test_nothing_starts_after_shutdown(tmp_path):
    # A compile cancelled by the shutdown asked for a re-check, which started a worker pool again
    # on a closed server (it then never exited).
    path = tmp_path / "k.cu"
    path.write_text("__global__ void k(float* x) { x[0] = 1; }\n")

    async def run() -> None:
        a = _analysis()
        a.shutdown()
        a.request(str(path))
        await a.wait(str(path), timeout=10)
        assert not a.workers_running and a.compiles == 0

    asyncio.run(run())


def test_a_check_asked_for_again_publishes_no_early_word():
    """CI, 2026-12-07: a compile_commands.json fixed and the file saved while the check with the
    broken database ran; that check's NVRTC errors (which carry no database warning) were
    published after the save and read as the new verdict. Its full result still lands."""
    published: list[list[Diagnostic]] = []
    a = Analysis(
        publish=lambda path, diagnostics: published.append(list(diagnostics)),
        snapshot=lambda path: Snapshot("text", 1),
        workspace=lambda: Workspace.fixed(Settings()),
        workers=1,
    )
    path = "/w/k.cu"
    error = Diagnostic(path, 1, 1, Severity.ERROR, 'cannot open source file "scale.cuh"')
    nvrtc = CompileResult(path, "sm_90", False, [error], compiler="nvrtc")
    a._again.add(path)  # a save came while the check ran
    a._publish_preview(path, Snapshot("text", 1), nvrtc, [])
    a._publish_first_look(path, Snapshot("text", 1), FileCheck(path, [error], [nvrtc]))
    assert published == [] and a.first_looks == 0
    a._again.clear()  # nothing asked since: the early word is the newest there is
    a._publish_preview(path, Snapshot("text", 1), nvrtc, [])
    assert published and published[-1] == [error] and a.first_looks == 1
    # The editor's text moved on: stale either way.
    a._publish_first_look(path, Snapshot("older", 0), FileCheck(path, [error], [nvrtc]))
    assert a.first_looks == 1


def test_a_first_look_beaten_by_the_full_compile_is_not_run_again():
    """A first look that lands after the full result said nothing sooner and only took a core
    from the compile; it was learned only when it landed first, so one that kept losing ran
    beside every save (issue 45: 2 cores, nvcc's front end as long as its -cubin)."""
    import concurrent.futures

    class Scheduler:
        def __init__(self) -> None:
            self.cancelled: list[str] = []

        def first_look(self, request, workspace) -> concurrent.futures.Future:
            return concurrent.futures.Future()  # still running when the full result is in

        def check(self, request, workspace, on_preview) -> concurrent.futures.Future:
            done: concurrent.futures.Future = concurrent.futures.Future()
            done.set_result(_check(0.4))
            return done

        def cancel(self, token: str) -> None:
            self.cancelled.append(token)

    a = _analysis()
    scheduler = Scheduler()
    a._scheduler = scheduler  # type: ignore[assignment]
    snap = Snapshot("__global__ void k() {}\n", 1)
    request = CheckRequest("k.cu", snap.text, None, (), None, "token", "save")
    assert a._first_look_pays("k.cu")
    check = asyncio.run(a._compile("k.cu", snap, request, Workspace.fixed(Settings())))
    assert check is not None and not check.errors
    assert scheduler.cancelled == ["token"]
    assert not a._first_look_pays("k.cu")
