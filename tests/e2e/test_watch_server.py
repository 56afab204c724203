"""Workspace watching end to end: the real server as a subprocess (pytest-lsp), real files
changed on disk in tmp_path, diagnostics observed as an editor sees them."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from kernel_lsp.server.uris import path_to_uri

pytestmark = pytest.mark.slow  # the slow tier (bursts of file events, watcher start-ups): python -m pytest -m slow

REPO = Path(__file__).resolve().parents[2]
GOOD_HEADER = "__device__ float scale(float x) { return 2.0f * x; }\n"
BAD_HEADER = "__device__ float scale(float x) { return 2.0f * undefined_y; }\n"
KERNEL = '#include "{header}"\n__global__ void k(float* x) {{ x[threadIdx.x] = scale(x[threadIdx.x]); }}\n'
GOOD_CU = "__global__ void ok(float* x) { x[threadIdx.x] = 1.0f; }\n"
BAD_CU = "__global__ void bad(float* x) { x[threadIdx.x] = not_declared; }\n"
TIMEOUT = 90.0


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    return env


SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "kernel_lsp"], server_env=_env())


async def start(client: LanguageClient, root: Path, options: dict | None = None) -> None:
    await client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            initialization_options=options,
            root_uri=path_to_uri(str(root)),
            workspace_folders=[types.WorkspaceFolder(uri=path_to_uri(str(root)), name="ws")],
        )
    )


async def until(predicate, timeout: float = TIMEOUT, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def diags(client: LanguageClient, path: Path) -> list[types.Diagnostic] | None:
    return client.diagnostics.get(path_to_uri(str(path)))


def has_errors(client: LanguageClient, path: Path) -> bool:
    d = diags(client, path)
    return bool(d) and any(x.severity == types.DiagnosticSeverity.Error for x in d)


def is_clean(client: LanguageClient, path: Path) -> bool:
    d = diags(client, path)
    return d is not None and not any(x.severity == types.DiagnosticSeverity.Error for x in d)


async def stats(client: LanguageClient) -> dict:
    result = await client.protocol.send_request_async("kernelLsp/watchStats", None)
    # pygls hands back JSON objects of unknown methods as named tuples.
    return result._asdict() if hasattr(result, "_asdict") else dict(result)


async def _watching(client: LanguageClient) -> dict:
    """Wait until the server watches its folder (the start-up walk runs off the loop)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        s = await stats(client)
        if s["folders"]:
            return s
        await asyncio.sleep(0.05)
    raise AssertionError("the server never started watching")


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_header_change_on_disk_rechecks_includer_and_fix_clears(client: LanguageClient, tmp_path):
    (tmp_path / "leaf.cuh").write_text(GOOD_HEADER)
    (tmp_path / "mid.cuh").write_text('#include "leaf.cuh"\n')
    main = tmp_path / "main.cu"
    main.write_text(KERNEL.format(header="mid.cuh"))
    await start(client, tmp_path)
    await _watching(client)
    await until(lambda: is_clean(client, main), what="the start-up check of main.cu")

    # The header main.cu reads through mid.cuh breaks on disk: main.cu hears of it.
    (tmp_path / "leaf.cuh").write_text(BAD_HEADER)
    await until(lambda: has_errors(client, main), what="errors on main.cu after leaf.cuh broke")
    assert any("undefined_y" in d.message for d in diags(client, main))

    (tmp_path / "leaf.cuh").write_text(GOOD_HEADER)
    await until(lambda: is_clean(client, main), what="main.cu clean again after the fix")


async def test_new_file_with_error_is_checked(client: LanguageClient, tmp_path):
    (tmp_path / "ok.cu").write_text(GOOD_CU)
    await start(client, tmp_path)
    await _watching(client)
    sub = tmp_path / "generated" / "deep"
    sub.mkdir(parents=True)
    bad = sub / "new.cu"
    bad.write_text(BAD_CU)
    await until(lambda: has_errors(client, bad), what="diagnostics for a file created on disk")
    assert any("not_declared" in d.message for d in diags(client, bad))


async def test_the_startup_check_is_bounded_by_its_setting(client: LanguageClient, tmp_path):
    """`startupCheckFiles`: a folder with more CUDA files than it says is not checked at start-up
    (issue 45: only an undocumented environment variable bounded it); the files are checked as
    they are opened or change."""
    for name in ("a.cu", "b.cu", "c.cu"):
        (tmp_path / name).write_text(BAD_CU)
    await start(client, tmp_path, {"startupCheckFiles": 2})
    watched = await _watching(client)  # the folder counts as watched once its walk is done
    assert (watched["requested"], watched["queued"], watched["compiles"]) == (0, 0, 0)
    (tmp_path / "b.cu").write_text(BAD_CU + "// changed\n")
    await until(lambda: has_errors(client, tmp_path / "b.cu"), what="b.cu checked after it changed")
    assert diags(client, tmp_path / "a.cu") is None


