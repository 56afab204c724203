"""On a GPU: what the runner copies or fills is in place when its next launch runs. The launches go
on a non-blocking stream; copies and fills once went on the legacy default stream, which is not
ordered with it, so with other processes loading the GPU a correct reduction read half-copied
inputs and a correct stencil's outputs were poisoned after it wrote them. Each case here fills or
copies a large buffer and launches at once a kernel that counts the bytes that are not yet right.
No pygls: the runner's driver wrapper only.

    python -m pytest -q tests/gpu/test_device_ordering.py
"""

from __future__ import annotations

import numpy as np
import pytest

from kernel_lsp.compile import CompileOptions, compile_source

pytestmark = pytest.mark.gpu

COUNT_WRONG = r"""
extern "C" __global__ void count_wrong(const unsigned char* p, unsigned long long n, unsigned char want,
                                       unsigned long long* wrong) {
    unsigned long long local = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        local += p[i] != want;
    if (local) atomicAdd(wrong, local);
}
"""
NBYTES = 1 << 30  # a fill of 1 GiB takes about a millisecond: long enough for a launch to overtake it
ROUNDS = 4


@pytest.fixture(scope="module")
def device():
    from kernel_lsp.runner.device import CudaDevice

    dev = CudaDevice(0)
    result = compile_source(COUNT_WRONG, "count_wrong.cu", CompileOptions(arch=dev.info()["arch"]))
    assert result.ok and result.cubin, result.diagnostics
    fn = dev.function(dev.load(result.cubin), "count_wrong")
    buf, wrong = dev.alloc(NBYTES), dev.alloc(8)
    yield dev, fn, buf, wrong
    dev.free(buf)
    dev.free(wrong)


def count_wrong(dev, fn, buf: int, wrong: int, want: int, nbytes: int) -> None:
    """Queue the count right after whatever was queued last."""
    params = [np.uint64(buf), np.uint64(nbytes), np.uint8(want), np.uint64(wrong)]
    dev.launch(fn, (4 * dev.info()["sm_count"], 1, 1), (256, 1, 1), 0, [np.array([p]) for p in params])


def wrong_bytes(dev, fn, buf: int, wrong: int, want: int, nbytes: int) -> int:
    count_wrong(dev, fn, buf, wrong, want, nbytes)
    dev.sync()
    return int(dev.download(wrong, 8).view(np.uint64)[0])


def test_a_fill_is_in_place_for_the_next_launch(device):
    dev, fn, buf, wrong = device
    for k in range(ROUNDS):
        byte = 0x11 * (k + 1)
        dev.fill(wrong, 0, 8)
        dev.fill(buf, byte, NBYTES)
        assert wrong_bytes(dev, fn, buf, wrong, byte, NBYTES) == 0, f"round {k}: the launch overtook the fill"


def test_an_upload_is_in_place_for_the_next_launch(device):
    dev, fn, buf, wrong = device
    nbytes = NBYTES // 4  # from pageable host memory, as the spec's inputs are
    for k in range(ROUNDS):
        byte = 0x21 * (k + 1)
        dev.fill(wrong, 0, 8)
        dev.upload(buf, np.full(nbytes, byte, np.uint8))
        assert wrong_bytes(dev, fn, buf, wrong, byte, nbytes) == 0, f"round {k}: the launch overtook the copy"


def test_a_download_waits_for_the_launch(device):
    dev, fn, buf, wrong = device
    dev.fill(buf, 0x5A, NBYTES)
    dev.fill(wrong, 0, 8)
    # Count bytes that are not 0x00 (all of them): the download must see the finished count.
    count_wrong(dev, fn, buf, wrong, 0, NBYTES)
    assert int(dev.download(wrong, 8).view(np.uint64)[0]) == NBYTES
