"""The README's Neovim 0.7 block started from a new terminal, where the venv is not active and
`kernel-lsp` is not on PATH (found on a fresh Debian 12): Neovim says it cannot start the server,
and the block adds no Lua error of its own (it attached a nil client before)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from test_neovim import REPO, readme_snippet

# Runs after the README's block: waits for the FileType autocommand, then writes :messages.
MESSAGES_LUA = r"""
vim.wait(2000, function() return false end, 50)
local f = io.open('messages.txt', 'w')
f:write(vim.fn.execute('messages')); f:close()
vim.cmd('qa!')
"""


@pytest.mark.editor
def test_the_neovim_block_without_kernel_lsp_on_path_says_so_without_a_lua_error(tmp_path):
    nvim = shutil.which("nvim")
    assert nvim  # conftest skips the test when it is absent
    work = tmp_path / "broken"
    shutil.copytree(REPO / "samples" / "broken", work)
    (tmp_path / "init.lua").write_text(readme_snippet())
    (tmp_path / "messages.lua").write_text(MESSAGES_LUA)
    bin_dir = tmp_path / "bin"  # nvim alone on PATH: no kernel-lsp anywhere
    bin_dir.mkdir()
    (bin_dir / "nvim").symlink_to(nvim)
    proc = subprocess.run(
        [
            nvim,
            "--headless",
            "-i",
            "NONE",
            "-n",
            "-u",
            str(tmp_path / "init.lua"),
            "-c",
            f"luafile {tmp_path / 'messages.lua'}",
            "error.cu",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "PATH": str(bin_dir),
            "HOME": str(tmp_path),
            "XDG_STATE_HOME": str(tmp_path / "state"),
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
        },
    )
    messages = (work / "messages.txt").read_text() + proc.stdout + proc.stderr
    assert "kernel-lsp" in messages and "failed" in messages, messages
    assert "Error executing lua" not in messages, messages
