"""ARCHITECTURE.md's invariants about the front door and the server's process, checked: one rule
for the device arch, typed statuses and check requests, no file read on the event loop, no
compiler in the server's process, no plain open() where the GPU paths read files."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import threading
from pathlib import Path

import pytest

from kernel_lsp.compile.options import CompileOptions
from kernel_lsp.gpu_results import KernelCheck
from kernel_lsp.model import CheckStatus, Diagnostic, Severity
from kernel_lsp.workspace import CheckRequest, Workspace

PACKAGE = Path(__file__).resolve().parents[2] / "kernel_lsp"


# --- one rule for the device arch ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "device", "expected"),
    [
        ("sm_80", "sm_90", "sm_90"),  # another arch: the device's
        ("sm_90a", "sm_90", "sm_90a"),  # the device's `a` variant is kept
        ("sm_100f", "sm_100", "sm_100f"),  # and its `f` variant
        ("sm_90a", "sm_80", "sm_80"),  # a variant of another arch is not
        ("sm_75", None, "sm_75"),  # no device: as they are
    ],
)
def test_with_arch_is_the_one_rule_for_the_device_arch(options, device, expected):
    assert CompileOptions(arch=options).with_arch(device).arch == expected


def test_device_options_follow_the_rule(tmp_path):
    class Device:
        arch = "sm_90"

    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k() {}\n")
    workspace = Workspace({"arch": ["sm_90a"]})
    assert workspace.device_options(str(cu), Device()).arch == "sm_90a"
    assert Workspace({"arch": ["sm_80"]}).device_options(str(cu), Device()).arch == "sm_90"


def test_no_module_swaps_the_arch_by_hand():
    """The swap `if options.arch.rstrip("af") != dev.arch: replace(options, arch=...)` lives in
    CompileOptions.with_arch alone."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        rule = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "CompileOptions"]
        allowed = {id(n) for c in rule for n in ast.walk(c)}  # the rule itself (model.py)
        for node in ast.walk(tree):
            if (
                id(node) not in allowed
                and isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "replace"
                and any(k.arg == "arch" for k in node.keywords)
            ):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == []


# --- typed inputs and outputs ------------------------------------------------------------------


def test_a_check_status_is_typed_and_still_reads_as_its_word():
    check = KernelCheck("k", "failed")  # a plain word (a worker's reply) becomes the enum
    assert check.status is CheckStatus.FAILED
    assert check.status == "failed" and f"{check.status}" == "failed" and str(check.status) == "failed"
    assert json.dumps({"status": check.status}) == '{"status": "failed"}'
    with pytest.raises(ValueError):
        KernelCheck("k", "fine")  # a status no front end knows is refused where it is made


def test_a_check_request_is_what_the_workers_run(tmp_path):
    from kernel_lsp.check_jobs import check_job, front_end_job

    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k(float *x) { x[0] = 1.0f; }\n")
    workspace = Workspace()
    editor_text = "__global__ void k(float *x) { x[0] = undeclared; }\n"  # the editor's, not the disk's
    check = check_job(CheckRequest(str(cu), editor_text), workspace)
    assert any("undeclared" in d.message for d in check.diagnostics)
    assert all(r.cubin is None for r in check.results)  # returned lean
    assert not check_job(CheckRequest(str(cu)), workspace).diagnostics
    assert front_end_job(CheckRequest(str(cu)), workspace) is None  # NVRTC: nothing quicker


# --- no file read on the event loop ----------------------------------------------------------------


def test_publishing_an_unopened_files_findings_reads_it_off_the_event_loop(tmp_path, monkeypatch):
    from kernel_lsp.server import app as app_module

    header = tmp_path / "h.cuh"
    header.write_text("#pragma once\nint broken_line_here;\n")
    server = app_module.KernelLanguageServer()
    loop_thread: list[threading.Thread] = []
    readers: list[threading.Thread] = []
    sent: list = []
    real_read = app_module._read_lines

    def read_lines(path):
        readers.append(threading.current_thread())
        return real_read(path)

    monkeypatch.setattr(app_module, "_read_lines", read_lines)
    monkeypatch.setattr(server, "open_document", lambda path: None)
    monkeypatch.setattr(server, "text_document_publish_diagnostics", sent.append)

    first = Diagnostic(str(header), 2, 1, Severity.WARNING, "older finding")
    latest = Diagnostic(str(header), 2, 5, Severity.ERROR, "latest finding")

    async def main():
        loop_thread.append(threading.current_thread())
        server._publish(str(header), [first])
        server._publish(str(header), [latest])  # supersedes the one still reading
        for _ in range(200):
            if sent:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)

    asyncio.run(main())
    assert readers and all(t is not loop_thread[0] for t in readers)
    assert len(sent) == 1 and [d.message for d in sent[0].diagnostics] == ["latest finding"]
    # The whole line's range, from the lines read off the loop.
    assert sent[0].diagnostics[0].range.end.character == len("int broken_line_here;\n")


