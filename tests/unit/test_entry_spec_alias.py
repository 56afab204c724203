"""An Alias in an entry spec is checked as the buffer it names, as a kernel spec's is: mypy found
that check_entry_spec handed the Alias itself on, and an Alias has no dtype, so the dtype check
skipped it without a word (the second test fails that way)."""

from __future__ import annotations

from pathlib import Path

from kernel_lsp.host_entry import entry_abi, find_host_function
from kernel_lsp.spec import check_entry_spec, load_specs

LAUNCHER = r"""
extern "C" void axpy(float* y, const float* x, int n) {}
"""


def _entry_spec(tmp_path: Path, x: str):
    path = tmp_path / "x.spec.py"
    path.write_text(
        "from kernel_lsp.spec import Spec, In, InOut, Scalar, Alias\n"
        'SPEC = Spec(entry="axpy", sizes=[{"n": 100}],\n'
        f'    args={{"y": InOut("float32"), "x": {x}, "n": Scalar("int32")}},\n'
        '    reference=lambda y, x: {"y": y + x})\n'
    )
    loaded = load_specs(str(path))
    fn = find_host_function(LAUNCHER, "axpy")
    return check_entry_spec(loaded.specs[0], fn, entry_abi(fn))


def test_an_alias_of_a_fitting_buffer_has_no_findings(tmp_path):
    assert _entry_spec(tmp_path, 'Alias("y")') == []


def test_an_alias_of_a_buffer_of_another_dtype_is_reported_at_the_alias(tmp_path):
    path = tmp_path / "y.spec.py"
    path.write_text(
        "from kernel_lsp.spec import Spec, In, InOut, Scalar, Alias\n"
        'SPEC = Spec(entry="axpy", sizes=[{"n": 100}],\n'
        '    args={"y": InOut("float32"), "z": In("float64"),\n'
        '          "x": Alias("z"), "n": Scalar("int32")},\n'
        '    reference=lambda y, x: {"y": y + x})\n'
    )
    loaded = load_specs(str(path))
    fn = find_host_function(LAUNCHER, "axpy")
    found = check_entry_spec(loaded.specs[0], fn, entry_abi(fn))
    assert any("`x`" in d.message and "float64" in d.message for d in found), found
    assert all(d.line == 4 for d in found if "`x`" in d.message), found
