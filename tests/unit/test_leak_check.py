"""The leak check of host entries counts this process's device memory (NVML), not the whole GPU's:
another process allocating on the same GPU during the timed calls is not the launcher's leak."""

from __future__ import annotations

import ctypes

import pytest

from kernel_lsp.runner.entry import DEVICE_LEAK_BYTES, check_leaks
from kernel_lsp.runner.nvml import NOT_AVAILABLE, ProcessInfo, ProcessMemory, pci_bus_id
from kernel_lsp.runner.verify import Failed


class FakeNvml:
    """libnvidia-ml's three calls, over a table {pid: bytes}."""

    def __init__(self, table: dict[int, int], bus: str = "00000000:05:00.0"):
        self.table = table
        self.bus = bus

    def nvmlInit_v2(self) -> int:
        return 0

    def nvmlDeviceGetHandleByPciBusId_v2(self, bus: bytes, handle) -> int:
        return 0 if bus.decode() == self.bus else 2

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle, count, infos) -> int:
        rows = list(self.table.items())
        if len(rows) > count._obj.value:
            return 7  # NVML_ERROR_INSUFFICIENT_SIZE
        for i, (pid, used) in enumerate(rows):
            infos[i].pid, infos[i].used_gpu_memory = pid, used
        count._obj.value = len(rows)
        return 0


def test_the_bus_id_is_in_nvmls_format():
    assert pci_bus_id(0, 0x1B, 0) == "00000000:1b:00.0"


def test_this_process_figure_ignores_the_others():
    nvml = FakeNvml({100: 5 << 30, 200: 700 << 20})
    memory = ProcessMemory("00000000:05:00.0", lib=nvml, pid=200)
    assert memory.used() == 700 << 20
    nvml.table[100] += 1 << 30  # another process allocates a GiB
    assert memory.used() == 700 << 20
    nvml.table[200] += 64 << 20
    assert memory.used() == 764 << 20


@pytest.mark.parametrize(
    "table, bus",
    [
        ({100: 1 << 30}, "00000000:05:00.0"),  # this process is not listed (a PID namespace)
        ({200: NOT_AVAILABLE}, "00000000:05:00.0"),  # listed without a figure (MIG, Windows WDDM)
        ({200: 1 << 30}, "00000000:06:00.0"),  # another GPU
    ],
)
def test_nvml_without_a_figure_for_this_process_is_refused(table, bus):
    with pytest.raises(OSError):
        ProcessMemory("00000000:05:00.0", lib=FakeNvml(table, bus), pid=200)


def test_process_info_has_nvmls_layout():
    # pid, 4 bytes of padding, usedGpuMemory, gpuInstanceId, computeInstanceId: nvml.h's v2 struct.
    assert ctypes.sizeof(ProcessInfo) == 24 and ProcessInfo.used_gpu_memory.offset == 8


def test_a_leak_fails_the_case_and_says_where_it_was_measured():
    before = (1 << 30, 100 << 20, True)
    with pytest.raises(Failed) as own:
        check_leaks(before, (before[0] + 2 * DEVICE_LEAK_BYTES, before[1], True), 245, "n=1")
    assert "MiB of device memory were not given back over 245 timed calls" in own.value.problem.message
    assert "whole GPU" not in own.value.problem.message
    with pytest.raises(Failed) as whole:
        check_leaks((*before[:2], False), (before[0] + 2 * DEVICE_LEAK_BYTES, before[1], False), 245, "n=1")
    assert "measured on the whole GPU" in whole.value.problem.message


def test_memory_given_back_or_within_the_slack_passes():
    before = (1 << 30, 100 << 20, True)
    check_leaks(before, (before[0] + DEVICE_LEAK_BYTES, before[1] + (1 << 20), True), 10, "n=1")
    check_leaks(before, (before[0] - (1 << 30), before[1], True), 10, "n=1")
