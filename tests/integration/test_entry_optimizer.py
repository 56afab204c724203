"""FSR at the level of a host entry, on the CPU: the entry samples (samples/entries/) and LLM-style
rewrites of them (tests/fixtures/entry_rewrites/) through the real loop with a scripted LLM: real
prompts, real extraction, the real signature check, static checks, fence and nvcc library build.
Only the GPU's verdicts come from content rules (optimizer/testing.py: a marker in the source
says what the GPU verifier and timer would find); tests/gpu/test_entry_optimizer_gpu.py runs the
same files on a GPU."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from scripted_llm import rewrite, scripted_proposer

from kernel_lsp.compile import CompileOptions, cuda_include_dirs, find_toolchain
from kernel_lsp.optimizer.model import Status
from kernel_lsp.optimizer.proposers.tuner import TunerProposer
from kernel_lsp.optimizer.session import RunRequest, find_spec, run
from kernel_lsp.optimizer.testing import ContentEvaluator, Rule
from kernel_lsp.spec import load_specs

pytestmark = [
    pytest.mark.slow,  # the slow tier (optimizer rounds over nvcc-built launchers): python -m pytest -m slow
    pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing"),
]

ENTRIES = Path(__file__).resolve().parents[2] / "samples" / "entries"
OPTIONS = CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs())
# What the GPU says about the wrong rewrites (tests/gpu/test_entry_optimizer_gpu.py checks it).
POISON = "; 1000 still hold the poison (never written?)"
RULES = {
    "vector_add_bf16": [
        Rule("vector_add_bf16_vec8", 40e-6),
        Rule("__floats2bfloat162_rn(x.x + y.x", 70e-6),
        Rule("__ldg(a + i)", 90e-6),
        Rule(
            "n / threads",
            None,
            "mismatch (n=1000): case n=1000: `c` is wrong at 1000 of 1000 elements" + POISON,
        ),
        Rule(
            "65535",
            None,
            "mismatch (n=33554432): case n=33554432: `c` is wrong at 16777216 of 33554432 elements",
        ),
    ],
    "layernorm_fp32": [
        # The race fails verification on a GPU; here it is fast and correct, so that the proof
        # gate is what stops it.
        Rule("shared[warp] = v;\n    const int warps", 35e-6),
        Rule("layernorm_fused_kernel", 50e-6),
        Rule("warp_reduce", 80e-6),
    ],
    "l2_normalize_coop": [Rule("l2norm_coop512", 60e-6), Rule("sum_squares_kernel", 75e-6)],
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    shutil.copytree(ENTRIES, tmp_path / "entries")
    return tmp_path / "entries"


def fsr(folder: Path, sample: str, script: dict, **kw):
    path = folder / f"{sample}.cu"
    spec = load_specs(str(folder / f"{sample}.spec.py")).specs[0]
    evaluator = ContentEvaluator(str(path), spec, OPTIONS, rules=RULES[sample], **kw)
    proposer, client = scripted_proposer(script)
    req = RunRequest(
        path=str(path),
        kernel=spec.kernel,
        rounds=1,
        candidates=len(script),
        use_cache=False,
        workspace=str(folder),
    )
    return run(req, evaluator=evaluator, proposer=proposer), evaluator, client


def test_vector_add_rewrites_are_accepted_measured_or_rejected_with_the_reason(folder):
    names = [
        "vec8_renamed",
        "dropped_include",
        "kernel_only",
        "off_by_one",
        "skips_large_n",
        "system_call",
        "changed_signature",
    ]
    script = {(1, i): rewrite(f"vector_add_bf16.{n}") for i, n in enumerate(names, 1)}
    script[(1, len(names) + 1)] = "Use wider loads and a grid-stride loop; that should help."
    result, evaluator, client = fsr(folder, "vector_add_bf16", script, proofs={})
    by = {n: result.outcomes[i] for i, n in enumerate(names)}
    status = {n: o.status for n, o in by.items()}
    assert status == {
        "vec8_renamed": Status.CORRECT,
        "dropped_include": Status.CORRECT,
        "kernel_only": Status.CORRECT,
        "off_by_one": Status.INCORRECT,
        "skips_large_n": Status.INCORRECT,
        "system_call": Status.UNSAFE,
        "changed_signature": Status.CANNOT_LAUNCH,
    }, {n: (o.status, o.message) for n, o in by.items()}
    assert result.outcomes[-1].status is Status.NO_CODE

    # Every correct rewrite is measured against the original.
    for n in ("vec8_renamed", "dropped_include", "kernel_only"):
        assert by[n].figures is not None and by[n].speedup and by[n].speedup > 1, n
    # The complete file is the candidate, as the model wrote it: its renamed kernel and its own
    # launcher, nothing of the original's spliced in (or moved above what it calls).
    vec8 = by["vec8_renamed"].source
    assert "vector_add_bf16_kernel" not in vec8 and vec8.index("vector_add_bf16_vec8(") < vec8.index(
        'extern "C" void vector_add_bf16('
    )
    assert by["vec8_renamed"].extraction == ""
    # A dropped include the file needs is added back, and the candidate says so.
    fixed = by["dropped_include"].source
    assert fixed.startswith("// Grid-stride loop with bf16x2 arithmetic.\n#include <cuda_bf16.h>\n__global__")
    assert "added `#include <cuda_bf16.h>`" in by["dropped_include"].extraction
    # Kernels alone keep the original's launcher (and its includes).
    kernel_only = by["kernel_only"].source
    assert "__ldg(a + i)" in kernel_only and "const int threadsPerBlock = 256;" in kernel_only
    assert "#include <cstdio>" in kernel_only and kernel_only.count("__global__") == 1
    assert "keeps its launcher `vector_add_bf16`" in by["kernel_only"].extraction
    # The wrong ones: the GPU's reason, the fence's (never built, never run), the signature's.
    assert "1000 of 1000 elements" in by["off_by_one"].message
    assert "n=33554432" in by["skips_large_n"].message
    assert "calls `system`, which runs another program" in by["system_call"].message
    assert "line 14: calls `system`" in by["system_call"].message
    assert "`int n` is now `size_t n`" in by["changed_signature"].message
    checked = set(evaluator.trusted)
    assert by["system_call"].source not in checked and by["changed_signature"].source not in checked
    # The LLM's candidates ran as code the user did not write; the original as the user's.
    assert evaluator.trusted[(folder / "vector_add_bf16.cu").read_text()] is True
    assert not any(evaluator.trusted[by[n].source] for n in ("vec8_renamed", "off_by_one"))

    # The fastest, proven, is offered as a diff of the whole file.
    assert result.accepted is by["vec8_renamed"], result.verdict
    assert "compute-sanitizer (memcheck, racecheck, initcheck, synccheck" in result.verdict
    assert evaluator.proved == [vec8]
    report = json.loads(Path(result.report_paths[0]).read_text())
    assert "-__global__ void vector_add_bf16_kernel(" in report["diff"]
    assert "+__global__ void vector_add_bf16_vec8(" in report["diff"]
    md = Path(result.report_paths[1]).read_text()
    assert "## What extraction changed in the answers" in md and "added `#include <cuda_bf16.h>`" in md
    assert "## Proof gate (compute-sanitizer)" in md

    # The prompt was the entry's: what may change, the signature to keep, the fence in words.
    request = client.requests[0]
    assert "keep:" in request["system"] and "each\n  parameter's type AND name" in request["system"]
    assert "no files, sockets, processes" in request["system"]
    assert "Optimize the file below: its entry `vector_add_bf16`" in request["user"]
    assert (
        'extern "C" void vector_add_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, '
        "__nv_bfloat16* c, int n)" in request["user"]
    )
    assert "vector_add_bf16_kernel<<<>>>" not in request["user"]
    assert (
        "line 20: `vector_add_bf16_kernel` <<<>>>, grid (n + threadsPerBlock - 1) / threadsPerBlock"
        in (request["user"])
        or "line 20: `vector_add_bf16_kernel` <<<>>>, grid (n + 255) / 256, block 256" in request["user"]
    )


def test_a_race_the_sanitizer_finds_blocks_the_offer_and_the_next_is_offered(folder):
    """A changed decomposition (one fused kernel, no temporaries) and kernels alone into the
    original's launcher with its host steps; the fastest (a race) is stopped by the proof gate
    with the sanitizer's message at its line."""
    script = {
        (1, 1): rewrite("layernorm_fp32.race"),
        (1, 2): rewrite("layernorm_fp32.fused"),
        (1, 3): rewrite("layernorm_fp32.kernels_only"),
    }
    race_line = "if (lane == 0) shared[warp] = v;"  # and no barrier before warp 0 reads them
    proofs = {
        race_line + "\n    const int warps": (
            "racecheck",
            "Race reported between Write access and Read access",
        )
    }
    result, evaluator, _ = fsr(folder, "layernorm_fp32", script, proofs=proofs)
    race, fused, kernels_only = result.outcomes
    assert race.status is Status.SANITIZER, race.message
    line = race.source.splitlines().index("    " + race_line) + 1
    # The next prompt gets the line and kernel-lsp's words for the finding, not the tool's text.
    assert f"line {line}: racecheck: race on shared memory" in race.message
    assert "Race reported" not in race.message
    assert race_line in race.message  # the line's text, since the candidate is not the user's file
    assert result.accepted is fused, result.verdict
    assert "cudaMalloc" not in fused.source and fused.source.count("<<<") == 1
    assert kernels_only.status is Status.CORRECT
    assert "cudaMemset(var_sum, 0, rows * sizeof(float));" in kernels_only.source
    assert kernels_only.source.index("float warp_reduce(") < kernels_only.source.index("row_mean_kernel(")
    assert [len(o.source or "") > 0 for o in (race, fused)] == [True, True]
    assert evaluator.proved == [race.source, fused.source]
    md = Path(result.report_paths[1]).read_text()
    assert f"  - layernorm_fp32.cu:{line}: racecheck: Race reported" in md


