"""A file's text read as kernels, launches and host functions (pure functions of the text), where
its spec is, and kernel-lsp's own writes into a workspace. A front end reads a user's file only
through the regular-file reader, `kernel_lsp/files.py` (`read_text_file`, `read_regular`,
`read_source`, `read_text_prefix`): a FIFO, a device or a huge file is a FileProblem with its
reason, never a read that blocks."""

from ..files import MAX_FILE_BYTES, FileProblem, read_regular, read_source, read_text_file, read_text_prefix
from ..host_entry import find_host_function
from ..host_launch.occupancy import NO_BLOCK, describe_launches, occupancy_summary
from ..safe_write import create_in_workspace, inside, replace_file
from ..source import KernelSignature, find_kernel, find_kernels, kernel_base_name, parse_directives
from ..spec import spec_path_for

__all__ = [
    "MAX_FILE_BYTES",
    "NO_BLOCK",
    "FileProblem",
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
    "read_regular",
    "read_source",
    "read_text_file",
    "read_text_prefix",
    "replace_file",
    "spec_path_for",
]