async def test_deleted_file_diagnostics_are_cleared(client: LanguageClient, tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text(BAD_CU)
    await start(client, tmp_path)
    await _watching(client)
    await until(lambda: has_errors(client, bad), what="the start-up check of bad.cu")
    bad.unlink()
    await until(
        lambda: diags(client, bad) is not None and len(diags(client, bad)) == 0,
        what="bad.cu's diagnostics cleared after delete",
    )


async def test_git_and_ignored_folders_are_not_checked(client: LanguageClient, tmp_path):
    (tmp_path / ".gitignore").write_text("generated/\n")
    await start(client, tmp_path)
    await _watching(client)
    for folder in (".git", "build", "generated"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "x.cu").write_text(BAD_CU)
    marker = tmp_path / "seen.cu"
    marker.write_text(BAD_CU)  # written last: once it is checked, the others had their chance
    await until(lambda: has_errors(client, marker), what="the marker file")
    await asyncio.sleep(0.5)
    for folder in (".git", "build", "generated"):
        assert diags(client, tmp_path / folder / "x.cu") is None, folder


async def test_exclude_setting_reaches_running_watchers(client: LanguageClient, tmp_path):
    gen = tmp_path / "generated"
    gen.mkdir()
    await start(client, tmp_path, {"exclude": ["generated"]})
    await _watching(client)
    (gen / "a.cu").write_text(BAD_CU)
    marker = tmp_path / "seen.cu"
    marker.write_text(BAD_CU)  # written last: once it is checked, a.cu had its chance
    await until(lambda: has_errors(client, marker), what="the marker file")
    await asyncio.sleep(0.5)
    assert diags(client, gen / "a.cu") is None, "an excluded folder was checked"

    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"kernelLsp": {"exclude": []}})
    )
    (gen / "b.cu").write_text(BAD_CU)
    await until(lambda: has_errors(client, gen / "b.cu"), what="a file in the folder no longer excluded")


async def test_open_document_keeps_editor_text_but_follows_its_header(client: LanguageClient, tmp_path):
    header = tmp_path / "h.cuh"
    header.write_text(GOOD_HEADER)
    main = tmp_path / "main.cu"
    main.write_text(KERNEL.format(header="h.cuh"))
    await start(client, tmp_path)
    await _watching(client)
    # The editor holds text with an error that is not on disk.
    editor_text = KERNEL.format(header="h.cuh") + "__global__ void e(float* x) { x[0] = editor_only; }\n"
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(
                uri=path_to_uri(str(main)), language_id="cuda", version=1, text=editor_text
            )
        )
    )
    await until(
        lambda: any("editor_only" in d.message for d in diags(client, main) or []),
        what="the editor text's error",
    )
    # The file changes on disk (clean text): the editor's diagnostics stay.
    main.write_text(GOOD_CU)
    before = (await stats(client))["batches"]
    deadline = time.monotonic() + 10
    while (await stats(client))["batches"] == before and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)
    assert any("editor_only" in d.message for d in diags(client, main))
    # A header it includes breaks on disk: it is re-checked, with the editor's text.
    header.write_text(BAD_HEADER)
    await until(
        lambda: any("undefined_y" in d.message for d in diags(client, main) or []),
        what="the open file re-checked after its header changed",
    )
    assert any("editor_only" in d.message for d in diags(client, main))


async def test_burst_of_200_writes_is_batched(client: LanguageClient, tmp_path):
    files = [tmp_path / f"f{i:02d}.cu" for i in range(20)]
    for f in files:
        f.write_text(GOOD_CU)
    await start(client, tmp_path)
    await _watching(client)
    await until(lambda: all(is_clean(client, f) for f in files), what="the start-up checks")
    await asyncio.sleep(0.5)
    before = await stats(client)
    # 10 rounds over 20 files: 200 writes; the last round breaks every odd file.
    for round_ in range(10):
        for i, f in enumerate(files):
            last = round_ == 9
            f.write_text((BAD_CU if last and i % 2 else GOOD_CU) + f"// round {round_}\n")
    # The server answers while it works.
    t0 = time.monotonic()
    await stats(client)
    assert time.monotonic() - t0 < 5.0
    await until(
        lambda: all(has_errors(client, f) if i % 2 else is_clean(client, f) for i, f in enumerate(files)),
        what="the final diagnostics after the burst",
    )
    await asyncio.sleep(1.0)  # let any straggling batch land before counting
    after = await stats(client)
    compiles = after["compiles"] - before["compiles"]
    assert compiles <= 60, f"{compiles} compiles for 200 writes to 20 files"
    assert after["batches"] - before["batches"] <= 6
    for i, f in enumerate(files):
        assert has_errors(client, f) if i % 2 else is_clean(client, f), f


