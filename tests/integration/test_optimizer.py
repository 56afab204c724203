"""The optimizer without a GPU: extraction, tunables, prompts, the loop's selection logic, the
tuner on a sample, the cache, reports, edits and the CLI.

The compile gate is real NVRTC everywhere. The GPU gates (verification, timing, A/B) come from
optimizer.testing.ContentEvaluator or a small scripted evaluator here, deciding by the
candidate's text; the GPU tests (tests/gpu/test_optimizer_gpu.py) run the real ones."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
from fixture_sources import VADD as SIMPLE
from hypothesis import given
from hypothesis import strategies as st

from kernel_lsp.cli.optimize import apply_result, optimize_main
from kernel_lsp.compile import CompileOptions, compile_source
from kernel_lsp.optimizer.edits import apply_line_edits, line_edits
from kernel_lsp.optimizer.evaluator import launch_problem, launch_ready
from kernel_lsp.optimizer.extract import code_blocks, extract_candidate
from kernel_lsp.optimizer.features import Features, Hardware, Profile
from kernel_lsp.optimizer.loop import LoopSettings, Target, optimize
from kernel_lsp.optimizer.model import Comparison, Figures, Outcome, Proposal, Status
from kernel_lsp.optimizer.prompts import round_prompt, system_prompt
from kernel_lsp.optimizer.proposers.base import Proposer
from kernel_lsp.optimizer.proposers.tuner import TunerProposer, tune_space
from kernel_lsp.optimizer.session import OptimizeError, RunRequest, find_spec, run
from kernel_lsp.optimizer.testing import ContentEvaluator, Rule, make_content_evaluator
from kernel_lsp.optimizer.tunables import LAUNCH_BLOCK, apply_config, current_config, define_values
from kernel_lsp.spec import load_specs

REPO = Path(__file__).resolve().parents[2]
VADD_DIR = REPO / "samples" / "vector_add"

SPEC = """\
from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    kernel="vadd",
    sizes=[{"n": 1}, {"n": 1000}, {"n": 1 << 20}],
    args={"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")},
    reference=lambda a, b: {"c": a + b},
)
"""


@pytest.fixture
def simple(tmp_path: Path) -> Path:
    (tmp_path / "vadd.cu").write_text(SIMPLE)
    (tmp_path / "vadd.spec.py").write_text(SPEC)
    return tmp_path / "vadd.cu"


def _spec(path: Path):
    return load_specs(str(path.with_suffix("").with_suffix(".spec.py"))).specs[0]


# --- extraction ---------------------------------------------------------------------------------


def test_extract_fenced_block_with_language_tags():
    for tag in ("cuda", "cpp", "c++", "", "cu"):
        answer = f"Sure!\n```{tag}\n{SIMPLE}```\nDone."
        got = extract_candidate(answer, SIMPLE, ["vadd"])
        assert got.source == SIMPLE, tag


def test_extract_prefers_the_block_that_defines_the_kernel():
    answer = f"First a helper:\n```cuda\n__device__ float twice(float x) {{ return 2 * x; }}\n```\nThen:\n```cuda\n{SIMPLE}```"
    assert extract_candidate(answer, SIMPLE, ["vadd"]).source == SIMPLE
    assert len(code_blocks(answer)) == 2


def test_extract_prose_only_is_no_code():
    got = extract_candidate("Use float4 loads and a grid-stride loop.", SIMPLE, ["vadd"])
    assert got.source is None and got.message == "the answer holds no code"


def test_extract_code_without_the_kernel_is_rejected():
    got = extract_candidate("```cuda\n__global__ void other(int* x) { }\n```", SIMPLE, ["vadd"])
    assert got.source is None and "defines none of the kernels vadd" in got.message


def test_extract_bare_code_without_fences():
    body = SIMPLE.split("\n", 1)[1]  # no launch line either
    got = extract_candidate("Here it is:\n" + body + "\nThis is faster.", SIMPLE, ["vadd"])
    assert got.source is not None and "a[i] + b[i]" in got.source
    # Kernels alone replace their definitions in the original: its launch line stays.
    assert got.source.startswith("// kernel-lsp: launch vadd grid=cdiv(n, 256) block=256")
    assert "spliced" in got.message


def test_extract_launch_line_from_the_prose():
    body = "#include <cuda_runtime.h>\n" + SIMPLE.split("\n", 1)[1]
    answer = f"```cuda\n{body}```\nLaunch it as `// kernel-lsp: launch vadd grid=cdiv(n, 512) block=512`."
    got = extract_candidate(answer, SIMPLE, ["vadd"])
    assert "// kernel-lsp: launch vadd grid=cdiv(n, 512) block=512" in got.source
    assert "taken from the answer's text" in got.message


def test_extract_splices_a_partial_answer_into_the_original():
    original = (VADD_DIR / "vector_add_fp32.cu").read_text()
    new_kernel = 'extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n)\n{\n    // NEW BODY\n}\n'
    got = extract_candidate(f"```cuda\n{new_kernel}```", original, ["vector_add"])
    assert "// NEW BODY" in got.source and "#define BLOCK 256" in got.source
    assert got.source.count("__global__") == 1 and "spliced" in got.message
    assert compile_source(got.source, "x.cu", CompileOptions(arch="sm_90")).ok


def test_extract_unterminated_fence():
    got = extract_candidate("```cuda\n" + SIMPLE, SIMPLE, ["vadd"])
    assert got.source == SIMPLE


# --- tunables and launch lines ------------------------------------------------------------------


def test_apply_config_rewrites_the_defaults():
    src = (VADD_DIR / "vector_add_fp32.cu").read_text()
    out = apply_config(src, {"BLOCK": "512", "VEC": "4"})
    assert define_values(out)["BLOCK"] == 512 and define_values(out)["VEC"] == 4
    assert define_values(out)["ITEMS"] == 1
    assert out.count("\n") == src.count("\n")
    assert current_config(out, {"BLOCK": ("256", "512"), "VEC": ("1", "4")}) == {"BLOCK": "512", "VEC": "4"}


def test_apply_config_adds_a_missing_define_under_the_tune_line():
    src = "// kernel-lsp: tune TILE=16,32\n__global__ void k() {}\n"
    out = apply_config(src, {"TILE": "32"})
    assert out.splitlines()[1:4] == ["#ifndef TILE", "#define TILE 32", "#endif"]


def test_literal_block_size_is_a_tunable_when_nothing_is_marked():
    space = tune_space(SIMPLE, ["vadd"])
    assert space == {LAUNCH_BLOCK: ("64", "128", "256", "512", "1024")}
    out = apply_config(SIMPLE, {LAUNCH_BLOCK: "512"})
    assert out.splitlines()[0] == "// kernel-lsp: launch vadd grid=cdiv(n, 512) block=512"


def test_launch_ready_puts_macro_values_in_launch_lines_only():
    src = (VADD_DIR / "vector_add_fp32.cu").read_text()
    out = launch_ready(src)
    assert "// kernel-lsp: launch vector_add grid=cdiv(n, 256*1*1) block=256" in out
    assert "const int first = blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;" in out
    assert launch_ready(src, ("BLOCK=128",)).count("block=128") == 1


def test_launch_problem_block_too_large(simple):
    big = apply_config(SIMPLE, {LAUNCH_BLOCK: "2048"})
    result = compile_source(big, str(simple), CompileOptions(arch="sm_90"))
    assert "2048 threads is over the limit of 1024" in launch_problem(result, big, _spec(simple), ["vadd"])


def test_launch_problem_registers_over_the_file(simple):
    heavy = (
        SIMPLE.replace(
            "if (i < n) c[i] = a[i] + b[i];",
            "float acc[200];\n#pragma unroll\n    for (int k = 0; k < 200; ++k) acc[k] = a[(i + k) % n] * k;\n"
            "    float s = 0;\n#pragma unroll\n    for (int k = 0; k < 200; ++k) s += acc[k] * acc[199 - k];\n    if (i < n) c[i] = s;",
        )
        .replace("block=256", "block=1024")
        .replace("cdiv(n, 256)", "cdiv(n, 1024)")
    )
    result = compile_source(heavy, str(simple), CompileOptions(arch="sm_90"))
    assert result.ok
    regs = result.kernels[0].registers
    problem = launch_problem(result, heavy, _spec(simple), ["vadd"])
    if regs * 1024 > 65536:
        assert problem and "registers" in problem
    else:  # ptxas kept it small: then it can launch
        assert problem is None


# --- prompts and features -----------------------------------------------------------------------


def _features(path: Path) -> Features:
    spec = _spec(path)
    return Features(
        "vadd",
        ["vadd"],
        str(path),
        SIMPLE,
        spec,
        Hardware("NVIDIA H200", "sm_90", 132, 233472, 65536, 60 << 20, 4.0e12, {"float32": 67e12}),
        Profile(Figures(50e-6, 49e-6, 52e-6, 300, 0.62, "DRAM", 2.5e12, ["n=1048576"])),
    )


def test_round_prompt_holds_the_features_and_the_feedback(simple):
    best = Outcome("baseline", 0, "original", Status.CORRECT, source=SIMPLE, figures=Figures(50e-6))
    failed = [
        Outcome(
            "r1c1", 1, "llm", Status.COMPILE_ERROR, message='line 3:5: error: identifier "flaot" is undefined'
        ),
        Outcome("r1c2", 1, "llm", Status.INCORRECT, message="mismatch (n=97): c[4] = 0.1, expected 2.2"),
        Outcome("r1c3", 1, "llm", Status.CORRECT, note="float4", figures=Figures(40e-6), speedup=1.25),
    ]
    text = round_prompt(_features(simple), best, 2, 3, 4, failed)
    for want in (
        "candidate 3 of 4 in round 2",
        "NVIDIA H200 (sm_90), 132 SMs",
        "measured DRAM bandwidth (best streaming kernel): 4000 GB/s",
        "62% of the DRAM roofline",
        "timed at: n=1048576",
        "verified at: n=1; n=1000; n=1048576; n=97",
        "// kernel-lsp: launch vadd grid=cdiv(n, 256) block=256",
        'identifier "flaot" is undefined',
        "mismatch (n=97)",
        "r1c3 (float4): correct, 40.00 us, 1.25x the original",
        "Current best version (baseline, 50.00 us)",
    ):
        assert want in text, want
    assert "ONE complete `.cu` file" in system_prompt()


def test_candidates_of_a_round_get_different_hints(simple):
    best = Outcome("baseline", 0, "original", Status.CORRECT, source=SIMPLE)
    prompts = {round_prompt(_features(simple), best, 1, i, 4).split("\n")[0] for i in range(1, 5)}
    assert len(prompts) == 4


# --- the loop's selection logic -----------------------------------------------------------------


class Scripted(Proposer):
    name = "scripted"

    def __init__(self, rounds: list[list[Proposal]]):
        self.rounds = rounds
        self.seen: list[list[Outcome]] = []

    def propose(self, ctx):
        return self.rounds[ctx.round - 1] if ctx.round <= len(self.rounds) else []

    def observe(self, outcomes):
        self.seen.append(outcomes)


def _target(path: Path) -> Target:
    return Target(str(path), SIMPLE, _spec(path), ["vadd"])


def _p(marker: str) -> Proposal:
    return Proposal("scripted", SIMPLE.replace("if (i < n)", f"/* {marker} */ if (i < n)"), note=marker)


RULES = [
    Rule("WRONG", None, "mismatch (n=1000): c[7] = 0, expected 1.5"),
    Rule("FAST", 50e-6),
    Rule("FASTER", 40e-6),
    Rule("SLOW", 200e-6),
]


def _evaluator(path: Path, noise: float = 0.004, rules=RULES) -> ContentEvaluator:
    return ContentEvaluator(str(path), _spec(path), CompileOptions(arch="sm_90"), rules=rules, noise=noise)


def test_the_fastest_correct_candidate_wins_and_seeds_the_next_round(simple):
    proposer = Scripted([[_p("SLOW"), _p("WRONG"), _p("FAST")], [_p("FASTER"), _p("SLOW 2")]])
    result = optimize(_target(simple), proposer, _evaluator(simple), LoopSettings(rounds=3, candidates=3))
    assert [o.status for o in result.outcomes] == [
        Status.CORRECT,
        Status.INCORRECT,
        Status.CORRECT,
        Status.CORRECT,
        Status.CORRECT,
    ]
    # "FASTER" contains "FAST": the first rule that matches decides, so it is 50 us; the round
    # did not improve and the loop stopped (patience 1).
    assert result.accepted.id == "r1c3" and result.rounds[0].improved and not result.rounds[1].improved
    assert result.stop_reason == "no improvement in 1 round(s)"
    assert result.accepted.speedup == pytest.approx(2.0)
    assert "1 incorrect" in result.verdict


def test_no_offer_when_the_ab_bound_does_not_clear_the_threshold(simple):
    rules = [Rule("NEARLY", 98e-6)]
    ev = _evaluator(simple, noise=0.03, rules=rules)
    result = optimize(_target(simple), Scripted([[_p("NEARLY")]]), ev, LoopSettings(rounds=1))
    assert result.accepted is None and result.best.id == "r1c1"
    assert "lower bound" in result.verdict and "does not clear 1.02" in result.verdict
    assert ev.compares == 1


def test_no_offer_when_nothing_is_faster(simple):
    result = optimize(
        _target(simple), Scripted([[_p("SLOW"), _p("WRONG")]]), _evaluator(simple), LoopSettings(rounds=1)
    )
    assert result.accepted is None
    assert result.verdict.startswith("nothing offered: no correct candidate was faster")
    assert "0.50x" in result.verdict and "1 incorrect" in result.verdict


def test_a_baseline_that_fails_its_spec_stops_the_run(simple):
    ev = _evaluator(simple, rules=[Rule("a[i] + b[i]", None, "mismatch (n=1): c[0] = nan")])
    result = optimize(_target(simple), Scripted([[_p("FAST")]]), ev, LoopSettings(rounds=1))
    assert result.stop_reason == "baseline failed" and not result.outcomes
    assert "does not pass its gates (incorrect): mismatch (n=1)" in result.verdict


def test_cancel_stops_between_candidates(simple):
    cancel = threading.Event()
    events = []

    def observer(e):
        events.append(e)
        if e.kind == "candidate":
            cancel.set()

    result = optimize(
        _target(simple),
        Scripted([[_p("FAST"), _p("SLOW")]]),
        _evaluator(simple),
        LoopSettings(rounds=2),
        [observer],
        cancel,
    )
    assert len(result.outcomes) == 1 and result.stop_reason == "cancelled"
    assert result.accepted is None and result.verdict.startswith("cancelled")
    assert events[-1].kind == "done"


def test_progress_events_count_compiled_and_correct(simple):
    events = []
    bad = Proposal("scripted", SIMPLE.replace("int i", "flaot i"))
    optimize(
        _target(simple),
        Scripted([[bad, _p("FAST")]]),
        _evaluator(simple),
        LoopSettings(rounds=1),
        [events.append],
    )
    end = next(e for e in events if e.kind == "round_end")
    assert (end.proposed, end.compiled, end.correct) == (2, 1, 1)
    assert end.best_speedup == pytest.approx(2.0)
    assert end.headline == "round 1/1 · 2 candidates, 1 compiled, 1 correct · best 2.00x"


# --- the tuner on a sample, the cache -----------------------------------------------------------


def _vadd_cost(source: str) -> float:
    v = define_values(source)
    return (
        100e-6
        * (1 + abs(v["BLOCK"] - 512) / 1024)
        * (1 + abs(v["ITEMS"] - 2) / 4)
        / {1: 1, 2: 1.3, 4: 1.4}[v["VEC"]]
    )


class CostEvaluator(ContentEvaluator):
    def _rule(self, source):
        return Rule("", _vadd_cost(source))


def test_tuner_finds_the_best_configuration_of_the_sample_and_caches_it(tmp_path):
    shutil.copytree(VADD_DIR, tmp_path / "vector_add")
    path = tmp_path / "vector_add" / "vector_add_fp32.cu"
    spec = _spec(path)
    req = RunRequest(
        path=str(path),
        kernel="vector_add",
        proposer="tune",
        cache_dir=str(tmp_path / "cache"),
        workspace=str(tmp_path),
    )
    first_ev = CostEvaluator(str(path), spec, CompileOptions(arch="sm_90"))
    first = run(req, evaluator=first_ev)
    assert first.accepted.note == "BLOCK=512 ITEMS=2 VEC=4"
    assert define_values(first.accepted.source) == {"BLOCK": 512, "ITEMS": 2, "VEC": 4}
    space = first.settings["space_size"]
    assert first_ev.checks - 1 < space  # fewer evaluations than exhaustive search
    # The second run asks the same questions and gets every answer from the cache.
    second_ev = CostEvaluator(str(path), spec, CompileOptions(arch="sm_90"))
    second = run(req, evaluator=second_ev)
    assert second_ev.checks == 0 and second_ev.compares == 0
    assert second.accepted.source == first.accepted.source
    assert second.settings["cache_hits"] > 0 and all(
        o.cached or o.status is Status.DUPLICATE for o in second.outcomes
    )


def test_tuner_skips_blocks_that_cannot_launch(tmp_path):
    src = '// kernel-lsp: launch k grid=cdiv(n, B*2) block=B*2\n// kernel-lsp: tune B=256,512,1024\n#define B 256\nextern "C" __global__ void k(float* x, int n) {}\n'
    (tmp_path / "k.cu").write_text(src)
    (tmp_path / "k.spec.py").write_text(
        'from kernel_lsp.spec import Out, Scalar, Spec\nSPEC = Spec(kernel="k", sizes=[{"n": 10}], args={"x": Out("float32"), "n": Scalar("int32")}, reference=lambda: {"x": 0})\n'
    )
    spec = _spec(tmp_path / "k.cu")
    tuner = TunerProposer(src, spec, ["k"], "sm_90")
    assert [c["B"] for c in tuner.space] == ["256", "512"]


# --- sessions, reports, the CLI -----------------------------------------------------------------


def test_find_spec_messages(simple, tmp_path):
    with pytest.raises(OptimizeError, match=r"has no spec: other\.spec\.py does not exist"):
        find_spec(str(tmp_path / "other.cu"), "k")
    with pytest.raises(OptimizeError, match=r"has no spec for `nope` \(it has: vadd\)"):
        find_spec(str(simple), "nope")
    spec, _ = find_spec(str(REPO / "samples" / "dot" / "dot_fp32.cu"), "dot_partial")
    assert spec.kernel == "dot"


def test_nothing_to_tune_is_explained(simple):
    # One thread per block, written as a literal the grid does not repeat: nothing says how to vary it.
    simple.write_text(SIMPLE.replace("block=256", "block=1").replace("cdiv(n, 256)", "n"))
    with pytest.raises(OptimizeError, match="nothing to tune"):
        run(
            RunRequest(path=str(simple), kernel="vadd", proposer="tune", use_cache=False),
            evaluator=_evaluator(simple),
        )


def test_no_gpu_is_said_plainly(simple, monkeypatch):
    class NoGpu(ContentEvaluator):
        available = False
        reason = "no CUDA driver"

    with pytest.raises(
        OptimizeError, match=r"no GPU: no NVIDIA driver is installed \(libcuda cannot be loaded\)\. FSR"
    ):
        run(
            RunRequest(path=str(simple), kernel="vadd", proposer="tune"),
            evaluator=NoGpu(str(simple), _spec(simple), CompileOptions()),
        )


def test_report_holds_candidates_figures_and_diff(simple, tmp_path):
    proposer = Scripted([[_p("WRONG"), _p("FAST")]])
    result = optimize(_target(simple), proposer, _evaluator(simple), LoopSettings(rounds=1))
    from kernel_lsp.optimizer.report import write_report

    paths = write_report(result, str(tmp_path), secrets=["sk-secret-value"])
    data = json.loads(Path(paths[0]).read_text())
    assert data["accepted"] == "r1c2" and data["failures"] == {"incorrect": 1}
    assert [c["status"] for c in data["candidates"]] == ["incorrect", "correct"]
    assert data["comparison"]["ci_low"] > 1.02
    assert "+    /* FAST */ if (i < n) c[i] = a[i] + b[i];" in data["diff"]
    md = Path(paths[1]).read_text()
    assert "| r1c2 **(offered)** |" in md and "## Final diff" in md and "mismatch (n=1000)" in md
    assert str(tmp_path / ".kernel-lsp" / "reports") in paths[0]


def test_cli_tunes_prints_diff_and_table_and_applies_after_backup(simple, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("kernel_lsp.optimizer.evaluator.INJECTED", make_content_evaluator)
    monkeypatch.setenv(
        "KERNEL_LSP_TEST_RULES", json.dumps([["block=512", 60e-6, ""], ["block=1024", 70e-6, ""]])
    )
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    code = optimize_main([str(simple), "--kernel", "vadd", "--apply", "--workspace", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "-// kernel-lsp: launch vadd grid=cdiv(n, 256) block=256" in captured.out
    assert "+// kernel-lsp: launch vadd grid=cdiv(n, 512) block=512" in captured.out
    assert "A/B speedup (95% CI)" in captured.out and "latency (median)" in captured.out
    assert "applied to" in captured.out and "report: " in captured.out
    assert "round 1" in captured.err  # progress went to stderr
    assert "block=512" in simple.read_text()
    (backup,) = (tmp_path / ".kernel-lsp" / "backups").iterdir()
    assert backup.read_text() == SIMPLE


def test_no_variable_names_code_for_the_optimizer_to_import(simple, tmp_path, monkeypatch, capsys):
    """The evaluator seam is set by a test, never read from the environment: a variable naming a
    module (once the seam's form) imports nothing, and a run without a GPU says so."""
    (tmp_path / "klsp_planted.py").write_text(
        f"open({str(tmp_path / 'imported')!r}, 'w').close()\ndef factory(*a): raise SystemExit('ran')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("KERNEL_LSP_OPTIMIZER_EVALUATOR", "klsp_planted:factory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    code = optimize_main(
        [str(simple), "--kernel", "vadd", "--proposer", "tune", "--workspace", str(tmp_path)]
    )
    assert code != 0 and not (tmp_path / "imported").exists()
    assert "GPU" in capsys.readouterr().err


def test_apply_refuses_a_file_changed_meanwhile(simple, tmp_path):
    simple.write_text(SIMPLE + "// edited\n")
    with pytest.raises(OptimizeError, match="changed while the run was going on"):
        apply_result(str(simple), SIMPLE, "new", str(tmp_path))
    assert simple.read_text() == SIMPLE + "// edited\n"


def test_cli_without_spec_exits_2(tmp_path, capsys):
    (tmp_path / "k.cu").write_text(SIMPLE)
    assert optimize_main([str(tmp_path / "k.cu"), "--kernel", "vadd"]) == 2
    assert "has no spec" in capsys.readouterr().err


# --- edits --------------------------------------------------------------------------------------


@given(
    st.lists(st.sampled_from(["a\n", "b\n", "c\n", "", "x", "  y\n"]), max_size=12),
    st.lists(st.sampled_from(["a\n", "b\n", "d\n", "", "z", "  y\n"]), max_size=12),
)
def test_line_edits_turn_the_old_text_into_the_new(old, new):
    o, n = "".join(old), "".join(new)
    assert apply_line_edits(o, line_edits(o, n)) == n


def test_comparison_dataclass_round_trips():
    c = Comparison(1.5, 1.4, 1.6, 100)
    assert Comparison(**json.loads(json.dumps(c.__dict__))) == c
