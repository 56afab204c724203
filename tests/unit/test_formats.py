"""Output formats of --check: text, json, sarif (structurally valid SARIF 2.1.0), github."""

from __future__ import annotations

import json
import os

from kernel_lsp.check import FileCheck
from kernel_lsp.cli.formats import FORMATTERS, as_github, as_json, as_sarif, as_text, format_diagnostic
from kernel_lsp.model import Diagnostic, KernelResources, Occupancy, Severity

CWD = os.getcwd()
ERR = Diagnostic(
    os.path.join(CWD, "k.cu"), 11, 27, Severity.ERROR, 'identifier "idx" is undefined', end_col=30
)
WARN = Diagnostic(
    os.path.join(CWD, "k.cu"), 10, 9, Severity.WARNING, 'variable "unused" was declared, never used', "177-D"
)
NOTE = Diagnostic(
    os.path.join(CWD, "big.cu"),
    1,
    1,
    Severity.INFO,
    "not checked: 100%, a: b\nnext",
    "not-checked",
    "kernel-lsp",
)
KERNEL = KernelResources(
    "vadd",
    "_Z4vaddPKfS0_Pfi",
    "sm_90",
    registers=12,
    shared_bytes=2048,
    stack_bytes=0,
    spill_store_bytes=0,
    spill_load_bytes=0,
    line=2,
    block_size=256,
    occupancy=Occupancy(256, 8, 64, 64, "warps"),
)


def checks() -> list[FileCheck]:
    return [
        FileCheck(os.path.join(CWD, "k.cu"), [ERR, WARN]),
        FileCheck(os.path.join(CWD, "big.cu"), [NOTE], checked=False),
        FileCheck(os.path.join(CWD, "ok.cu"), [], results=[]),
    ]


def test_text_line_shape():
    assert format_diagnostic(ERR) == 'k.cu:11:27: error: identifier "idx" is undefined [nvrtc]'
    assert format_diagnostic(WARN).endswith("[177-D]")
    out = as_text(checks(), ["sm_90"])
    lines = out.splitlines()
    # Sorted by line within a file.
    assert lines[0].startswith("k.cu:10:9: warning:") and lines[1].startswith("k.cu:11:27: error:")
    assert lines[-1] == "checked 2 file(s) for sm_90: 1 error(s), 1 warning(s), 0 kernel(s), 1 skipped"


def test_json_is_complete_and_parseable():
    data = json.loads(as_json(checks(), ["sm_90"]))
    assert data["archs"] == ["sm_90"]
    assert data["summary"] == {"errors": 1, "warnings": 1, "files": 3, "kernels": 0, "unverified": 0}
    first = data["files"][0]["diagnostics"][0]
    assert first == {
        "path": "k.cu",  # relative to the current folder, as in the text output
        "line": 11,
        "column": 27,
        "endColumn": 30,
        "severity": "error",
        "code": None,
        "source": "nvrtc",
        "message": ERR.message,
        "related": [],
    }
    assert data["files"][1]["checked"] is False


def test_json_kernels_carry_resources_and_occupancy(tmp_path):
    from kernel_lsp.model import CompileResult

    check = FileCheck(
        str(tmp_path / "v.cu"), [], [CompileResult(str(tmp_path / "v.cu"), "sm_90", True, kernels=[KERNEL])]
    )
    (k,) = json.loads(as_json([check], ["sm_90"]))["files"][0]["kernels"]
    assert k["registers"] == 12 and k["sharedBytes"] == 2048 and k["blockSize"] == 256
    assert k["occupancy"] == {
        "fraction": 1.0,
        "activeWarpsPerSM": 64,
        "maxWarpsPerSM": 64,
        "activeBlocksPerSM": 8,
        "limiter": "warps",
    }
    assert "kernel vadd [sm_90]: 12 registers, 2.0 KiB static smem" in as_text([check], ["sm_90"])


def test_sarif_is_structurally_valid():
    sarif = json.loads(as_sarif(checks(), ["sm_90"]))
    assert sarif["version"] == "2.1.0"
    assert sarif["$schema"].endswith("sarif-2.1.0.json")
    (run,) = sarif["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "kernel-lsp" and driver["version"]
    rule_ids = {r["id"] for r in driver["rules"]}
    assert len(run["results"]) == 3
    for result in run["results"]:
        assert result["ruleId"] in rule_ids
        assert result["level"] in {"none", "note", "warning", "error"}
        assert result["message"]["text"]
        (loc,) = result["locations"]
        phys = loc["physicalLocation"]
        assert not os.path.isabs(phys["artifactLocation"]["uri"])
        assert "\\" not in phys["artifactLocation"]["uri"]
        region = phys["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        if "endColumn" in region:
            assert region["endColumn"] > region["startColumn"]
    levels = [r["level"] for r in run["results"]]
    assert levels == ["error", "warning", "note"]
    assert run["results"][0]["ruleId"] == "nvrtc" and run["results"][1]["ruleId"] == "177-D"


def test_github_annotations_escape_their_fields():
    out = as_github(checks(), ["sm_90"]).splitlines()
    assert out[0] == '::error file=k.cu,line=11,col=27,title=kernel-lsp nvrtc::identifier "idx" is undefined'
    assert out[1].startswith("::warning file=k.cu,line=10,col=9,title=kernel-lsp 177-D::")
    # Messages: %, newline escaped; properties: also ':' and ','.
    assert (
        out[2]
        == "::notice file=big.cu,line=1,col=1,title=kernel-lsp not-checked::not checked: 100%25, a: b%0Anext"
    )
    assert out[-1].startswith("checked ")


def test_every_format_handles_nothing():
    for name, fmt in FORMATTERS.items():
        assert fmt([], ["sm_90"]), name
