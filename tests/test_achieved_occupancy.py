"""Achieved occupancy through ncu (kernel_lsp.runner.profile): the CSV parser on ncu's details
page, the notes when there are no figures, and the whole path with the worker in its no-GPU mode
and a stand-in ncu (tests/fixtures/fake_ncu.py) that really runs the profiled process."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_runner_protocol import SPEC, STEPS

from kernel_lsp.formats import format_gpu_check
from kernel_lsp.gpu import GpuSession
from kernel_lsp.runner.fake import fake_cubin
from kernel_lsp.runner.profile import ACHIEVED, THEORETICAL, parse_ncu_csv
from kernel_lsp.spec import load_specs

FAKE_NCU = Path(__file__).parent / "fixtures" / "fake_ncu.py"
HEAD = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'


def row(i: int, kernel: str, metric: str, value: str) -> str:
    cells = [str(i), "1", "python3", "h", kernel, "1", "7", "(256, 1, 1)", "(9, 1, 1)", "0", "9.0", "Command line profiler metrics", metric, "%", value]  # fmt: skip
    return ",".join(f'"{c}"' for c in cells)


def test_parser_reads_each_kernel_of_a_pipeline_in_pipeline_order():
    out = "\n".join(
        [
            "==PROF== Connected to process 1 (python3)",
            "the program's own output",
            HEAD,
            row(0, "_Z7partialPKfPfi", ACHIEVED, "81.5"),
            row(0, "_Z7partialPKfPfi", THEORETICAL, "100"),
            row(1, "finish", ACHIEVED, "3.1"),
            row(1, "finish", THEORETICAL, "50"),
            row(2, "finish", ACHIEVED, "4.9"),  # launched twice: the mean
            row(2, "finish", THEORETICAL, "50"),
        ]
    )
    r = parse_ncu_csv(out, {"finish": "finish", "_Z7partialPKfPfi": "partial"}, "n=9")
    assert [(f.kernel, f.achieved, f.theoretical) for f in r.figures] == [
        ("partial", pytest.approx(0.815), pytest.approx(1.0)),
        ("finish", pytest.approx(0.04), pytest.approx(0.5)),
    ]
    assert r.note == "" and all(f.case == "n=9" for f in r.figures)


def test_parser_maps_a_demangled_name_back_and_reads_thousands_separators():
    out = "\n".join([HEAD, row(0, "void scale<float>(float *, int)", ACHIEVED, "1,000.0")])
    r = parse_ncu_csv(out, {"_Z5scaleIfEvPfi": "scale"}, "")
    assert [f.kernel for f in r.figures] == ["scale"] and r.figures[0].achieved == pytest.approx(10.0)


def test_parser_says_why_there_are_no_figures():
    perm = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission"
    assert "ERR_NVGPUCTRPERM" in parse_ncu_csv(perm, {"k": "k"}, "").note
    assert "no kernel" in parse_ncu_csv("==PROF== No kernels were profiled.", {"k": "k"}, "").note
    assert parse_ncu_csv("", {"k": "k"}, "").figures == []


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "vadd.spec.py"
    path.write_text(SPEC)
    return load_specs(str(path)).specs[0]


def test_fake_gpu_and_stand_in_ncu_give_figures_on_the_timed_case(spec, monkeypatch):
    monkeypatch.setenv("KERNEL_LSP_NCU", str(FAKE_NCU))
    with GpuSession(fake=True, launch_timeout_s=2.0) as s:
        check = s.check_compiled(fake_cubin({"k": "vadd"}), STEPS, spec, profile=True)
        assert check.ok, check.message
        assert check.occupancy_note == ""
        [fig] = check.occupancy
        assert (fig.kernel, fig.achieved, fig.theoretical, fig.case) == ("vadd", 0.4225, 0.5, "n=4096")
        assert "occupancy of vadd: achieved 42% of theoretical 50% (ncu)" in format_gpu_check(check)
        # Without profile=True nothing is read.
        assert s.check_compiled(fake_cubin({"k": "vadd"}), STEPS, spec).occupancy == []


def test_a_failing_profiled_process_becomes_a_note(spec, monkeypatch, tmp_path):
    # The stand-in runs the profiled process for real: a job it cannot load makes it fail.
    monkeypatch.setenv("KERNEL_LSP_NCU", str(FAKE_NCU))
    with GpuSession(fake=True, launch_timeout_s=2.0) as s:
        bad_steps = [dict(STEPS[0], grid="cdiv(n, 0)")]
        check = s.check_compiled(fake_cubin({"k": "vadd"}), STEPS, spec)
        s._profile(check, {"spec": s._spec_desc(spec, None), "steps": bad_steps}, fake_cubin({"k": "vadd"}), {"k": "vadd"})  # fmt: skip
        assert check.occupancy == [] and "ncu" in check.occupancy_note


def test_no_permission_and_no_ncu_are_notes_not_errors(spec, monkeypatch, tmp_path):
    monkeypatch.setenv("KERNEL_LSP_NCU", str(FAKE_NCU))
    monkeypatch.setenv("FAKE_NCU_MODE", "noperm")
    with GpuSession(fake=True, launch_timeout_s=2.0) as s:
        check = s.check_compiled(fake_cubin({"k": "vadd"}), STEPS, spec, profile=True)
        assert check.ok and check.occupancy == [] and "ERR_NVGPUCTRPERM" in check.occupancy_note
        monkeypatch.setenv("KERNEL_LSP_NCU", str(tmp_path / "no-such-ncu"))
        check = s.check_compiled(fake_cubin({"k": "vadd"}), STEPS, spec, profile=True)
        assert check.ok and "not installed" in check.occupancy_note