def test_cooperative_and_non_cooperative_rewrites_of_the_cooperative_sample(folder):
    script = {
        (1, 1): rewrite("l2_normalize_coop.coop_variant"),
        (1, 2): rewrite("l2_normalize_coop.two_kernels"),
    }
    result, _, _ = fsr(folder, "l2_normalize_coop", script)
    coop, two = result.outcomes
    assert coop.status is Status.CORRECT and two.status is Status.CORRECT, (coop.message, two.message)
    assert "#include <cooperative_groups.h>" in coop.source and "cooperative_groups.h" in coop.extraction
    assert "cudaLaunchCooperativeKernel((void*)l2norm_coop512" in coop.source
    assert result.accepted is coop
    # No sanitizer in this evaluator: the verdict says the gate did not run, never silence.
    assert (
        "The proof gate (compute-sanitizer) was not run: this evaluator has no sanitizer." in result.verdict
    )


def test_the_tuner_tunes_the_launchers_block_size_as_the_users_own_code(folder):
    path = folder / "vector_add_bf16.cu"
    spec = load_specs(str(folder / "vector_add_bf16.spec.py")).specs[0]
    source = path.read_text()
    tuner = TunerProposer(source, spec, ["vector_add_bf16_kernel"], "sm_90")
    assert dict(tuner.params) == {"threadsPerBlock@18": ("32", "64", "128", "256", "512", "1024")}
    rules = [Rule("threadsPerBlock = 512;", 60e-6), Rule("threadsPerBlock = 1024;", 80e-6)]
    evaluator = ContentEvaluator(str(path), spec, OPTIONS, rules=rules, proofs={})
    req = RunRequest(
        path=str(path), kernel="vector_add_bf16", proposer="tune", use_cache=False, workspace=str(folder)
    )
    result = run(req, evaluator=evaluator)
    assert result.accepted is not None and result.accepted.note == "threadsPerBlock=512", result.verdict
    assert "const int threadsPerBlock = 512;" in result.accepted.source
    # The tuner's candidates are the user's own code: built without the fence, run unsandboxed,
    # and the proof gate says why it did not run.
    assert all(evaluator.trusted.values()) and evaluator.proved == []
    assert "the candidate is your own code with other constants" in result.verdict


def test_a_kernel_the_entry_launches_finds_the_entry_spec(folder):
    spec, _ = find_spec(str(folder / "layernorm_fp32.cu"), "row_variance_kernel")
    assert spec.entry == "layernorm_fp32"