def test_publishing_without_an_event_loop_reads_in_place(tmp_path, monkeypatch):
    from kernel_lsp.server import app as app_module

    cu = tmp_path / "k.cu"
    cu.write_text("int x;\n")
    server = app_module.KernelLanguageServer()
    sent: list = []
    monkeypatch.setattr(server, "open_document", lambda path: None)
    monkeypatch.setattr(server, "text_document_publish_diagnostics", sent.append)
    server._publish(str(cu), [Diagnostic(str(cu), 1, 1, Severity.ERROR, "x")])
    assert len(sent) == 1 and sent[0].diagnostics[0].range.end.character == len("int x;\n")


# --- no compiler in the server's process -----------------------------------------------------------

# What runs in the server's process (and the CLI's): it asks workers to compile, never compiles.
SERVER_SIDE = ["server", "gpu.py", "gpu_check.py", "evaluation", "optimizer"]
COMPILERS = {
    "compile_source",
    "compile_nvrtc",
    "compile_nvcc",
    "compile_front_end",
    "check_path",
    "check_bytes",
}


def _server_side_files() -> list[Path]:
    out: list[Path] = []
    for name in SERVER_SIDE:
        target = PACKAGE / name
        out += sorted(target.rglob("*.py")) if target.is_dir() else [target]
    return out


def test_nothing_on_the_server_side_calls_a_compiler_in_process():
    found = []
    for path in _server_side_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in COMPILERS:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}")
    assert found == []


def test_the_gpu_backends_probe_compiles_in_a_worker(monkeypatch):
    """LocalBackend's measuring kernels (the device probe the server runs at start) are built in
    the shared compile worker: this process never enters NVRTC or nvcc."""
    import kernel_lsp.compile as compile_package
    from kernel_lsp.evaluation.local import LocalBackend

    here = os.getpid()
    calls: list[int] = []
    for name in ("compile_nvrtc", "compile_nvcc"):
        real = getattr(compile_package, name)

        def spy(*args, _real=real, **kwargs):
            calls.append(os.getpid())  # a forked worker appends to its own copy
            return _real(*args, **kwargs)

        monkeypatch.setattr(compile_package, name, spy)
    backend = LocalBackend(fake=True, use_device_cache=False)
    try:
        assert backend.device is not None
    finally:
        backend.close()
    assert here not in calls


# --- no plain open() where the GPU paths read the user's files ------------------------------------


@pytest.mark.parametrize("relative", ["gpu.py", "evaluation/ray_backend.py", "evaluation/local.py"])
def test_the_gpu_paths_read_files_through_the_bounded_reader(relative):
    """read_text_file (kernel_lsp/files.py): regular files only, a size limit, never blocking on a
    FIFO. A plain open() of a user's path has none of those."""
    tree = ast.parse((PACKAGE / relative).read_text())
    plain = [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "open"
    ]
    assert plain == []


def test_a_fifo_as_a_baseline_is_an_error_not_a_hang(tmp_path):
    """What the bounded reader buys where gpu.py reads a spec's baseline file."""
    from kernel_lsp.files import read_text_file

    fifo = tmp_path / "baseline.cu"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="FIFO"):
        read_text_file(str(fifo))


# --- one per-file settings rule for every front end ------------------------------------------------


def test_every_front_end_asks_fsr_with_the_files_own_settings(tmp_path):
    """The editor's Optimize and `kernel-lsp optimize` build their RunRequest through
    api.optimize.request: the settings of the file (its own pyproject.toml under the front
    end's), not the workspace root's, and the same Workspace as the engine."""
    from kernel_lsp.api.optimize import request

    (tmp_path / "pyproject.toml").write_text('[tool.kernel-lsp]\ndefines = ["ROOT=1"]\n')
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[tool.kernel-lsp]\ndefines = ["SUB=1"]\n')
    cu = sub / "k.cu"
    cu.write_text("__global__ void k() {}\n")
    editor = Workspace({"gpu.enabled": False}, str(tmp_path))  # as the server builds it
    cli = Workspace({})  # as the CLI builds it
    for workspace in (editor, cli):
        req = request(workspace, str(cu), "k", source=cu.read_text())
        assert req.settings.defines == ("SUB=1",)
        assert req.engine is workspace and req.settings == workspace.settings_for(str(cu))
    assert editor.settings.defines == ("ROOT=1",)  # what the editor passed before


