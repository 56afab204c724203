"""The device description's memory bound: the best of a copy and the stream kernels, so that an
honest kernel which reads two streams and writes one does not land above 100% of its bound."""

from __future__ import annotations

import json

import numpy as np

from kernel_lsp.runner import hardware
from kernel_lsp.runner.fake import FakeDevice
from kernel_lsp.runner.hardware import STREAM_KERNELS, DeviceInfo, load_cached, measure_device, save_cached
from kernel_lsp.runner.roofline import figures
from kernel_lsp.spec import In, Out, Spec


class TimedDevice:
    """Records the stream launches; each kernel "takes" the time its table says."""

    def __init__(self, seconds: dict[tuple[str, int], float], free: int = 64 << 30):
        self.seconds, self.free_bytes = seconds, free
        self.launches: list[tuple[str, tuple, tuple, list]] = []
        self.live: set[int] = set()
        self.filled: list[int] = []

    def free_memory(self) -> int:
        return self.free_bytes

    def alloc(self, nbytes: int) -> int:
        ptr = 0x1000 * (len(self.live) + len(self.launches) + 1)
        self.live.add(ptr)
        return ptr

    def free(self, ptr: int) -> None:
        self.live.remove(ptr)

    def fill(self, ptr: int, byte: int, nbytes: int) -> None:
        self.filled.append(ptr)

    def function(self, module, symbol: str) -> str:
        return symbol

    def launch(self, fn, grid, block, smem, args) -> None:
        self.launches.append((fn, grid, block, args))

    def time_rounds(self, runs, rounds: int, cold_l2: bool = True):
        runs[0]()
        fn, _, block, _ = self.launches[-1]
        return [[self.seconds[(fn, block[0])]] * rounds]


def test_stream_rates_count_every_stream_and_take_the_faster_block_size():
    nbytes = 1 << 30
    seconds = {(s, t): 1e-3 for s in STREAM_KERNELS for t in (256, 1024)}
    seconds[("klsp_stream_add", 1024)] = 0.5e-3
    dev = TimedDevice(seconds)
    rates = hardware.stream_bandwidths(dev, module=None, nbytes=nbytes)
    assert rates["klsp_stream_copy"] == 2 * nbytes / 1e-3
    assert rates["klsp_stream_read"] == nbytes / 1e-3
    assert rates["klsp_stream_add"] == 3 * nbytes / 0.5e-3
    assert not dev.live and len(dev.filled) == 3  # inputs zeroed, every buffer freed
    add = next(args for fn, _, _, args in dev.launches if fn == "klsp_stream_add")
    assert len(add) == 4 and add[-1].dtype == np.int64 and int(add[-1][0]) == nbytes // 16


def test_stream_buffers_shrink_to_the_free_memory():
    dev = TimedDevice({(s, t): 1e-3 for s in STREAM_KERNELS for t in (256, 1024)}, free=8 << 20)
    hardware.stream_bandwidths(dev, module=None, nbytes=1 << 30)
    n4 = int(dev.launches[0][3][-1][0])
    assert n4 * 16 <= 1 << 20  # three buffers and headroom within 8 MiB free


def test_fake_device_bound_is_its_copy():
    info = DeviceInfo.from_dict(measure_device(FakeDevice(), None))
    assert info.memory_bandwidth_Bps == info.copy_bandwidth_Bps > 0
    assert info.memory_bandwidth_source == "cuMemcpyDtoD" and info.bandwidth_Bps == info.copy_bandwidth_Bps


def test_a_cached_description_without_the_stream_bound_is_measured_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    info = DeviceInfo(name="NVIDIA H200", copy_bandwidth_Bps=4.2e12, memory_bandwidth_Bps=4.4e12)
    save_cached(info)
    assert load_cached(info.to_dict()).memory_bandwidth_Bps == 4.4e12
    (path,) = (tmp_path / "kernel-lsp").iterdir()
    old = json.loads(path.read_text())
    del old["memory_bandwidth_Bps"]  # written before the stream kernels existed
    path.write_text(json.dumps(old))
    assert load_cached(info.to_dict()) is None


def test_roofline_uses_the_stream_bound_over_the_copy():
    spec = Spec(
        kernel="vector_add",
        sizes=[{"n": 1 << 25}],
        args={"a": In("float32", shape="n"), "b": In("float32", shape="n"), "c": Out("float32", shape="n")},
        reference=lambda a, b: {"c": a + b},
    )
    nbytes = {k: 4 << 25 for k in "abc"}
    median = 3 * (4 << 25) / 4.35e12  # the tuned vector_add: 103% of a 4.24 TB/s copy
    copy_only = figures(spec, {"n": 1 << 25}, nbytes, median, True, {"copy_bandwidth_Bps": 4.24e12})
    assert copy_only["roofline"] > 1 and copy_only["suspicious"]
    dev = {"copy_bandwidth_Bps": 4.24e12, "memory_bandwidth_Bps": 4.40e12}
    both = figures(spec, {"n": 1 << 25}, nbytes, median, True, dev)
    assert 0.95 < both["roofline"] < 1 and both["suspicious"] is None and both["over_bound"] is None
