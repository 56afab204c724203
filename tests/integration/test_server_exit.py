"""The server's way out: a close step that blocks does not hold the exit, and a child started
through procs.command_dying_with_parent (clangd) dies with the process that started it, even by SIGKILL."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from process_state import gone

from kernel_lsp import procs
from kernel_lsp.server import build_server


def test_a_close_step_that_blocks_is_logged_and_left_behind(caplog):
    server = build_server()
    release = threading.Event()
    ran: list[str] = []

    def stuck_watcher() -> None:
        release.wait(60)

    server.shutdown_hooks[:0] = [stuck_watcher]
    server.shutdown_hooks.append(lambda: ran.append("after"))
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="kernel_lsp.server.app"):
        finished = server.close(deadline_s=0.5)
    took = time.monotonic() - started
    assert ran == []  # the steps after it were not run by close(); the exit ends them
    release.set()
    assert finished is False and took < 5, took
    assert any("stuck_watcher did not finish within" in r.getMessage() for r in caplog.records), caplog.text

    quick = build_server()
    assert quick.close(deadline_s=5) is True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_started_to_die_with_its_parent_dies_when_the_parent_is_killed():
    if procs.command_dying_with_parent(["true"]) == ["true"]:
        pytest.skip("no setpriv with --pdeathsig here (util-linux 2.33 or later)")
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import subprocess, sys, time
                from kernel_lsp import procs
                child = subprocess.Popen(procs.command_dying_with_parent(["sleep", "120"]))
                print(child.pid, flush=True)
                time.sleep(120)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        child = int(parent.stdout.readline())
        time.sleep(0.3)  # setpriv has exec'd sleep by now (same pid either way)
        with open(f"/proc/{child}/cmdline", "rb") as f:
            assert f.read().split(b"\0")[0].endswith(b"sleep")
        parent.kill()  # no cleanup code runs: only the kernel can end the child
        parent.wait(10)
        assert gone(child, 5), "the child outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_command_dying_with_parent_keeps_the_command():
    argv = ["clangd", "--log=error"]
    wrapped = procs.command_dying_with_parent(argv)
    assert wrapped[-2:] == argv and argv == ["clangd", "--log=error"]
    if wrapped != argv:
        assert wrapped[1:4] == ["--pdeathsig", "KILL", "--"]


def test_a_setpriv_in_the_workspace_is_never_run(tmp_path, monkeypatch):
    """An editor starts the server in the workspace; a PATH with "." would find a repository's
    own `setpriv` there. Only the system's is asked, and only for its --help."""
    ran = tmp_path / "ran"
    planted = tmp_path / "setpriv"
    planted.write_text(f"#!/bin/sh\ntouch {ran}\necho --pdeathsig\n")
    planted.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", ".:" + os.environ.get("PATH", ""))
    procs._setpriv_with_pdeathsig.cache_clear()
    try:
        wrapped = procs.command_dying_with_parent(["clangd"])
    finally:
        procs._setpriv_with_pdeathsig.cache_clear()
    assert not ran.exists(), "the workspace's setpriv ran"
    assert wrapped == ["clangd"] or wrapped[0] in procs.SETPRIV_PATHS, wrapped
