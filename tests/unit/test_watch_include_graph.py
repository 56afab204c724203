"""The include graph: direct and transitive includers, cycles, edits, deletions, headers that
appear later, and the plan a batch of changes turns into."""

from __future__ import annotations

from pathlib import Path

from kernel_lsp.include_graph import IncludeGraph
from kernel_lsp.watch import Batch, plan_batch


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_transitive_dependents_through_quoted_and_include_dir_headers(tmp_path):
    inc = tmp_path / "include"
    leaf = write(inc / "leaf.cuh", "__device__ int leaf();\n")
    mid = write(tmp_path / "mid.cuh", "#include <leaf.cuh>\n#include <cuda_fp16.h>\n")
    a = write(tmp_path / "a.cu", '#include "mid.cuh"\n')
    b = write(tmp_path / "sub" / "b.cu", '#include "../mid.cuh"\n')
    c = write(tmp_path / "c.cu", '// #include "mid.cuh" is a comment\n')
    g = IncludeGraph(include_dirs=(str(inc),))
    for f in (a, b, c):
        g.update(f)
    assert g.includes(a) == {mid}
    assert g.includes(mid) == {leaf}  # reached from a.cu and scanned without being asked
    assert g.dependents(leaf) == {mid, a, b}
    assert g.dependents(mid) == {a, b}
    assert g.dependents(c) == set()


def test_cycles_terminate(tmp_path):
    x = write(tmp_path / "x.cuh", '#include "y.cuh"\n')
    y = write(tmp_path / "y.cuh", '#include "x.cuh"\n')
    m = write(tmp_path / "m.cu", '#include "x.cuh"\n')
    g = IncludeGraph()
    g.update(m)
    assert g.dependents(x) == {y, m}
    assert g.dependents(y) == {x, m}


def test_edges_follow_edits(tmp_path):
    h1 = write(tmp_path / "h1.cuh", "")
    h2 = write(tmp_path / "h2.cuh", "")
    a = write(tmp_path / "a.cu", '#include "h1.cuh"\n')
    g = IncludeGraph()
    g.update(a)
    assert g.dependents(h1) == {a}
    # Editor text (not on disk) decides when given.
    assert g.update(a, '#include "h2.cuh"\n') is True
    assert g.dependents(h1) == set()
    assert g.dependents(h2) == {a}
    assert g.update(a, '#include "h2.cuh"\n') is False


def test_removed_header_keeps_includers_until_they_are_rescanned(tmp_path):
    h = write(tmp_path / "h.cuh", "")
    a = write(tmp_path / "a.cu", '#include "h.cuh"\n')
    g = IncludeGraph()
    g.update(a)
    Path(h).unlink()
    g.remove(h)
    assert g.dependents(h) == {a}  # a.cu must be re-checked to report the missing header
    g.update(a)
    assert g.dependents(h) == set()
    assert g.waiting_for(h) == {a}  # and it waits for the header to come back


def test_header_created_later_wakes_the_files_waiting_for_it(tmp_path):
    a = write(tmp_path / "a.cu", '#include "later.cuh"\n#include <cuda_runtime.h>\n')
    g = IncludeGraph()
    g.update(a)
    later = tmp_path / "later.cuh"
    assert g.waiting_for(str(later)) == {a}
    assert g.waiting_for(str(tmp_path / "other" / "later.cuh")) == set()  # same name, wrong folder


def test_plan_for_a_changed_header_checks_it_and_its_includers(tmp_path):
    leaf = write(tmp_path / "leaf.cuh", "")
    mid = write(tmp_path / "mid.cuh", '#include "leaf.cuh"\n')
    a = write(tmp_path / "a.cu", '#include "mid.cuh"\n')
    lone = write(tmp_path / "lone.cu", "")
    g = IncludeGraph()
    for f in (a, lone):
        g.update(f)
    plan = plan_batch(Batch(changed=frozenset({leaf})), g)
    assert plan.changed == {leaf}
    assert plan.dependents == {mid, a}
    assert plan.check == {leaf, mid, a}
    assert plan.forget == set()


def test_plan_for_deletions_forgets_and_rechecks_includers(tmp_path):
    h = write(tmp_path / "h.cuh", "")
    a = write(tmp_path / "a.cu", '#include "h.cuh"\n')
    gone = write(tmp_path / "sub" / "gone.cu", "")
    g = IncludeGraph()
    for f in (a, gone):
        g.update(f)
    Path(h).unlink()
    plan = plan_batch(Batch(deleted=frozenset({h})), g)
    assert plan.forget == {h}
    assert plan.check == {a}
    # A folder moved away: its files are known only to the graph (or the caller).
    plan = plan_batch(Batch(deleted_dirs=frozenset({str(tmp_path / "sub")})), g)
    assert plan.forget == {gone}


def test_plan_for_a_new_header_rechecks_the_file_waiting_for_it(tmp_path):
    a = write(tmp_path / "a.cu", '#include "gen.cuh"\n')
    g = IncludeGraph()
    g.update(a)
    gen = write(tmp_path / "gen.cuh", "")
    plan = plan_batch(Batch(changed=frozenset({gen})), g)
    assert plan.check == {gen, a}
    assert g.dependents(gen) == {a}  # and the graph now knows the edge


def test_plan_for_a_spec_rechecks_its_kernel_file(tmp_path):
    cu = write(tmp_path / "vadd.cu", "")
    spec = write(tmp_path / "vadd.spec.py", "")
    plan = plan_batch(Batch(changed=frozenset({spec})), IncludeGraph())
    assert plan.check == {cu}
    plan = plan_batch(Batch(deleted=frozenset({spec})), IncludeGraph())
    assert plan.check == {cu} and plan.forget == set()


def test_plan_for_a_changed_database_rechecks_every_checked_file(tmp_path):
    a = write(tmp_path / "a.cu", '#include "h.cuh"\n')
    h = write(tmp_path / "h.cuh", "")
    spec = write(tmp_path / "a.spec.py", "")
    g = IncludeGraph()
    g.update(a)
    plan = plan_batch(Batch(database_changed=True), g, [a, h, spec])
    assert plan.check == {a, h} and plan.changed == set()
    assert plan_batch(Batch(database_changed=True), g, []).check == set()
