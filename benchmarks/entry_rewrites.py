"""What the optimizer's gates before the GPU make of LLM-style rewrites of the entry samples: for
each answer in tests/fixtures/entry_rewrites/, extraction (what it changed), the entry's
signature, the static checks, the fence and the nvcc library build (with its time). No GPU: the
verdicts after these gates come from tests/gpu/test_entry_optimizer_gpu.py.

    python benchmarks/entry_rewrites.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernel_lsp import fence  # noqa: E402
from kernel_lsp.compile import CompileOptions, cuda_include_dirs  # noqa: E402
from kernel_lsp.compile.shared_lib import compile_library  # noqa: E402
from kernel_lsp.optimizer.entry import signature_problem  # noqa: E402
from kernel_lsp.optimizer.extract import extract_candidate  # noqa: E402
from kernel_lsp.optimizer.static_checks import NEW_GLOBAL, inspect_candidate  # noqa: E402

ENTRIES = {
    "vector_add_bf16": "vector_add_bf16",
    "layernorm_fp32": "layernorm_fp32",
    "l2_normalize_coop": "l2_normalize",
}


def main() -> int:
    options = CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs())
    rows = []
    for answer in sorted((REPO / "tests" / "fixtures" / "entry_rewrites").glob("*.md")):
        sample = answer.name.split(".")[0]
        original = (REPO / "samples" / "entries" / f"{sample}.cu").read_text()
        got = extract_candidate(answer.read_text(), original, [], entry=ENTRIES[sample])
        if got.source is None:
            rows.append((answer.stem, "no code", got.message, "-", "-"))
            continue
        extraction = got.message or "taken as written"
        problem = signature_problem(got.source, original, ENTRIES[sample])
        unsafe = [str(f) for f in inspect_candidate(got.source, original, host=True) if f.kind == NEW_GLOBAL]
        if problem or unsafe:
            rows.append((answer.stem, extraction, problem or "; ".join(unsafe), "-", "-"))
            continue
        start = time.perf_counter()
        build = compile_library(got.source, str(answer.with_suffix(".cu")), options, original, False, fence)
        seconds = time.perf_counter() - start
        if build.fence:
            outcome = "fenced: " + "; ".join(f.describe() for f in build.fence)
        else:
            outcome = "built" if build.ok else "compile error: " + build.diagnostics[0].message
        rows.append((answer.stem, extraction, "kept", outcome, f"{seconds:.1f}"))
    head = ("answer", "extraction", "signature / static checks", "fence + nvcc", "s")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(c.replace("|", "/") for c in r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
