"""The profile of a verified kernel through ncu (kernel_lsp.runner.profile and its parts): the
page parsers, the limiter verdict and the line mapping on output recorded on an H200
(tests/fixtures/ncu/), the fallbacks, and the whole path with the worker in its no-GPU mode and
a stand-in ncu (tests/fixtures/fake_ncu.py) that runs the profiled process for real and replays
the recordings."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from test_runner_protocol import SPEC, STEPS

from kernel_lsp.cli.formats import format_gpu_check
from kernel_lsp.gpu import GpuSession
from kernel_lsp.gpu_reports import ProfileReport
from kernel_lsp.model import TimingSettings
from kernel_lsp.runner.fake import fake_cubin
from kernel_lsp.runner.limiter import SHARED_WAVEFRONTS, kernel_profile
from kernel_lsp.runner.ncu_pages import parse_raw_page, parse_source_page
from kernel_lsp.runner.profile import build_report
from kernel_lsp.spec import load_specs

FIXTURES = Path(__file__).parents[1] / "fixtures"
FAKE_NCU = FIXTURES / "fake_ncu.py"
NCU = FIXTURES / "ncu"
SAMPLES = Path(__file__).parents[2] / "samples"


def recorded(sample: str, page: str) -> str:
    return (NCU / sample / f"{page}.csv").read_text()


def report_of(sample: str, cu: str, symbols: dict[str, str]) -> ProfileReport:
    return build_report(recorded(sample, "raw"), recorded(sample, "source"), symbols, str(SAMPLES / cu))


# --- parsers --------------------------------------------------------------------------------------


def test_raw_page_gives_each_kernel_of_a_pipeline_in_launch_order_with_base_units():
    kernels = parse_raw_page(recorded("reduce_sum_fp32", "raw"))
    assert [k.name for k in kernels] == ["reduce_sum_partial", "reduce_sum_final"]
    partial = kernels[0]
    assert partial.units["gpu__time_duration.sum"] == "ns"
    assert partial.metrics["gpu__time_duration.sum"] == 181_920  # "181,920" in the CSV
    assert partial.metrics["launch__grid_size"] == 131_072


def test_raw_page_averages_a_kernel_launched_twice():
    text = recorded("vector_add_fp32", "raw")
    last = text.strip().splitlines()[-1]
    doubled = text.strip() + "\n" + last.replace('"72.95"', '"27.05"') + "\n"
    [k] = parse_raw_page(doubled)
    assert k.launches == 2
    assert k.metrics["sm__warps_active.avg.pct_of_peak_sustained_active"] == pytest.approx(50.0)


def test_source_page_reads_line_rows_even_with_unescaped_quotes_in_the_source():
    # ncu prints `"extern "C" __global__ ..."` without escaping the quotes.
    page = parse_source_page(recorded("stencil2d_fp32", "source"))
    assert page.functions == ["stencil2d"] and page.skipped_rows == 0
    head = next(line for line in page.lines if line.line == 29)
    assert head.text.startswith('extern "C" __global__ void stencil2d(const float* src, float* dst')
    assert head.samples > 0  # the counters after the text were read


def test_source_page_keeps_each_function_of_a_pipeline_apart():
    page = parse_source_page(recorded("reduce_sum_fp32", "source"))
    assert page.functions == ["reduce_sum_partial", "reduce_sum_final"]
    tree = [line for line in page.lines if line.line == 35]  # block_sum, inlined into both
    assert [t.function for t in tree] == ["reduce_sum_partial", "reduce_sum_final"]
    assert tree[0].samples == 9624 and tree[0].stalls["stall_short_sb"] > 0


def test_parsers_never_raise_on_garbage():
    for text in ("", "not csv at all", '"Kernel Name"\n"x","y"', '"Line No","Source"\n"1"'):
        assert parse_raw_page(text) == [] or isinstance(parse_raw_page(text), list)
        assert parse_source_page(text).lines == []


# --- the verdict, on three kinds of kernel ----------------------------------------------------------


def test_limiter_of_a_reduction_a_stencil_and_a_gemm():
    reduce = report_of("reduce_sum_fp32", "reduce_sum/reduce_sum_fp32.cu", {})
    partial, final = reduce.kernels
    assert (partial.limiter, partial.evidence) == ("memory-bound", "L1/shared at 87% of peak")
    assert final.limiter == "launch-bound" and final.evidence == "1 block(s) for 132 SMs"
    assert partial.bank_conflicts == 88_799 + 81_396
    assert partial.sectors_per_request == {"load": 4.0, "store": 1.0}
    assert [s.label for s in partial.stalls[:2]] == ["short scoreboard", "long scoreboard"]

    [stencil] = report_of("stencil2d_fp32", "stencil2d/stencil2d_fp32.cu", {}).kernels
    assert stencil.limiter == "latency-bound"  # ncu's own rule: SM 55%, memory 41%: both < 60%
    assert stencil.stalls[0].reason == "long_scoreboard" and stencil.stalls[0].share > 0.7
    assert stencil.sectors_per_request["load"] == pytest.approx(23_051_264 / 5_242_624)

    [gemm] = report_of("gemm_fp32", "gemm/gemm_fp32.cu", {}).kernels
    assert (gemm.limiter, gemm.evidence) == ("memory-bound", "L1/shared at 94% of peak")
    assert gemm.achieved_occupancy == pytest.approx(0.9947)
    assert gemm.missing == []


def test_compute_bound_and_missing_metrics():
    [k] = parse_raw_page(recorded("gemm_fp32", "raw"))
    m = dict(k.metrics)
    m["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 91.0
    m["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"] = 30.0
    p = kernel_profile("gemm", m)
    assert p.limiter == "compute-bound" and p.evidence.startswith("SM at 91% of peak; LSU pipe")
    # An ncu without the stall or SOL metrics: the profile says what it lacks, no exception.
    bare = {k: v for k, v in m.items() if "stalled" not in k and "throughput" not in k}
    p = kernel_profile("gemm", bare)
    assert p.limiter == "unknown" and p.stalls == []
    assert any("warp stall reasons" in x for x in p.missing)
    assert any("SM throughput" in x for x in p.missing)


def test_a_counter_ncu_could_not_read_is_missing_not_an_exception():
    # ncu printed `nan` for the shared wavefronts of a stencil profiled beside other GPU work.
    raw = recorded("stencil2d_fp32", "raw")
    assert parse_raw_page(raw)[0].unread == set()  # its helper column derived_* is nan on any run
    header = next(line for line in raw.splitlines() if "Kernel Name" in line)
    column = next(i for i, name in enumerate(header.split('","')) if name.strip('"') == SHARED_WAVEFRONTS)
    lines = raw.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith('"0"'))
    cells = lines[row].split('","')
    cells[column] = "nan"
    lines[row] = '","'.join(cells)
    [k] = parse_raw_page("\n".join(lines))
    assert SHARED_WAVEFRONTS not in k.metrics and k.unread == {SHARED_WAVEFRONTS}
    p = kernel_profile("stencil2d", k.metrics)
    assert p.shared_wavefronts is None and p.limiter == "latency-bound"


# --- line mapping ---------------------------------------------------------------------------------


def test_hot_lines_map_to_the_users_file_with_their_stall():
    cu = SAMPLES / "gemm" / "gemm_fp32.cu"
    lines = report_of("gemm_fp32", "gemm/gemm_fp32.cu", {}).hot_lines
    assert [h.line for h in lines][:3] == [28, 26, 25]
    top = lines[0]
    # recorded under /work/main/.carry/...: mapped onto the file it names here
    assert top.path == str(cu) and top.kernel == "gemm"
    assert top.text == cu.read_text().splitlines()[top.line - 1].strip()
    assert top.top_stall == "mio_throttle"
    assert top.summary == f"{top.share:.0%} of stall samples: MIO throttle"
    assert top.samples == 1_078_631 and top.share == pytest.approx(0.5074, abs=1e-3)
    assert sum(h.share for h in lines) <= 1.0


def test_hot_lines_of_each_kernel_of_a_pipeline():
    symbols = {"reduce_sum_partial": "reduce_sum", "reduce_sum_final": "reduce_sum_final"}
    report = report_of("reduce_sum_fp32", "reduce_sum/reduce_sum_fp32.cu", symbols)
    assert [k.kernel for k in report.kernels] == ["reduce_sum", "reduce_sum_final"]
    first = [h for h in report.hot_lines if h.kernel == "reduce_sum"]
    assert [h.line for h in first[:2]] == [35, 63]
    assert first[0].top_stall == "short_scoreboard" and first[1].top_stall == "long_scoreboard"
    final = [h for h in report.hot_lines if h.kernel == "reduce_sum_final"]
    assert final and final[0].line == 84


def test_report_round_trips_through_json():
    report = report_of("stencil2d_fp32", "stencil2d/stencil2d_fp32.cu", {})
    again = ProfileReport.from_dict(report.to_dict())
    assert again.kernels[0].headline == report.kernels[0].headline
    assert again.hot_lines == report.hot_lines


def test_no_source_counters_is_a_note():
    report = build_report(recorded("vector_add_fp32", "raw"), "", {}, "x.cu")
    assert report.kernels and report.hot_lines == [] and "per-line counters" in report.note


# --- the whole path, fake GPU + stand-in ncu ------------------------------------------------------

VADD_STEPS = [dict(STEPS[0], symbol="vector_add")]


def fake_session() -> GpuSession:
    # Warm L2: the fake device's cold-L2 speed-of-light check compares a cached 48 KB add with a
    # 64 MiB numpy copy and calls it impossible on a loaded machine; the profile does not care.
    return GpuSession(fake=True, launch_timeout_s=2.0, timing=TimingSettings(cold_l2=False))


@pytest.fixture(autouse=True)
def _own_profile_lock(monkeypatch, tmp_path):
    """This process's profiles take a lock of the test's own, not the machine's
    (`profile.PROFILE_LOCK`): a test beside it (another pytest-xdist worker, another checkout's
    suite) holding the machine's lock made a 1 s profile say "another profile held this
    machine's GPU" instead of what the test asks about. The lock itself:
    test_one_profile_at_a_time_on_a_machine."""
    from kernel_lsp.runner import profile

    monkeypatch.setattr(profile, "PROFILE_LOCK", str(tmp_path / "kernel-lsp-ncu.lock"))


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "vadd.spec.py"
    path.write_text(SPEC)
    return load_specs(str(path)).specs[0]


def test_fake_gpu_and_stand_in_ncu_give_a_profile_of_the_timed_case(spec, monkeypatch):
    monkeypatch.setenv("KERNEL_LSP_NCU", str(FAKE_NCU))
    with fake_session() as s:
        check = s.check_compiled(fake_cubin({"vector_add": "vadd"}), VADD_STEPS, spec, profile=True)
        assert check.ok, check.message
        assert check.occupancy_note == "" and check.profile is not None
        [k] = check.profile.kernels
        assert (k.kernel, k.limiter, k.evidence) == ("vadd", "memory-bound", "L2 at 80% of peak")
        assert check.profile.case == "n=4096" and check.profile.wall_s > 0
        assert check.profile.hot_lines[0].kernel == "vadd"
        [fig] = check.occupancy
        assert (fig.kernel, fig.achieved, fig.theoretical, fig.case) == ("vadd", 0.7295, 1.0, "n=4096")
        assert "occupancy of vadd: achieved 73% of theoretical 100% (ncu)" in format_gpu_check(check)
        # Without profile=True nothing is read.
        assert s.check_compiled(fake_cubin({"vector_add": "vadd"}), VADD_STEPS, spec).profile is None


def test_one_profile_per_source_version(spec, monkeypatch, tmp_path):
    count = tmp_path / "count"
    monkeypatch.setenv("KERNEL_LSP_NCU", str(FAKE_NCU))
    monkeypatch.setenv("FAKE_NCU_COUNT", str(count))
    with fake_session() as s:
        for _ in range(2):
            check = s.check_compiled(fake_cubin({"vector_add": "vadd"}), VADD_STEPS, spec, profile=True)
            assert check.profile and check.profile.kernels
        assert count.read_text().count("collect") == 1
        other = fake_cubin({"vector_add": "vadd", "unused": "vadd"})  # another source version
        s.check_compiled(other, VADD_STEPS, spec, profile=True)
        assert count.read_text().count("collect") == 2


def test_a_failing_profiled_process_becomes_a_note(spec, monkeypatch):
    # The stand-in runs the profiled process for real: a job it cannot load makes it fail.
    monkeypatch.setenv("KERNEL_LSP_NCU", str(FAKE_NCU))
    with fake_session() as s:
        bad_steps = [dict(VADD_STEPS[0], grid="cdiv(n, 0)")]
        cubin = fake_cubin({"vector_add": "vadd"})
        check = s.check_compiled(cubin, VADD_STEPS, spec)
        s._profile(check, {"spec": s._spec_desc(spec, None), "steps": bad_steps}, cubin, {"vector_add": "vadd"}, "x.cu")  # fmt: skip
        assert check.occupancy == [] and "ncu" in check.occupancy_note
        assert check.profile is not None and check.profile.kernels == [] and check.profile.note


def test_no_permission_no_ncu_and_a_timeout_are_notes_not_errors(spec, monkeypatch, tmp_path):
    monkeypatch.setenv("KERNEL_LSP_NCU", str(FAKE_NCU))
    monkeypatch.setenv("FAKE_NCU_MODE", "noperm")
    cubin = fake_cubin({"vector_add": "vadd"})
    with fake_session() as s:
        check = s.check_compiled(cubin, VADD_STEPS, spec, profile=True)
        assert check.ok and check.occupancy == [] and "ERR_NVGPUCTRPERM" in check.occupancy_note
        assert "ERR_NVGPUCTRPERM" in check.profile.note
        monkeypatch.setenv("KERNEL_LSP_NCU", str(tmp_path / "no-such-ncu"))
        check = s.check_compiled(cubin, VADD_STEPS, spec, profile=True)
        assert check.ok and "not installed" in check.occupancy_note and check.profile.kernels == []


def test_a_hanging_ncu_times_out_into_a_note(spec, monkeypatch):
    from kernel_lsp.runner import profile

    monkeypatch.setenv("FAKE_NCU_MODE", "hang")
    job = {"spec": {}, "steps": [], "sizes": {}, "case": "n=1", "device": 0, "fake": True}
    report = profile.profile_kernels(str(FAKE_NCU), job, b"", {"k": "k"}, "x.cu", timeout_s=1.0)
    assert report.kernels == [] and report.note == "ncu did not finish in 1 s"


def test_one_profile_at_a_time_on_a_machine(monkeypatch, tmp_path):
    import fcntl

    from kernel_lsp.procs import ToolRuns
    from kernel_lsp.runner import profile

    monkeypatch.setattr(profile, "PROFILE_LOCK", str(tmp_path / "ncu.lock"))
    with profile.one_profile_at_a_time(1.0) as busy:
        assert busy == ""
        # Another process's profile: an open file description of its own on the same lock.
        other = os.open(profile.PROFILE_LOCK, os.O_RDONLY)
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(other)
    held = os.open(profile.PROFILE_LOCK, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        t0 = time.monotonic()
        with profile.one_profile_at_a_time(0.5) as busy:
            assert busy.startswith("not profiled: another profile held") and time.monotonic() - t0 < 2
        closed = ToolRuns()
        closed.end_all()
        with profile.one_profile_at_a_time(30.0, closed) as busy:
            assert busy == "not profiled: closed while another profile ran"
    finally:
        os.close(held)


def profiled_by_fake_ncu(spec, monkeypatch, tmp_path, mode: str):
    """(collecting runs, check) of one profiled check under the stand-in ncu in `mode`."""
    count = tmp_path / "count"
    count.write_text("")
    monkeypatch.setenv("KERNEL_LSP_NCU", str(FAKE_NCU))
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    monkeypatch.setenv("FAKE_NCU_COUNT", str(count))
    with fake_session() as s:
        check = s.check_compiled(fake_cubin({"vector_add": "vadd"}), VADD_STEPS, spec, profile=True)
    return count.read_text().count("collect"), check


@pytest.mark.parametrize(("mode", "collects"), [("nan-once", 2), ("nan", 2)])
def test_counters_ncu_could_not_read_are_collected_once_more(spec, monkeypatch, tmp_path, mode, collects):
    runs, check = profiled_by_fake_ncu(spec, monkeypatch, tmp_path, mode)
    assert runs == collects
    [k] = check.profile.kernels
    dram = "DRAM throughput (gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed)"
    # Read the second time: nothing missing. Still unread: listed, and the verdict from the rest.
    assert k.missing == ([dram] if mode == "nan" else []), k.missing
    assert k.limiter == "memory-bound"


@pytest.mark.parametrize(("mode", "collects"), [("fail-once", 2), ("fail", 2), ("noperm", 0)])
def test_a_launch_ncu_failed_to_profile_is_collected_once_more(spec, monkeypatch, tmp_path, mode, collects):
    runs, check = profiled_by_fake_ncu(spec, monkeypatch, tmp_path, mode)
    assert runs == collects  # noperm: no second run where the counters are not allowed
    assert check.ok and check.profile is not None
    if mode == "fail-once":  # the second run's figures
        assert [k.limiter for k in check.profile.kernels] == ["memory-bound"], check.profile.note
    else:  # said, with ncu's words
        assert check.profile.kernels == [] and check.profile.note, check.profile
        assert ("(ncu exit 9)" in check.profile.note) == (mode == "fail"), check.profile.note


def test_a_report_the_reader_chokes_on_is_a_note(spec, monkeypatch):
    from kernel_lsp.runner import profile

    def choke(*args, **kwargs):
        raise ValueError("cannot convert float NaN to integer")

    monkeypatch.setenv("KERNEL_LSP_NCU", str(FAKE_NCU))
    monkeypatch.setattr(profile, "build_report", choke)
    with fake_session() as s:
        check = s.check_compiled(fake_cubin({"vector_add": "vadd"}), VADD_STEPS, spec, profile=True)
        assert check.ok and check.profile is not None and check.profile.kernels == []
        assert (
            check.profile.note
            == "kernel-lsp could not read ncu's report: ValueError: cannot convert float NaN to integer"
        )


def test_stand_in_without_source_counters_still_gives_the_verdict(spec, monkeypatch):
    monkeypatch.setenv("KERNEL_LSP_NCU", str(FAKE_NCU))
    monkeypatch.setenv("FAKE_NCU_MODE", "nosource")
    monkeypatch.setenv("FAKE_NCU_RECORDING", "stencil2d_fp32")
    with fake_session() as s:
        check = s.check_compiled(fake_cubin({"stencil2d": "vadd"}), [dict(STEPS[0], symbol="stencil2d")], spec, profile=True)  # fmt: skip
        assert check.profile.kernels[0].limiter == "latency-bound"
        assert check.profile.hot_lines == [] and "per-line counters" in check.profile.note


# --- in words: bench --profile, --check json ------------------------------------------------------


def test_profile_lines_say_limiter_sol_stalls_memory_and_hot_lines():
    from kernel_lsp.profile_text import profile_lines

    report = report_of("reduce_sum_fp32", "reduce_sum/reduce_sum_fp32.cu", {})
    text = "\n".join(profile_lines(report))
    assert "profile reduce_sum_partial: memory-bound (L1/shared at 87% of peak)" in text
    assert "speed of light: DRAM 16% · L2 21% · L1/shared 87% · SM 79% · tensor 0% of peak" in text
    assert "achieved occupancy 86% of theoretical 100%" in text
    assert "top stalls: short scoreboard 33%, long scoreboard 30%, barrier 17%" in text
    assert (
        "memory: bank conflicts 170,195 of 28,685,543 shared wavefronts, global load 4.0 sectors/request"
        in text
    )
    assert "line 35: 55% of stall samples: short scoreboard | if (threadIdx.x < stride)" in text
    assert "profile reduce_sum_final: launch-bound (1 block(s) for 132 SMs)" in text
    assert profile_lines(ProfileReport(note="ncu did not finish in 120 s")) == [
        "profile: ncu did not finish in 120 s"
    ]


def test_check_json_carries_the_profile(spec, monkeypatch):
    import json

    from kernel_lsp.cli.formats import gpu_json

    monkeypatch.setenv("KERNEL_LSP_NCU", str(FAKE_NCU))
    with fake_session() as s:
        check = s.check_compiled(fake_cubin({"vector_add": "vadd"}), VADD_STEPS, spec, profile=True)
    doc = json.loads(json.dumps(gpu_json(check)))
    assert doc["profile"]["kernels"][0]["limiter"] == "memory-bound"
    assert doc["profile"]["hotLines"][0]["stall_label"] == "long scoreboard"
    assert doc["occupancy"][0]["achieved"] == pytest.approx(0.7295)


# --- in the editor --------------------------------------------------------------------------------


def test_hover_table_and_lenses_on_the_hottest_lines():
    from kernel_lsp.server.profile_view import hot_line_lenses, profile_markdown

    cu = SAMPLES / "stencil2d" / "stencil2d_fp32.cu"
    report = report_of("stencil2d_fp32", "stencil2d/stencil2d_fp32.cu", {})
    md = profile_markdown(report)
    assert (
        "| `stencil2d` | **latency-bound** (SM 55%, memory 41% of peak (both < 60%); top stall long scoreboard)"
        in md
    )
    assert "| stencil2d_fp32.cu:39 | 79% | long scoreboard | `dst[at] = 0.5f * src[at]" in md
    lenses = hot_line_lenses(report.hot_lines, str(cu))
    assert lenses[0].range.start.line == 38  # 0-based: line 39
    assert lenses[0].command.title == "79% of stall samples: long scoreboard (stencil2d)"
    assert len({lens.range.start.line for lens in lenses}) == len(lenses)
    assert hot_line_lenses(report.hot_lines, str(cu.with_name("other.cu"))) == []
    assert "not read" in profile_markdown(ProfileReport())


def test_check_text_names_the_limiter(spec, monkeypatch):
    monkeypatch.setenv("KERNEL_LSP_NCU", str(FAKE_NCU))
    with fake_session() as s:
        check = s.check_compiled(fake_cubin({"vector_add": "vadd"}), VADD_STEPS, spec, profile=True)
    assert "limiter of vadd: memory-bound (L2 at 80% of peak) (ncu)" in format_gpu_check(check)


def test_hot_line_text_comes_from_the_compiled_buffer_not_the_disk():
    # ncu reads the file from disk; the editor's unsaved text is what was compiled.
    cu = SAMPLES / "stencil2d" / "stencil2d_fp32.cu"
    buffer = cu.read_text().splitlines()
    buffer[38] = "    dst[at] = edited_in_the_buffer;"
    report = build_report(
        recorded("stencil2d_fp32", "raw"),
        recorded("stencil2d_fp32", "source"),
        {},
        str(cu),
        "",
        "\n".join(buffer),
    )
    assert report.hot_lines[0].line == 39 and report.hot_lines[0].text == "dst[at] = edited_in_the_buffer;"


def test_a_profile_without_achieved_occupancy_says_so(spec, monkeypatch):
    """ncu ran and read the kernel, but not its occupancy metrics: the check says that, rather
    than leaving bench and hover without an occupancy line and without a reason."""
    from kernel_lsp.gpu_reports import ProfileReport

    monkeypatch.setenv("KERNEL_LSP_NCU", str(FAKE_NCU))
    with fake_session() as s:
        cubin = fake_cubin({"vector_add": "vadd"})
        check = s.check_compiled(cubin, VADD_STEPS, spec)
        monkeypatch.setattr(
            s.backend, "profile", lambda *a, **k: ProfileReport([kernel_profile("vadd", {}, "n=4096")])
        )
        s._profile(check, {"spec": s._spec_desc(spec, None), "steps": VADD_STEPS}, cubin, {"vector_add": "vadd"}, "x.cu")  # fmt: skip
        assert check.occupancy == [], check.occupancy
        assert check.occupancy_note.startswith("ncu reported no achieved occupancy (missing: "), (
            check.occupancy_note
        )
