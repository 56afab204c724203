"""End-to-end runs through a real editor: headless Neovim (Debian's package, 0.7+) opens
samples/broken/error.cu, starts kernel-lsp, waits for the diagnostics it receives and writes them
to a JSON file this test reads. One run starts the server by hand; the other runs the Neovim 0.7
snippet of editor-client/README.md exactly as written there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "editor-client" / "README.md"
SNIPPET_MARK = "<!-- neovim-0.7-snippet -->"

INIT_LUA = r"""
local out, server_py, repo = _G.KL_OUT, _G.KL_PYTHON, _G.KL_REPO
local function write(obj)
  local f = io.open(out, "w"); f:write(vim.fn.json_encode(obj)); f:close()
end
local client_id = vim.lsp.start_client({
  name = "kernel-lsp",
  cmd = { server_py, "-m", "kernel_lsp" },
  cmd_env = { PYTHONPATH = repo },
  root_dir = vim.fn.getcwd(),
  init_options = { arch = "sm_90", gpu = { enabled = false } },
})
if not client_id then write({ error = "start_client failed" }); vim.cmd("qa!") end
vim.lsp.buf_attach_client(0, client_id)
local ok = vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 50)
local items = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(items, { lnum = d.lnum, col = d.col, severity = d.severity, message = d.message,
                        source = d.source or vim.NIL })
end
write({ ok = ok, version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor),
        diagnostics = items })
vim.lsp.stop_client(client_id)
vim.wait(3000, function() return vim.lsp.get_client_by_id(client_id) == nil end, 50)
vim.cmd("qa!")
"""


@pytest.mark.editor
def test_neovim_receives_the_diagnostics(tmp_path):
    nvim = shutil.which("nvim")
    assert nvim  # conftest skips the test when it is absent
    work = tmp_path / "broken"
    shutil.copytree(REPO / "samples" / "broken", work)
    script = tmp_path / "kl.lua"
    script.write_text(INIT_LUA)
    out = tmp_path / "diagnostics.json"
    lua_globals = (
        f"lua _G.KL_OUT={json.dumps(str(out))}; _G.KL_PYTHON={json.dumps(sys.executable)}; "
        f"_G.KL_REPO={json.dumps(str(REPO))}"
    )
    proc = subprocess.run(
        [nvim, "--headless", "--clean", "-n", "-c", lua_globals, "-c", f"luafile {script}", "error.cu"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), XDG_CACHE_HOME=str(tmp_path / "cache")),
    )
    assert out.exists(), f"nvim wrote nothing (rc {proc.returncode}): {proc.stdout}\n{proc.stderr}"
    report = json.loads(out.read_text())
    assert report.get("ok"), report
    (d,) = report["diagnostics"]
    # Neovim's diagnostics are 0-based; severity 1 is Error.
    assert (d["lnum"], d["col"], d["severity"]) == (10, 26, 1)
    assert d["message"] == 'identifier "idx" is undefined'


# Runs after the README's snippet has started the server for error.cu: waits for diagnostics and
# for the statuses that follow, then reports what arrived, including every vim.notify.
REPORT_LUA = r"""
local out = _G.KL_OUT
local ok = vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 50)
vim.wait(3000, function() return false end, 50)  -- statuses after the check
local items = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(items, { lnum = d.lnum, col = d.col, severity = d.severity, message = d.message })
end
local f = io.open(out, "w")
f:write(vim.fn.json_encode({ ok = ok, diagnostics = items, notes = _G.KL_NOTES,
  clients = #vim.lsp.get_active_clients() }))
f:close()
for _, c in ipairs(vim.lsp.get_active_clients()) do c.stop() end
vim.wait(3000, function() return #vim.lsp.get_active_clients() == 0 end, 50)
vim.cmd("qa!")
"""


def readme_snippet() -> str:
    text = README.read_text()
    after = text.split(SNIPPET_MARK, 1)[1]
    return after.split("```lua\n", 1)[1].split("```", 1)[0]


@pytest.mark.editor
def test_the_readmes_neovim_07_snippet_works_as_written(tmp_path):
    nvim = shutil.which("nvim")
    assert nvim  # conftest skips the test when it is absent
    work = tmp_path / "broken"
    shutil.copytree(REPO / "samples" / "broken", work)
    init = tmp_path / "init.lua"
    init.write_text(readme_snippet())
    report_lua = tmp_path / "report.lua"
    report_lua.write_text(REPORT_LUA)
    out = tmp_path / "report.json"
    # `kernel-lsp` as the snippet names it: this interpreter's entry point first on PATH.
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "kernel-lsp").exists(), (
        "install the project (pip install -e .) for its kernel-lsp command"
    )
    record_notes = "lua _G.KL_NOTES = {}; vim.notify = function(m) table.insert(_G.KL_NOTES, m) end"
    proc = subprocess.run(
        [
            nvim,
            "--headless",
            "-i",
            "NONE",
            "-n",
            "--cmd",
            record_notes,
            "-u",
            str(init),
            "-c",
            f"lua _G.KL_OUT={json.dumps(str(out))}",
            "-c",
            f"luafile {report_lua}",
            "error.cu",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
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
    assert report["ok"] and report["clients"] == 1, (report, proc.stderr)
    (d,) = report["diagnostics"]
    assert (d["lnum"], d["col"], d["severity"]) == (10, 26, 1)
    assert d["message"] == 'identifier "idx" is undefined'
    # One notification, the device, however many checks and status changes the server went through.
    assert len(report["notes"]) == 1 and report["notes"][0].startswith("kernel-lsp: "), report["notes"]
    assert "Error" not in proc.stderr, proc.stderr
