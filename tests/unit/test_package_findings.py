"""A missing package once in the editor (issue 45): among the files not open, its finding is
published on one file, worded with every file it breaks; an open file shows its own; the finding
moves, and each file it leaves or reaches is published again, as files open, close and are fixed."""

from __future__ import annotations

from kernel_lsp.config import Settings
from kernel_lsp.model import Diagnostic, Severity
from kernel_lsp.server.analysis import Analysis, Snapshot
from kernel_lsp.workspace import Workspace

MISSING = "cudnn.h: No such file or directory; `cudnn.h` is cuDNN's: install it: pip install nvidia-cudnn-cu13."


class Editor:
    """What the editor was sent last for each file, and which files it has open."""

    def __init__(self) -> None:
        self.shown: dict[str, list[Diagnostic]] = {}
        self.open: set[str] = set()
        self.analysis = Analysis(
            publish=lambda path, found: self.shown.__setitem__(path, list(found)),
            snapshot=lambda path: Snapshot("text", 1) if path in self.open else Snapshot(None, None),
            workspace=lambda: Workspace.fixed(Settings()),
            workers=1,
        )

    def check(self, path: str, missing: bool = True, other: bool = False) -> None:
        found = [Diagnostic(path, 1, 10, Severity.ERROR, MISSING, package="nvidia-cudnn-cu13")] if missing else []
        found += [Diagnostic(path, 2, 1, Severity.ERROR, "identifier x is undefined")] if other else []
        self.analysis.set_findings(path, found)

    def errors(self, path: str) -> list[str]:
        return [d.message for d in self.shown.get(path, [])]


def test_one_closed_file_shows_a_missing_package_with_the_files_it_breaks():
    editor = Editor()
    files = [f"/w/k{i}.cu" for i in range(1, 15)]
    for f in files:
        editor.check(f, other=f == "/w/k5.cu")
    shown = [f for f in files if any("nvidia-cudnn-cu13" in m for m in editor.errors(f))]
    assert shown == ["/w/k1.cu"]
    (message,) = editor.errors("/w/k1.cu")
    assert message.endswith("It breaks 14 files: k1.cu, k10.cu, k11.cu and 11 more.")
    # Other findings of the other files stay.
    assert editor.errors("/w/k5.cu") == ["identifier x is undefined"]


def test_an_open_file_shows_its_own_and_the_finding_moves_as_files_open_close_and_are_fixed():
    editor = Editor()
    for f in ("/w/a.cu", "/w/b.cu", "/w/c.cu"):
        editor.check(f)
    assert editor.errors("/w/b.cu") == []
    editor.open.add("/w/b.cu")
    editor.check("/w/b.cu")  # the check a didOpen runs
    assert editor.errors("/w/b.cu") == [MISSING]
    editor.open.add("/w/a.cu")
    editor.check("/w/a.cu")
    # a.cu, open, shows its own; c.cu, the one closed file left, now holds the count.
    assert editor.errors("/w/a.cu") == [MISSING]
    assert editor.errors("/w/c.cu") == [f"{MISSING} It breaks 3 files: a.cu, b.cu, c.cu."]
    editor.open.discard("/w/a.cu")
    editor.check("/w/a.cu")  # didClose checks it again
    assert editor.errors("/w/a.cu") == [f"{MISSING} It breaks 3 files: a.cu, b.cu, c.cu."]
    assert editor.errors("/w/c.cu") == []
    editor.check("/w/a.cu", missing=False)  # fixed: the next closed file holds it
    assert editor.errors("/w/a.cu") == []
    assert editor.errors("/w/c.cu") == [f"{MISSING} It breaks 2 files: b.cu, c.cu."]
    editor.check("/w/c.cu", missing=False)  # one file left: its own finding, no count
    assert editor.errors("/w/c.cu") == [] and editor.errors("/w/b.cu") == [MISSING]
