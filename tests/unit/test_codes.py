"""Diagnostic codes (kernel_lsp/codes.py): every code the engine emits has a description of its
own; ruff's selection rules (prefixes, the most specific selector wins, ignore wins a tie,
numbers are exact); what a selection can never hide."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernel_lsp.codes import (
    CHECK_FAILURES,
    DESCRIPTIONS,
    apply_selection,
    describe,
    rule_id,
    selected,
    unknown_selectors,
)
from kernel_lsp.model import Diagnostic, Severity

REPO = Path(__file__).resolve().parents[2]
# kernel_lsp/ and optimizer/, installed as kernel_lsp.optimizer (rglob does not follow the link).
PACKAGE_FOLDERS = (REPO / "kernel_lsp", REPO / "optimizer")


def finding(
    code: str | None, severity: Severity = Severity.WARNING, source: str = "kernel-lsp"
) -> Diagnostic:
    return Diagnostic("/k.cu", 1, 1, severity, "message", code, source)


def emitted_codes() -> set[str]:
    """Every literal code the package gives a finding: `code="x"`, a spec `_diag(..., "spec-x")`,
    a runner problem kind (`gpu-` + kind)."""
    codes: set[str] = set()
    for path in (p for folder in PACKAGE_FOLDERS for p in folder.rglob("*.py")):
        text = path.read_text()
        codes |= set(re.findall(r'\bcode="([a-z][a-z0-9-]*)"', text))
        codes |= set(re.findall(r'"(spec-[a-z-]+)"', text))
        codes |= set(re.findall(r'CODE = "([a-z][a-z0-9-]*)"', text))
        if path.name == "gpu_results.py":
            kinds = re.search(r"kind: str  # (.*?)\n\s+case:", text, re.S)
            assert kinds, "gpu_results.py lists Problem's kinds in a comment"
            words = re.findall(r"[a-z_]+", kinds.group(1))
            codes |= {"gpu-" + w.replace("_", "-") for w in words}
    return codes


def test_every_code_the_engine_emits_has_a_description_of_its_own():
    codes = emitted_codes()
    assert {"spill", "spec-args", "gpu-mismatch", "launch-comment", "not-checked"} <= codes
    missing = sorted(c for c in codes if c not in DESCRIPTIONS)
    assert not missing, f"describe these codes in kernel_lsp/codes.py DESCRIPTIONS: {missing}"
    # Descriptions say what the rule is, not the id again.
    assert all(len(text) > len(code) + 10 for code, text in DESCRIPTIONS.items())


def test_compiler_numbers_are_described_by_their_message_template():
    assert describe("177-D", 'variable "unused" was declared but never referenced') == (
        'Compiler diagnostic #177: variable "…" was declared but never referenced'
    )
    # Two instances of one number give one description whatever names they quote.
    first = describe("550-D", 'variable "a" was set but never used [sm_80]')
    assert first == describe("550-D", 'variable "other_name" was set but never used')


def test_compile_errors_without_a_number_share_their_compilers_rule():
    one = finding(None, Severity.ERROR, "nvrtc")
    assert rule_id(one) == "nvrtc-error"
    assert rule_id(finding(None, Severity.ERROR, "nvcc")) == "nvcc-error"
    assert rule_id(finding(None, Severity.ERROR, "host compiler")) == "host-compiler-error"
    text = describe("nvrtc-error", 'identifier "idx" is undefined')
    assert "idx" not in text and "undefined" not in text and "message" in text


def test_families_describe_new_members():
    assert describe("spec-something-new").startswith(DESCRIPTIONS["spec-"])
    assert describe("gpu-some-kind").startswith(DESCRIPTIONS["gpu-"])


@pytest.mark.parametrize(
    ("code", "select", "ignore", "kept"),
    [
        ("177-D", (), (), True),
        ("177-D", (), ("177",), False),
        ("177-D", (), ("177-D",), False),
        ("177-D", (), ("17",), True),  # numbers are exact
        ("177-D", (), ("1770",), True),
        ("spec-args", (), ("spec-",), False),
        ("spec-args", (), ("spec",), False),
        ("spec-args", ("spec-",), ("spec-args",), False),  # the more specific ignore wins
        ("spec-args", ("spec-args",), ("spec-",), True),  # the more specific select wins
        ("spec-args", ("spec-args",), ("spec-args",), False),  # a tie: ignore wins
        ("spill", ("spec-",), (), False),
        ("spill", ("ALL",), ("spill",), False),
        ("177-D", ("177",), ("ALL",), True),
    ],
)
def test_selection_follows_ruff(code, select, ignore, kept):
    assert selected(finding(code), select, ignore) is kept


def test_what_no_selection_hides():
    for code in CHECK_FAILURES:  # a file that was not checked is never reported clean
        assert selected(finding(code, Severity.ERROR), (), ("ALL",))
    assert selected(finding(None, Severity.WARNING, "ptxas"), (), ("ALL",))  # no code: nothing to name
    # A compile error with a number: the compiler stopped, whatever its number.
    assert selected(finding("20-D", Severity.ERROR, "nvrtc"), (), ("20",))
    # kernel-lsp's own errors can be ignored (a spec problem in code you do not verify here).
    assert not selected(finding("spec-args", Severity.ERROR, "kernel-lsp spec"), (), ("spec-",))
    found = [finding("177-D"), finding("spill"), finding(None, Severity.ERROR, "nvrtc")]
    assert [d.code for d in apply_selection(found, ("spill",), ())] == ["spill", None]


def test_unknown_selectors_are_typos():
    assert unknown_selectors(["177", "20011-D", "ALL", "spill", "spec-", "gpu-new", "nvrtc-error"]) == []
    assert unknown_selectors(["splil", "E501"]) == ["splil", "E501"]
