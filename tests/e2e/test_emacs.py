"""The README's Emacs (eglot) block, run as written: Debian's Emacs 28 with elpa-eglot opens
samples/broken/error.cu with the block as its init file, eglot starts `kernel-lsp`, and the
diagnostic the server publishes reaches flymake. The Helix block is parsed (Helix is not packaged
for Debian 12): its TOML holds, and its settings are settings the server knows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_lsp.config import settings_from_dict

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
README = REPO / "editor-client" / "README.md"


def block(heading: str, language: str) -> str:
    """The first ```language block after `heading` in the extension's README, as written."""
    after = README.read_text().split(heading, 1)[1]
    return after.split(f"```{language}\n", 1)[1].split("```", 1)[0]


# After the README's block has set eglot up: open the file, let the command loop turn once (eglot
# connects from post-command-hook), wait for flymake's diagnostics, write them out.
REPORT_EL = r"""
(require 'eglot)
(let ((out (getenv "KL_OUT")) (buf (find-file "error.cu")) report)
  (run-hooks 'post-command-hook)
  (let ((deadline (+ (float-time) 90)))
    (while (and (< (float-time) deadline) (null (flymake-diagnostics)))
      (when (and (eglot-current-server) (bound-and-true-p flymake-mode)) (flymake-start))
      (accept-process-output nil 0.2)))
  (setq report
        (list (cons 'server (if (eglot-current-server) t :json-false))
              (cons 'mode (symbol-name major-mode))
              (cons 'diagnostics
                    (vconcat (mapcar (lambda (d)
                                       (list (cons 'line (line-number-at-pos (flymake-diagnostic-beg d)))
                                             (cons 'type (symbol-name (flymake-diagnostic-type d)))
                                             (cons 'text (flymake-diagnostic-text d))))
                                     (flymake-diagnostics))))))
  (with-temp-file out (insert (json-encode report)))
  (with-current-buffer buf (ignore-errors (eglot-shutdown (eglot-current-server))))
  (kill-emacs 0))
"""


@pytest.mark.editor("emacs", "emacs-nox elpa-eglot")
def test_the_readmes_eglot_block_works_as_written(tmp_path):
    emacs = shutil.which("emacs")
    assert emacs  # conftest skips the test when it is absent
    has_eglot = subprocess.run(
        [emacs, "--batch", "--eval", '(progn (require \'eglot) (princ "ok"))'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if has_eglot.stdout != "ok":
        pytest.skip("eglot is not installed for this Emacs (apt-get install -y elpa-eglot)")
    work = tmp_path / "broken"
    shutil.copytree(REPO / "samples" / "broken", work)
    init = tmp_path / "init.el"
    init.write_text(block("### Emacs, eglot", "elisp"))
    report_el = tmp_path / "report.el"
    report_el.write_text(REPORT_EL)
    out = tmp_path / "report.json"
    # `kernel-lsp` as the block names it: this interpreter's entry point first on PATH.
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "kernel-lsp").exists(), (
        "install the project (pip install -e .) for its kernel-lsp command"
    )
    proc = subprocess.run(
        [emacs, "--batch", "-l", str(init), "-l", str(report_el)],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=150,
        env=dict(
            os.environ,
            PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            KL_OUT=str(out),
            HOME=str(tmp_path),  # no user init, no ~/.emacs.d state
        ),
    )
    assert out.exists(), f"emacs wrote nothing (rc {proc.returncode}): {proc.stdout}\n{proc.stderr}"
    report = json.loads(out.read_text())
    assert report["server"] is True and report["mode"] == "c++-mode", (report, proc.stderr)
    (d,) = report["diagnostics"]
    assert (d["line"], d["type"]) == (11, "eglot-error")
    assert d["text"].endswith('identifier "idx" is undefined'), d


def test_the_eglot_blocks_initialization_options_are_settings_the_server_knows():
    text = block("### Emacs, eglot", "elisp")
    assert '"kernel-lsp"' in text and ':initializationOptions (:arch "auto" :checkOn "save")' in text
    settings, problems = settings_from_dict({"arch": "auto", "checkOn": "save"})
    assert problems == [] and settings.check_on == "save"


def test_the_readmes_helix_languages_toml_parses_and_names_the_server():
    config = tomllib.loads(block("### Helix, `languages.toml`", "toml"))
    server = config["language-server"]["kernel-lsp"]
    assert server["command"] == "kernel-lsp" and shutil.which(
        "kernel-lsp", path=str(Path(sys.executable).parent)
    )
    # Helix sends `config` as initializationOptions: each key is a setting the server knows.
    settings, problems = settings_from_dict(server["config"])
    assert problems == [] and settings.check_on == server["config"]["checkOn"], problems
    (cuda,) = config["language"]
    assert cuda["name"] == "cuda" and set(cuda["file-types"]) == {"cu", "cuh"}
    assert "kernel-lsp" in cuda["language-servers"]
    assert cuda["scope"] == "source.cuda" and cuda["roots"]
