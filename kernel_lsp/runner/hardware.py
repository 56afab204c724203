"""The device description: what the GPU is (attributes), what it does (measured memory bandwidth
and FP32 FMA rate) and what it should do (tensor-core peaks derived from the arch, SMs and clock).

The memory bound is the best of several streaming measurements, not the device-to-device copy
alone: a kernel that reads two streams and writes one (vector_add) or only reads (a reduction)
moves bytes faster than cuMemcpy does (the tuned vector_add by 3% on an H200, a read-only pass by
7-10%), and an honest kernel must never land above 100% of its bound (a figure over 100% marks a
candidate as cheating).

Measured once per device (name, PCI bus, driver) and cached under ~/.cache/kernel-lsp. This module
imports no CUDA: the worker passes its device object in; the client only reads the result.
"""

from __future__ import annotations

import functools
import json
import os
import re
import time
from typing import TYPE_CHECKING, Any

from kernel_lsp.gpu_results import DeviceInfo  # re-exported: defined with the other plain results

if TYPE_CHECKING:
    from .device_protocol import Device

# Dense FLOP per clock per SM, from NVIDIA's architecture whitepapers (tensor cores for the 16-bit,
# tf32 and 8-bit types; CUDA cores for fp32/fp64).
_FLOP_PER_CLOCK_PER_SM: dict[str, dict[str, int]] = {
    "sm_80": {"float64": 64, "float32": 128, "tf32": 1024, "float16": 2048, "bfloat16": 2048, "int8": 4096},
    "sm_86": {"float64": 4, "float32": 256, "tf32": 512, "float16": 1024, "bfloat16": 1024, "int8": 2048},
    "sm_89": {
        "float64": 4,
        "float32": 256,
        "tf32": 512,
        "float16": 1024,
        "bfloat16": 1024,
        "float8": 2048,
        "int8": 2048,
    },
    "sm_90": {
        "float64": 128,
        "float32": 256,
        "tf32": 2048,
        "float16": 4096,
        "bfloat16": 4096,
        "float8": 8192,
        "int8": 8192,
    },
    "sm_100": {
        "float64": 128,
        "float32": 256,
        "tf32": 4096,
        "float16": 8192,
        "bfloat16": 8192,
        "float8": 16384,
        "int8": 16384,
    },
}

# The device's measuring kernels, one CUBIN. klsp_fma_peak does nothing but independent FMAs (8
# chains per thread hide the FMA latency); the klsp_stream_* kernels move one float4 per thread per
# stream, the pattern that reached the highest rate in the tuned samples.
PROBE_SOURCE = r"""
extern "C" __global__ void klsp_fma_peak(float* out, int iters, float b, float c) {
  float x0 = threadIdx.x, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3;
  float x4 = x0 + 4, x5 = x0 + 5, x6 = x0 + 6, x7 = x0 + 7;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      x0 = fmaf(x0, b, c); x1 = fmaf(x1, b, c); x2 = fmaf(x2, b, c); x3 = fmaf(x3, b, c);
      x4 = fmaf(x4, b, c); x5 = fmaf(x5, b, c); x6 = fmaf(x6, b, c); x7 = fmaf(x7, b, c);
    }
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}
extern "C" __global__ void klsp_stream_copy(const float4* __restrict__ a, float4* __restrict__ c, long long n4) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n4) c[i] = a[i];
}
extern "C" __global__ void klsp_stream_add(const float4* __restrict__ a, const float4* __restrict__ b,
                                           float4* __restrict__ c, long long n4) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 x = a[i], y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}
extern "C" __global__ void klsp_stream_read(const float4* __restrict__ a, float* __restrict__ c, long long n4) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  float4 x = i < n4 ? a[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  float s = x.x + x.y + x.z + x.w;
  if (s == -1.f) c[i & 1023] = s;  // never true on the zeroed buffer, unknowable to the compiler
}
"""
FMA_PEAK_SYMBOL = "klsp_fma_peak"
FMA_FLOP_PER_ITER = 2 * 8 * 16
# symbol -> (streams read, streams written): the bytes counted per element moved.
STREAM_KERNELS = {"klsp_stream_copy": (1, 1), "klsp_stream_add": (2, 1), "klsp_stream_read": (1, 0)}


def derived_peaks(arch: str, sm_count: int, sm_clock_mhz: int) -> dict[str, float]:
    table = _FLOP_PER_CLOCK_PER_SM.get(arch)
    if table is None:
        major = re.sub(r"\D", "", arch)[:-1] or "9"
        table = _FLOP_PER_CLOCK_PER_SM.get(f"sm_{major}0", _FLOP_PER_CLOCK_PER_SM["sm_90"])
    return {k: float(v) * sm_count * sm_clock_mhz * 1e6 for k, v in table.items()}


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kernel-lsp")


