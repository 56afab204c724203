"""What a front end holds of the GPUs the Workspace opened (`OpenGpu`), what it asks of them
(`GpuPlan`), what they return (checks, profiles, a file's verdicts) and why no GPU verifies."""

from ..gpu_reports import GPU_OFF_IN_EDITOR, HotLine, ProfileReport, no_gpu_message
from ..gpu_request import FileDone, GpuPlan, OpenGpu
from ..gpu_results import KernelCheck
from ..model import RayUnavailable, TimingSettings
from ..profile_text import memory_text, profile_lines, sol_text, stall_text

__all__ = [
    "GPU_OFF_IN_EDITOR",
    "FileDone",
    "GpuPlan",
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
]
