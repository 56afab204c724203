"""A spec is the user's Python: on the GPU and optimizer paths it is loaded in a worker process,
never in the server's (or the CLI's) own; what comes back is a summary whose functions run only
in the worker. A spec that hangs or crashes costs a diagnostic, not the caller."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from fixture_sources import VADD

from kernel_lsp.config import Settings
from kernel_lsp.spec.isolated import RunsInWorker, load_specs_isolated
from kernel_lsp.workspace import Workspace

SPEC = textwrap.dedent(
    """\
    import os
    from kernel_lsp.spec import In, Out, Scalar, Spec
    with open({marker!r}, "a") as f:
        f.write(f"{{os.getpid()}}\\n")
    {extra}
    SPEC = Spec(
        kernel="vadd",
        sizes=[{{"n": 1}}, {{"n": 1000}}],
        timing_sizes=[{{"n": 4096}}],
        args={{"a": In("float32", dist=lambda rng, shape: rng.random(shape)), "b": In("float32"),
              "c": Out("float32"), "n": Scalar("int32")}},
        reference=lambda a, b: {{"c": a + b}},
    )
    """
)


def write_spec(tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    marker = tmp_path / "pids.txt"
    spec = tmp_path / "vadd.spec.py"
    spec.write_text(SPEC.format(marker=str(marker), extra=extra))
    (tmp_path / "vadd.cu").write_text(VADD)
    return spec, marker


def test_the_spec_runs_in_another_process_and_its_functions_stay_there(tmp_path):
    spec_path, marker = write_spec(tmp_path)
    loaded = load_specs_isolated(str(spec_path))
    assert loaded.ok, loaded.diagnostics
    pids = {int(p) for p in marker.read_text().split()}
    assert os.getpid() not in pids and len(pids) == 1
    [spec] = loaded.specs
    assert spec.kernel == "vadd" and spec.size_names == ["n"] and spec.path == str(spec_path)
    assert isinstance(spec.reference, RunsInWorker) and spec.reference is not None
    assert isinstance(spec.args["a"].dist, RunsInWorker)
    with pytest.raises(RuntimeError, match="runs in the GPU worker"):
        spec.reference(a=1, b=2)


def test_a_spec_that_crashes_or_hangs_its_process_is_a_diagnostic_and_the_next_load_works(tmp_path):
    crash, _ = write_spec(tmp_path, "os._exit(3)")
    loaded = load_specs_isolated(str(crash))
    assert not loaded.ok and "crashed" in loaded.diagnostics[0].message, loaded.diagnostics
    hang = tmp_path / "hang" / "vadd.spec.py"
    hang.parent.mkdir()
    write_spec(hang.parent, "import time; time.sleep(60)")
    loaded = load_specs_isolated(str(hang), timeout_s=2)
    assert not loaded.ok and "took over 2 s" in loaded.diagnostics[0].message
    good = tmp_path / "good" / "vadd.spec.py"
    good.parent.mkdir()
    write_spec(good.parent)
    assert load_specs_isolated(str(good)).ok


def test_gpu_verification_never_runs_the_spec_in_the_calling_process(tmp_path, monkeypatch, fake_gpu):
    """The whole GPU path (fake GPU): the spec runs in the spec worker and the GPU worker only."""
    _, marker = write_spec(tmp_path)
    engine = Workspace.fixed(Settings(arch=("sm_90",)))
    sessions, reason = engine.open_gpus("1", log=lambda line: None)
    assert sessions, reason
    try:
        engine.verify(sessions[0], str(tmp_path / "vadd.cu"))
    finally:
        for s in sessions:
            s.close()
    pids = {int(p) for p in marker.read_text().split()}
    assert pids and os.getpid() not in pids
