"""Every CudaDevice holds one small allocation, so a launcher's per-call cudaMalloc/cudaFree of a
small scratch buffer is a sub-allocation in a chunk that stays mapped, as in any program that has
allocated before, and not a fresh page mapped and unmapped on each call (on an H200 that doubled
l2_normalize's original in the judge's accused: 195 against 98 us a call)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

PROBE = """
import ctypes, json
from kernel_lsp.runner.device import CudaDevice
from kernel_lsp.runner.entry import load_runtime

device = CudaDevice(0)
lib = load_runtime().lib
places = []
for _ in range(3):  # a launcher's scratch, allocated and freed on each call
    p = ctypes.c_void_p()
    assert lib.cudaMalloc(ctypes.byref(p), 4096) == 0
    places.append(p.value)
    assert lib.cudaFree(p) == 0
print(json.dumps({"held": int(device._allocator_warm), "scratch": places}))
"""


def test_a_launchers_small_scratch_lands_in_the_chunk_the_device_holds():
    # A fresh process: nothing else of the test run's allocations may keep a chunk alive.
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    page = 1 << 21
    for ptr in got["scratch"]:
        assert ptr // page == got["held"] // page, got  # the held chunk's page, not a fresh one
        assert ptr % page != 0, got