def test_the_server_asks_the_workspace_for_its_fsr_request_and_session():
    """No front end builds a RunRequest or a GpuSession itself."""
    found = []
    for path in sorted((PACKAGE / "server").rglob("*.py")) + sorted((PACKAGE / "cli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("RunRequest", "GpuSession"):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == []


# --- settings parsed by the front ends, typed into the Workspace -----------------------------------


def test_the_front_ends_hand_the_workspace_parsed_settings(tmp_path):
    from kernel_lsp.config import SettingsOverrides, parse_overrides

    raw = {"kernelLsp": {"defines": ["A=1"], "arch": 7, "nope": 1, "llm.apiKey": "sk-x"}}
    parsed = parse_overrides(raw)
    assert isinstance(parsed, SettingsOverrides)
    (tmp_path / "pyproject.toml").write_text('[tool.kernel-lsp]\narch = ["sm_80"]\n')
    cu = tmp_path / "k.cu"
    workspace = Workspace(parsed)
    settings = workspace.settings_for(str(cu))
    assert settings.defines == ("A=1",) and settings.arch == ("sm_80",)  # the file's own kept
    problems = workspace.problems(str(cu))
    assert "unknown setting `nope`" in problems
    # A value of the wrong type is worded with the value the file keeps (its pyproject.toml's).
    assert any(p.startswith("setting `arch`:") and p.endswith("keeping ('sm_80',)") for p in problems)
    assert "sk-x" not in repr(workspace)
    # The same as a raw mapping parsed by the Workspace (tests and scripts still pass one).
    assert Workspace(parsed).settings_for(str(cu)) == Workspace(raw).settings_for(str(cu))
    # A flag over the settings: merged, later wins.
    assert workspace.with_overrides(defines=["B=2"]).settings_for(str(cu)).defines == ("B=2",)


def test_no_front_end_hands_the_workspace_a_raw_settings_object():
    """cli/ and server/ construct a Workspace only from parse_overrides' result."""
    found = []
    for path in sorted((PACKAGE / "server").rglob("*.py")) + sorted((PACKAGE / "cli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Workspace" and node.args:
                first = node.args[0]
                if not (isinstance(first, ast.Call) and getattr(first.func, "id", None) == "parse_overrides"):
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == []


def test_a_text_is_checked_as_the_named_file_through_the_scheduler(tmp_path):
    """`check --stdin`'s road: a request for the text (the file need not exist, trigger
    `stdin`), checked in a compile worker of the one scheduler; an error at its line."""
    from kernel_lsp.scheduler import CheckScheduler

    path = tmp_path / "from_stdin.cu"
    workspace = Workspace({"arch": ["sm_90"]})
    scheduler = CheckScheduler(1)
    try:
        request = workspace.text_request(str(path), "__global__ void k(float* x)\n{ x[0] = nope; }\n")
        assert request.trigger == "stdin" and request.text is not None
        broken = scheduler.check(request, workspace).result()
        clean = scheduler.check(
            workspace.text_request(str(path), "__global__ void k(float* x) { x[0] = 1.0f; }\n"), workspace
        ).result()
    finally:
        scheduler.close()
    assert [d.line for d in broken.diagnostics if d.severity == Severity.ERROR] == [2]
    assert not path.exists()
    assert clean.errors == 0 and [k.name for k in clean.kernels] == ["k"]


@pytest.mark.parametrize("reason", ["timeout", "error"])
def test_a_check_that_did_not_finish_says_so_and_the_cli_fails_on_the_engines_own(
    tmp_path, monkeypatch, reason
):
    """A check cut short is a finding that says so, never a verdict on the code; where the engine
    itself raised, the server gets an `internal` finding and the CLI (`tool_errors`) an error."""
    from kernel_lsp.compile import jobs
    from kernel_lsp.scheduler import CheckScheduler

    def failing(self, fn, args, timeout_s, memory_bytes=0, on_preview=None, background=False):
        done = jobs.Future()
        done.set_result(jobs.JobFailed(reason, "ValueError: boom", "compile", 60.0))
        return done

    monkeypatch.setattr(jobs.WorkerPool, "submit", failing)
    workspace = Workspace({"arch": ["sm_90"]})
    request = CheckRequest(str(tmp_path / "k.cu"), "__global__ void k() {}\n")
    scheduler = CheckScheduler(1)
    try:
        check = scheduler.check(request, workspace).result()
        assert not check.checked
        expected = (
            "not checked"
            if reason == "timeout"
            else "kernel-lsp failed while checking k.cu: ValueError: boom"
        )
        assert any(expected in d.message for d in check.diagnostics), check.diagnostics
        cli = scheduler.check(request, workspace, tool_errors=True)
        if reason == "error":
            with pytest.raises(RuntimeError, match="boom"):
                cli.result()
        else:
            assert not cli.result().checked
    finally:
        scheduler.close()
