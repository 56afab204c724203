"""GPU sessions (opened through the Workspace), what they are asked (GpuCheckRequest) and what they
return: checks, profiles, why no GPU."""

from ..evaluation.choose import RayUnavailable
from ..evaluation.pool import BackendPool
from ..gpu import (
    GPU_OFF_IN_EDITOR,
    GpuCheckRequest,
    GpuSession,
    KernelCheck,
    no_gpu_message,
)
from ..gpu_check import verify_checks
from ..gpu_reports import HotLine, ProfileReport
from ..gpu_request import FileDone, GpuPlan, OpenGpu
from ..model import TimingSettings
from ..profile_text import memory_text, profile_lines, sol_text, stall_text

__all__ = [
    "GPU_OFF_IN_EDITOR",
    "BackendPool",
    "FileDone",
    "GpuCheckRequest",
    "GpuPlan",
    "GpuSession",
    "HotLine",
    "KernelCheck",
    "OpenGpu",
    "ProfileReport",
    "RayUnavailable",
    "TimingSettings",
    "memory_text",
    "no_gpu_message",
    "profile_lines",
    "sol_text",
    "stall_text",
    "verify_checks",
]
