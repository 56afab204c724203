"""A PyTorch extension whose compile_commands.json entry holds torch's include folders (the build's
own `-isystem`, of another environment's torch) is checked with them, without torch installed
beside kernel-lsp and without asking torch (issue 45)."""

from __future__ import annotations

import importlib.util
import json
import textwrap

import pytest

from kernel_lsp.check import check_path
from kernel_lsp.compile import find_toolchain
from kernel_lsp.config import Settings
from kernel_lsp.model import Severity

TOOLCHAIN = find_toolchain()
needs_nvcc = pytest.mark.skipif(TOOLCHAIN.problem is not None, reason=f"nvcc backend: {TOOLCHAIN.problem}")

# A stand-in for torch's headers in another environment: what the file below uses of them.
EXTENSION_H = "#pragma once\nnamespace torch {\nstruct Tensor { float* data; long n; };\n}\n"
EXTENSION = textwrap.dedent(
    """\
    #include <torch/extension.h>
    #ifndef TORCH_API_INCLUDE_EXTENSION_H
    #error not built as torch builds extensions
    #endif
    #define KL_STR_(x) #x
    #define KL_STR(x) KL_STR_(x)
    static_assert(KL_STR(TORCH_EXTENSION_NAME)[0] == 'm', "the database's module name");
    __global__ void scale(float* x, long n) { long i = threadIdx.x; if (i < n) x[i] *= 2.0f; }
    void launch(torch::Tensor t) { scale<<<1, 128>>>(t.data, t.n); }
    void broken(torch::Tensor t) { t.missing_member = 1; }
    """
)


@needs_nvcc
def test_an_extension_is_checked_from_the_databases_torch_folders_without_torch(tmp_path, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real_find_spec(name, *a)
    )

    def no_torch_lookup():
        raise AssertionError("torch must not be asked: the database names its folders")

    monkeypatch.setattr("kernel_lsp.check.torch_flags", no_torch_lookup)
    headers = tmp_path / "other-env" / "include"
    (headers / "torch").mkdir(parents=True)
    (headers / "torch" / "extension.h").write_text(EXTENSION_H)
    source = tmp_path / "ext.cu"
    source.write_text(EXTENSION)
    command = f"nvcc -isystem {headers} -DTORCH_EXTENSION_NAME=myext -c ext.cu -o ext.o"
    (tmp_path / "compile_commands.json").write_text(
        json.dumps([{"directory": str(tmp_path), "file": "ext.cu", "command": command}])
    )

    check = check_path(str(source), Settings(arch=("sm_90",)))
    assert check.checked
    errors = [d for d in check.diagnostics if d.severity == Severity.ERROR]
    assert [(d.line, "missing_member" in d.message) for d in errors] == [(10, True)], check.diagnostics
    assert not any(d.code == "torch" for d in check.diagnostics)

    source.write_text(EXTENSION.replace("t.missing_member = 1;", "(void)t;"))
    clean = check_path(str(source), Settings(arch=("sm_90",)))
    assert clean.checked and not [d for d in clean.diagnostics if d.severity == Severity.ERROR], clean.diagnostics
    assert [k.name for k in clean.kernels] == ["scale"]
