"""Checking files: the results, the settings and options they ran with, and the worker pool the
front ends schedule the Workspace's checks on (the server on its event loop, the CLI in a batch)."""

from ..check import (
    CUDA_SUFFIXES,
    INCLUDERS_CONSIDERED,
    SPEC_SUFFIX,
    FileCheck,
    Includer,
    archs_checked,
    collect_files,
    failed_check,
    includers_for,
    job_deadline,
    prepare_report,
    project_include_dirs,
    rank_includers,
    spec_owners,
    unknown_codes,
)
from ..check_jobs import check_job, default_workers, front_end_job, lean_analyze, warm_up
from ..compile import (
    MAX_FILE_BYTES,
    ask_nvrtc_in_child,
    check_arch,
    local_gpu_arch,
    read_source,
)
from ..compile.cancel import cancel
from ..compile.compile_commands import Lookup
from ..compile.files import read_text_file, read_text_prefix
from ..compile.jobs import JobFailed, WorkerPool, run_jobs
from ..compile.options import CompileOptions, cuda_include_dirs
from ..compile.versions import CudaVersions, cuda_versions
from ..config import Settings, SettingsOverrides, parse_overrides
from ..procs import release_memory
from ..tempdirs import make as make_temp_folder
from ..workspace import CheckRequest, Workspace

__all__ = [
    "CUDA_SUFFIXES",
    "INCLUDERS_CONSIDERED",
    "MAX_FILE_BYTES",
    "SPEC_SUFFIX",
    "CheckRequest",
    "CompileOptions",
    "CudaVersions",
    "FileCheck",
    "Includer",
    "JobFailed",
    "Lookup",
    "Settings",
    "SettingsOverrides",
    "WorkerPool",
    "Workspace",
    "archs_checked",
    "ask_nvrtc_in_child",
    "cancel",
    "check_arch",
    "check_job",
    "collect_files",
    "cuda_include_dirs",
    "cuda_versions",
    "default_workers",
    "failed_check",
    "front_end_job",
    "includers_for",
    "job_deadline",
    "lean_analyze",
    "local_gpu_arch",
    "make_temp_folder",
    "parse_overrides",
    "prepare_report",
    "project_include_dirs",
    "rank_includers",
    "read_source",
    "read_text_file",
    "read_text_prefix",
    "release_memory",
    "run_jobs",
    "spec_owners",
    "unknown_codes",
    "warm_up",
]
