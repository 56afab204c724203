"""This process's device memory on one GPU, as NVML counts it (nvidia-smi's per-process column).

The leak check of a host entry (runner/entry.py) compares memory in use before and after the
timed calls. The driver's free-memory figure (cuMemGetInfo) is the whole GPU's: another process
on the same GPU (a training job, a second worker) that allocates meanwhile looked like a leak of
the launcher's. NVML lists each process's own allocations. It comes with the driver
(libnvidia-ml.so.1) and needs no package; where it is missing, or lists no memory for this process
(MIG, a PID namespace that hides the host's PIDs), the caller falls back to the whole GPU's figure.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

NOT_AVAILABLE = (1 << 64) - 1  # NVML_VALUE_NOT_AVAILABLE for usedGpuMemory
MAX_PROCESSES = 256


class ProcessInfo(ctypes.Structure):
    """nvmlProcessInfo_t (v2, as nvmlDeviceGetComputeRunningProcesses_v3 fills it)."""

    _fields_ = [
        ("pid", ctypes.c_uint),
        ("used_gpu_memory", ctypes.c_ulonglong),
        ("gpu_instance_id", ctypes.c_uint),
        ("compute_instance_id", ctypes.c_uint),
    ]


class ProcessMemory:
    """`used()`: bytes of device memory this process holds on the GPU at `pci_bus_id`, or None
    when NVML does not say. Raises OSError where NVML is unusable here."""

    def __init__(self, pci_bus_id: str, lib: Any = None, pid: int | None = None):
        if lib is None:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
        self._lib = lib
        if lib.nvmlInit_v2() != 0:
            raise OSError("nvmlInit failed")
        self._handle = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id.encode(), ctypes.byref(self._handle)) != 0:
            raise OSError(f"NVML does not know the GPU at {pci_bus_id}")
        self._pid = os.getpid() if pid is None else pid
        if self.used() is None:
            raise OSError("NVML lists no memory for this process")

    def used(self) -> int | None:
        count = ctypes.c_uint(MAX_PROCESSES)
        infos = (ProcessInfo * MAX_PROCESSES)()
        if self._lib.nvmlDeviceGetComputeRunningProcesses_v3(self._handle, ctypes.byref(count), infos) != 0:
            return None
        for info in infos[: count.value]:
            if info.pid == self._pid and info.used_gpu_memory != NOT_AVAILABLE:
                return int(info.used_gpu_memory)
        return None


def pci_bus_id(domain: int, bus: int, device: int) -> str:
    """NVML's "domain:bus:device.function" for CUDA's PCI attributes."""
    return f"{domain:08x}:{bus:02x}:{device:02x}.0"
