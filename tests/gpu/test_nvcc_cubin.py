"""On a GPU: the nvcc backend's CUBIN of host+device files loads, and each kernel, found by the
name kernel-lsp shows (`vectorAdd`, `total<float>`, `total<Pair>`), runs and computes the right
thing. No pygls: the runner's driver wrapper only.

    python -m pytest -q tests/gpu/test_nvcc_cubin.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kernel_lsp.compile import CompileOptions, compile_source, find_toolchain

pytestmark = pytest.mark.gpu

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_projects"


@pytest.fixture(scope="module")
def device():
    from kernel_lsp.runner.device import CudaDevice

    if find_toolchain().problem:
        pytest.skip(f"nvcc backend: {find_toolchain().problem}")
    return CudaDevice(0)


def compiled(name: str, device):
    arch = device.info()["arch"]
    path = REAL / name
    result = compile_source(path.read_text(), str(path), CompileOptions(arch=arch))
    assert result.compiler == "nvcc" and result.ok and result.cubin, result.diagnostics
    module = device.load(result.cubin)
    symbols = {k.name: k.mangled for k in result.kernels}
    return module, symbols


def arg(value) -> np.ndarray:
    return np.array([value])


def test_vector_add_from_a_cuda_samples_file(device):
    module, symbols = compiled("cuda_samples/vectorAdd.cu", device)
    fn = device.function(module, symbols["vectorAdd"])
    n = 1000
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 0.5, dtype=np.float32)
    pa, pb, pc = (device.alloc(n * 4) for _ in range(3))
    device.upload(pa, a)
    device.upload(pb, b)
    device.launch(
        fn,
        ((n + 255) // 256, 1, 1),
        (256, 1, 1),
        0,
        [arg(np.uint64(pa)), arg(np.uint64(pb)), arg(np.uint64(pc)), arg(np.int32(n))],
    )
    device.sync()
    c = device.download(pc, n * 4).view(np.float32)
    for p in (pa, pb, pc):
        device.free(p)
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize("instance,size", [("total<float>", 4), ("total<Pair>", 8)])
def test_template_instances_run_under_their_names(device, instance, size):
    module, symbols = compiled("llmc/layernorm.cu", device)
    fn = device.function(module, symbols[instance])
    n = 64
    out = device.alloc(4)
    x = device.alloc(n * 8)
    device.fill(out, 0, 4)
    device.launch(fn, (1, 1, 1), (n, 1, 1), 0, [arg(np.uint64(x)), arg(np.uint64(out)), arg(np.int32(n))])
    device.sync()
    got = device.download(out, 4).view(np.float32)[0]
    device.free(out)
    device.free(x)
    # Each thread adds sizeof(T): the instance that ran is the one named.
    assert got == n * size