def cache_path(attrs: dict[str, Any]) -> str:
    key = f"{attrs.get('name', '?')}-bus{attrs.get('pci_bus_id', 0)}-drv{attrs.get('driver_version', 0)}"
    return os.path.join(cache_dir(), "device-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", key) + ".json")


def load_cached(attrs: dict[str, Any]) -> DeviceInfo | None:
    try:
        with open(cache_path(attrs), encoding="utf-8") as f:
            info = DeviceInfo.from_dict(json.load(f))
    except (OSError, ValueError, TypeError):
        return None
    # A description from before the stream kernels is measured again: its copy-only bound let
    # honest kernels cross 100%.
    return info if info.copy_bandwidth_Bps > 0 and info.memory_bandwidth_Bps > 0 else None


def save_cached(info: DeviceInfo) -> None:
    path = cache_path(info.to_dict())
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(info.to_dict(), f, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home only costs a re-measurement next time


def stream_bandwidths(device: Device, module: Any, nbytes: int = 1 << 30, repeats: int = 10) -> dict[str, float]:
    """Bytes read plus written per second of each klsp_stream_* kernel, best of `repeats`, over
    buffers of `nbytes` each (far larger than any L2), at two block sizes."""
    import numpy as np

    nbytes = min(nbytes, device.free_memory() // 8) // 16 * 16
    n4 = nbytes // 16
    bufs = [device.alloc(nbytes) for _ in range(3)]
    rates: dict[str, float] = {}
    try:
        for buf in bufs:
            device.fill(buf, 0, nbytes)
        for symbol, (reads, writes) in STREAM_KERNELS.items():
            fn = device.function(module, symbol)
            ptrs = bufs[: reads + 1]  # inputs, then the output (the read kernel's dummy one)
            args = [np.array([p], np.uint64) for p in ptrs] + [np.array([n4], np.int64)]
            for threads in (256, 1024):
                grid = ((n4 + threads - 1) // threads, 1, 1)
                run = functools.partial(device.launch, fn, grid, (threads, 1, 1), 0, args)
                device.time_rounds([run], 3, cold_l2=False)
                best = min(device.time_rounds([run], repeats, cold_l2=False)[0])
                rates[symbol] = max(rates.get(symbol, 0.0), (reads + writes) * nbytes / best)
    finally:
        for buf in bufs:
            device.free(buf)
    return rates


def measure_device(device: Device, probe_cubin: bytes | None) -> dict[str, Any]:
    """Run in the worker: attributes, copy bandwidth and (given PROBE_SOURCE's CUBIN) the stream
    kernels' bandwidth and the measured FP32 rate. Returns DeviceInfo fields."""
    import numpy as np

    attrs = device.info()
    info = DeviceInfo.from_dict(attrs)
    info.fake = bool(getattr(device, "fake", False))
    info.copy_bandwidth_Bps = float(device.copy_bandwidth())
    info.memory_bandwidth_Bps, info.memory_bandwidth_source = info.copy_bandwidth_Bps, "cuMemcpyDtoD"
    info.peak_flops = derived_peaks(info.arch, info.sm_count, info.sm_clock_mhz)
    info.peak_source = dict.fromkeys(info.peak_flops, "derived")
    if probe_cubin and not info.fake:
        module = device.load(probe_cubin)
        for symbol, rate in stream_bandwidths(device, module).items():
            if rate > info.memory_bandwidth_Bps:
                info.memory_bandwidth_Bps, info.memory_bandwidth_source = rate, symbol
        fn = device.function(module, FMA_PEAK_SYMBOL)
        blocks, threads, iters = info.sm_count * 8, 256, 4096
        out = device.alloc(blocks * threads * 4)
        try:
            args: list[np.ndarray] = [
                np.array([out], np.uint64),
                np.array([iters], np.int32),
                np.array([0.999999], np.float32),
                np.array([1e-7], np.float32),
            ]

            def run() -> None:
                device.launch(fn, (blocks, 1, 1), (threads, 1, 1), 0, args)

            device.time_rounds([run], 3, cold_l2=False)
            best = min(device.time_rounds([run], 10, cold_l2=False)[0])
            info.peak_flops["float32"] = blocks * threads * iters * FMA_FLOP_PER_ITER / best
            info.peak_source["float32"] = "measured"
        finally:
            device.free(out)
            device.unload(module)
    info.measured_at = time.time()
    return info.to_dict()
