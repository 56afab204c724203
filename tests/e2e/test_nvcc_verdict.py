"""nvcc's verdict in the editor, through the real server: an error only NVRTC gives (JIT mode, a
header only nvcc can open) is never published, not even as a first look; where NVRTC shows a real
error first (its own first look, or the check's preview while nvcc runs), nvcc's verdict replaces
it, in nvcc's words."""

from __future__ import annotations

import json

import pytest
from conftest import BASE_OPTIONS, change_and_save, diagnostics, open_file, start
from pytest_lsp import LanguageClient

from kernel_lsp.compile import find_toolchain

TOOLCHAIN = find_toolchain()
pytestmark = pytest.mark.skipif(TOOLCHAIN.problem is not None, reason=f"nvcc backend: {TOOLCHAIN.problem}")


class Publications(dict):
    """The client's `diagnostics`, keeping every publication for each uri, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.history: dict[str, list[list]] = {}

    def __setitem__(self, uri, found) -> None:
        self.history.setdefault(uri, []).append(list(found))
        super().__setitem__(uri, found)


# NVRTC (JIT mode): "A function without execution space annotations ... is considered a host
# function, and host functions are not allowed in JIT mode" at line 2; nvcc's device pass: clean.
# kernel-lsp sees the plain function and sends the file to nvcc at once (verdict.py).
JIT_ONLY = """\
#include <cuda_fp16.h>
inline int round_up(int n, int m) { return (n + m - 1) / m * m; }
__global__ void scale(__half* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __hmul(x[i], __float2half(2.0f));
}
"""

# The same plain function, written by a macro: kernel-lsp does not expand macros, so NVRTC runs
# first and gives its JIT-mode error at line 3, which nvcc's clean verdict must replace unseen.
JIT_ONLY_IN_A_MACRO = """\
#include <cuda_fp16.h>
#define HOST_HELPER(name) inline int name(int n, int m) { return (n + m - 1) / m * m; }
HOST_HELPER(round_up)
__global__ void scale(__half* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __hmul(x[i], __float2half(2.0f));
}
"""

# <cstdint>: NVRTC cannot open it ("cannot open source file" at line 1); nvcc: clean.
STANDARD_HEADER = """\
#include <cstdint>
__global__ void fill(int64_t* out, int64_t v) { out[threadIdx.x] = v; }
"""

# A real error at line 3 that both compilers see, in a file its database builds with nvcc.
REAL_ERROR = """\
__global__ void add(float* x, int n) {
  int i = threadIdx.x;
  if (i < n) x[i] += missing;
}
"""


async def test_an_error_only_nvrtc_gives_is_never_published(client: LanguageClient, tmp_path):
    client.diagnostics = Publications()
    await start(client, tmp_path)
    files = (
        ("jit_only.cu", JIT_ONLY),
        ("jit_only_in_a_macro.cu", JIT_ONLY_IN_A_MACRO),
        ("standard_header.cu", STANDARD_HEADER),
    )
    for name, text in files:
        path = tmp_path / name
        path.write_text(text)
        u = open_file(client, path)
        assert await diagnostics(client, u, timeout=90) == []
        history = client.diagnostics.history[u]
        assert all(published == [] for published in history), (name, history)


async def test_nvccs_verdict_replaces_nvrtcs_first_look(client: LanguageClient, tmp_path):
    client.diagnostics = Publications()
    path = tmp_path / "src" / "add.cu"
    path.parent.mkdir()
    path.write_text(REAL_ERROR)
    entry = {"directory": str(tmp_path), "file": str(path), "command": f"nvcc --ptx -arch=sm_90 {path}"}
    (tmp_path / "compile_commands.json").write_text(json.dumps([entry]))
    await start(client, tmp_path, options=BASE_OPTIONS)
    u = open_file(client, path)
    final = await diagnostics(client, u, lambda ds: bool(ds) and ds[0].source == "kernel-lsp (nvcc)", 90)
    (d,) = final
    assert d.range.start.line == 2 and d.message == 'identifier "missing" is undefined'
    # Whatever came before it (NVRTC's first look) was the same error at the same place.
    for published in client.diagnostics.history[u]:
        assert [(p.range.start.line, p.message) for p in published] in ([], [(2, d.message)])


async def test_a_new_error_shows_nvrtcs_words_at_once_then_nvccs(client: LanguageClient, tmp_path):
    """A file NVRTC answered (clean) gets an error: the check publishes NVRTC's finding as soon as
    NVRTC has it, then nvcc's verdict on the same text replaces it."""
    client.diagnostics = Publications()
    await start(client, tmp_path)
    path = tmp_path / "add.cu"
    clean = REAL_ERROR.replace(" += missing", " += 1.0f")
    path.write_text(clean)
    u = open_file(client, path)
    assert await diagnostics(client, u, timeout=90) == []
    change_and_save(client, path, REAL_ERROR, version=2)
    final = await diagnostics(client, u, lambda ds: bool(ds) and ds[0].source == "kernel-lsp (nvcc)", 90)
    assert [(d.range.start.line, d.message) for d in final] == [(2, 'identifier "missing" is undefined')]
    after_edit = [p for p in client.diagnostics.history[u] if p][-2:]
    assert [[d.source for d in p] for p in after_edit] == [["kernel-lsp (nvrtc)"], ["kernel-lsp (nvcc)"]]
    assert after_edit[0][0].range.start.line == 2
