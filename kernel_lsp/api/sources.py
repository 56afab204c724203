"""A file's text read as kernels, launches and host functions (pure functions of the text), where
its spec is, and kernel-lsp's own writes into a workspace."""

from ..host_entry import find_host_function
from ..host_launch.occupancy import NO_BLOCK, describe_launches, occupancy_summary
from ..safe_write import create_in_workspace, inside, replace_file
from ..source import KernelSignature, find_kernel, find_kernels, kernel_base_name, parse_directives
from ..spec import spec_path_for

__all__ = [
    "NO_BLOCK",
    "KernelSignature",
    "create_in_workspace",
    "describe_launches",
    "find_host_function",
    "find_kernel",
    "find_kernels",
    "inside",
    "kernel_base_name",
    "occupancy_summary",
    "parse_directives",
    "replace_file",
    "spec_path_for",
]
