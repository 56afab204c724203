"""A case written by the process that runs the spec reads back, in the process that must not
run it (runner/case_file.py), as the same buffers, scalars and inputs: bf16 included."""

from __future__ import annotations

import numpy as np

from kernel_lsp.runner.case_file import CASE_JSON, read_case, write_case
from kernel_lsp.spec import make_inputs
from kernel_lsp.spec.model import Alias, In, InOut, Out, Scalar, Scratch, Spec


def test_a_case_reads_back_as_data(tmp_path):
    spec = Spec(
        kernel="k",
        sizes=[{"m": 3, "n": 5}],
        args={
            "x": In("bfloat16", ("m", "n")),
            "y": InOut("float32", "n"),
            "out": Out("float16", "m * n"),
            "work": Scratch("int32", "n", zero=True),
            "alpha": Scalar("float32", "n / 2"),
            "n": Scalar("int32"),
            "out2": Alias("out"),
        },
        reference=lambda x, y: {"out": x, "y": y},
    )
    sizes = {"m": 3, "n": 5}
    inputs = make_inputs(spec, sizes, 7, 0)
    write_case(str(tmp_path), spec, sizes, inputs)
    assert "lambda" not in (tmp_path / CASE_JSON).read_text()  # data only: no code goes across
    case, got_sizes, got_inputs = read_case(str(tmp_path))
    assert got_sizes == sizes and case.kernel == "k" and case.reference is None
    assert sorted(got_inputs) == ["x", "y"]
    for name, array in inputs.items():
        assert got_inputs[name].dtype == array.dtype and got_inputs[name].shape == array.shape
        assert np.array_equal(got_inputs[name].view(np.uint8), array.view(np.uint8))
    assert {k: (a.kind, a.dtype) for k, a in case.buffers().items()} == {
        "x": ("in", "bfloat16"),
        "y": ("inout", "float32"),
        "out": ("out", "float16"),
        "work": ("scratch", "int32"),
    }
    assert case.buffer("out").shape == (15,) and case.buffer("work").zero
    assert case.scalar_value("alpha", sizes) == spec.scalar_value("alpha", sizes) == np.float32(2.5)
    assert case.scalar_value("n", sizes) == 5 and case.buffer_name("out2") == "out"
    assert sorted(case.outputs()) == sorted(spec.outputs())
