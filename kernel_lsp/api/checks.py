"""Checking files: the requests (CheckRequest, what triggered each), the scheduler a front end
hands them to (CheckScheduler: its workers, deadlines, first looks and cancel tokens), the results,
and the settings and options they ran with."""

from ..compile.options import CompileOptions
from ..config import Settings, SettingsOverrides, gpus_value, parse_overrides
from ..files import CUDA_SUFFIXES, SPEC_SUFFIX, spec_owners
from ..model import FileCheck, Includer
from ..procs import release_memory
from ..report import archs_checked, prepare_report
from ..scheduler import CheckScheduler, check_files
from ..tempdirs import make as make_temp_folder
from ..workspace import CheckRequest, Trigger, Workspace

__all__ = [
    "CUDA_SUFFIXES",
    "SPEC_SUFFIX",
    "CheckRequest",
    "CheckScheduler",
    "CompileOptions",
    "FileCheck",
    "Includer",
    "Settings",
    "SettingsOverrides",
    "Trigger",
    "Workspace",
    "archs_checked",
    "check_files",
    "gpus_value",
    "make_temp_folder",
    "parse_overrides",
    "prepare_report",
    "release_memory",
    "spec_owners",
]