async def test_symlink_loop_is_harmless(client: LanguageClient, tmp_path):
    (tmp_path / "sub").mkdir()
    os.symlink("..", tmp_path / "sub" / "up")  # sub/up -> the root: a loop
    os.symlink(".", tmp_path / "self")
    (tmp_path / "sub" / "a.cu").write_text(GOOD_CU)
    await start(client, tmp_path)
    s = await _watching(client)
    assert s["graphFiles"] == 1  # a.cu once, not once per trip round the loop
    bad = tmp_path / "sub" / "b.cu"
    bad.write_text(BAD_CU)
    await until(lambda: has_errors(client, bad), what="a new file beside a symlink loop")
    assert not [u for u in client.diagnostics if "/up/" in u or "/self/" in u]


# --- a folder the server cannot read ------------------------------------------------------------
# The tests run as root, for whom chmod 000 stops nothing. So this server runs as `nobody`
# (setpriv), over a workspace outside tmp_path (pytest's tmp root is private to root).

NOBODY = 65534
SETPRIV = shutil.which("setpriv")
AS_NOBODY_PREFIX = [SETPRIV or "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
# The server's compile workers are spawned with sys.executable; the venv's interpreter may be a
# link into a folder only root can enter, so use one `nobody` can start, with the venv's packages.
PROBE = "import sys, subprocess, kernel_lsp, pygls, watchdog; subprocess.run([sys.executable, '-c', '0'], check=True)"


def _nobody_env() -> dict[str, str]:
    import site

    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *site.getsitepackages()])
    env["HOME"] = tempfile.gettempdir()
    return env


def _nobody_python() -> tuple[str | None, str]:
    """An interpreter `nobody` can run (and re-run, for spawned workers), or why there is none."""
    if os.geteuid() != 0:
        return None, "needs root to start the server as another user"
    if not SETPRIV:
        return None, "setpriv not found"
    import subprocess

    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [
        sys.executable,
        os.path.realpath(sys.executable),
        shutil.which(version),
        f"/usr/bin/{version}",
    ]
    for python in dict.fromkeys(c for c in candidates if c):
        r = subprocess.run(
            [*AS_NOBODY_PREFIX, python, "-c", PROBE],
            capture_output=True,
            env=_nobody_env(),
            check=False,
            cwd="/",
        )
        if r.returncode == 0:
            return python, ""
    return None, "user nobody cannot start (and re-start) a Python with this project's packages"


NOBODY_PYTHON, NO_NOBODY_REASON = _nobody_python()
AS_NOBODY = ClientServerConfig(
    server_command=[*AS_NOBODY_PREFIX, NOBODY_PYTHON or sys.executable, "-m", "kernel_lsp"],
    server_env=_nobody_env(),
)


@pytest.fixture
def public_workspace():
    root = Path(tempfile.mkdtemp(prefix="kernel-lsp-watch-"))
    root.chmod(0o755)
    yield root
    for dirpath, dirnames, _ in os.walk(root):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    shutil.rmtree(root, ignore_errors=True)


@pytest_lsp.fixture(config=AS_NOBODY)
async def nobody_client(lsp_client: LanguageClient):
    yield lsp_client
    await lsp_client.shutdown_session()


@pytest.mark.skipif(NOBODY_PYTHON is None, reason=NO_NOBODY_REASON)
async def test_unreadable_folder_is_reported_and_the_rest_works(
    nobody_client: LanguageClient, public_workspace
):
    root = public_workspace
    locked = root / "locked"
    locked.mkdir()
    (locked / "hidden.cu").write_text(BAD_CU)
    locked.chmod(0)
    (root / "ok.cu").write_text(GOOD_CU)
    (root / "ok.cu").chmod(0o644)
    await start(nobody_client, root, {"gpu": {"enabled": False}})  # compile checks only
    s = await _watching(nobody_client)
    assert any("locked" in p and "Permission denied" in p for p in s["problems"]), s["problems"]
    assert any("locked" in m.message for m in nobody_client.log_messages)
    # Past the locked folder the watcher still works: a new file makes a batch and a check
    # request. (Whether NVRTC itself loads for `nobody` depends on how this machine installed
    # Python, so the compile result is not asserted here; the other tests cover it as root.)
    before = await stats(nobody_client)
    bad = root / "new.cu"
    bad.write_text(BAD_CU)
    bad.chmod(0o644)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        now = await stats(nobody_client)
        if now["batches"] > before["batches"] and now["requested"] > before["requested"]:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(f"no batch for a new file beside an unreadable folder: {now}")
    assert diags(nobody_client, locked / "hidden.cu") is None
