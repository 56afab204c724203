"""benchmarks/check_gpu.py: a run cut at its timeout ends at the timeout (the child's output is
read in threads, never waited on) and still gives its table row, marked `timed out`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    spec = importlib.util.spec_from_file_location("check_gpu_bench", ROOT / "benchmarks" / "check_gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_run_past_its_timeout_ends_then_and_prints_its_row():
    bench = load_bench()
    echoed: list[str] = []
    r = bench.run_check("samples/", ["0"], [], 2.0, echoed.append, fake=True)
    assert r["timed_out"]
    assert r["wall"] < 2.0 + 10.0  # killed at the timeout, not when the child's output ended
    row = bench.row(1, 1, r)
    assert "timed out |" in row and row.startswith("| 1 | 1 | ")
    # Whatever lines came before the kill were echoed with their seconds, and counted.
    assert len(echoed) >= len(r["files"])
    assert all(line.split("s ", 1)[0].strip().replace(".", "").isdigit() for line in echoed)


def test_the_phases_of_a_kernel_line_are_summed():
    bench = load_bench()
    line = (
        "kernel-lsp: [4/39] samples/scan/scan_fp32.cu: GPU 0: scan ok (4.59 s: inputs+reference 0.85, "
        "verify 1.91, timed runs 0.17, of which waiting for the GPU 0.29)"
    )
    m = bench.FILE_LINE.match(line)
    assert m is not None and m.group(4) == "GPU 0"
    assert bench.KERNEL.findall(m.group(5)) == [("scan", "ok", "4.59")]
    ((total, listed),) = bench.PHASES.findall(m.group(5))
    parts = {pm.group(1): float(pm.group(2)) for pm in map(bench.PHASE.match, listed.split(", ")) if pm}
    assert total == "4.59"
    assert parts == {
        "inputs+reference": 0.85,
        "verify": 1.91,
        "timed runs": 0.17,
        "of which waiting for the GPU": 0.29,
    }
