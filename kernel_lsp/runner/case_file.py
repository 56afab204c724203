"""One case of a spec as plain data: each argument's concrete shape, type and value, and the input
arrays. A process that may run the user's spec writes it (`write_case`); a process that runs host
code an LLM wrote reads it (`read_case`) and so never loads the spec, which is the user's Python
and may read the user's files: the proof gate's and ncu's launch (runner/one_launch.py) enter a
sandbox whose reads stop at their folder and the libraries they need.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from kernel_lsp.spec.dtypes import DTYPES
from kernel_lsp.spec.expressions import eval_shape
from kernel_lsp.spec.model import Alias, Arg, In, InOut, Out, Scalar, Scratch, Spec

CASE_JSON = "case.json"
CASE_INPUTS = "case.npz"
_BUFFERS: dict[str, type[In] | type[Out] | type[InOut] | type[Scratch]] = {
    "in": In,
    "out": Out,
    "inout": InOut,
    "scratch": Scratch,
}


def _arg_data(spec: Spec, name: str, arg: Arg, sizes: Mapping[str, int]) -> dict[str, Any]:
    if isinstance(arg, Scalar):
        return {"kind": "scalar", "dtype": arg.dtype, "value": spec.scalar_value(name, sizes).item()}
    if isinstance(arg, Alias):
        return {"kind": "alias", "target": arg.target}
    data: dict[str, Any] = {"kind": arg.kind, "dtype": arg.dtype, "shape": list(eval_shape(arg.shape, sizes))}
    if isinstance(arg, Scratch):
        data["zero"] = arg.zero
    return data


def write_case(folder: str, spec: Spec, sizes: Mapping[str, int], inputs: Mapping[str, np.ndarray]) -> None:
    """`folder`/case.json and case.npz: the case's arguments and its inputs (as bytes: bf16 and
    the other ml_dtypes types have no portable .npy description)."""
    case = {
        "kernel": spec.kernel,
        "entry": spec.entry,
        "sizes": {k: int(v) for k, v in sizes.items()},
        "args": {name: _arg_data(spec, name, arg, sizes) for name, arg in spec.args.items()},
    }
    with open(os.path.join(folder, CASE_JSON), "w", encoding="utf-8") as f:
        json.dump(case, f)
    raw: dict[str, Any] = {
        name: np.ascontiguousarray(a).reshape(-1).view(np.uint8) for name, a in inputs.items()
    }
    with open(os.path.join(folder, CASE_INPUTS), "wb") as f:
        np.savez(f, **raw)


def _arg(data: Mapping[str, Any]) -> Arg:
    kind = str(data["kind"])
    if kind == "scalar":
        return Scalar(str(data["dtype"]), value=data["value"], line=1)
    if kind == "alias":
        return Alias(str(data["target"]), line=1)
    shape = tuple(int(d) for d in data["shape"])
    if kind == "scratch":
        return Scratch(str(data["dtype"]), shape, line=1, zero=bool(data.get("zero")))
    return _BUFFERS[kind](str(data["dtype"]), shape, line=1)


def read_case(folder: str) -> tuple[Spec, dict[str, int], dict[str, np.ndarray]]:
    """The case `write_case` left in `folder`: a spec with no code in it (no reference, no
    distribution: concrete shapes and values only), its sizes and its inputs."""
    with open(os.path.join(folder, CASE_JSON), encoding="utf-8") as f:
        case = json.load(f)
    args = {name: _arg(data) for name, data in case["args"].items()}
    sizes = {k: int(v) for k, v in case["sizes"].items()}
    spec = Spec(kernel=case["kernel"], entry=case.get("entry"), sizes=[sizes], args=args, line=1)
    inputs: dict[str, np.ndarray] = {}
    with np.load(os.path.join(folder, CASE_INPUTS), allow_pickle=False) as stored:
        for name in stored.files:
            arg = args[name]
            assert isinstance(arg, (In, InOut))
            inputs[name] = stored[name].view(DTYPES[arg.dtype]).reshape(eval_shape(arg.shape, sizes))
    return spec, sizes, inputs
