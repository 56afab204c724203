"""The nvcc the tests compile real-world samples with, and the flags kernel-lsp derives for them
written as nvcc options (a test's independent spelling, not the nvcc backend's)."""

from __future__ import annotations

import shutil
import site
import sysconfig
from pathlib import Path

from kernel_lsp.compile import CompileOptions


def find_nvcc() -> str | None:
    """The nvidia-cuda-nvcc wheel's nvcc, else one on PATH."""
    folders = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    for folder in sorted(folders):
        candidate = Path(folder) / "nvidia" / "cu13" / "bin" / "nvcc"
        if candidate.is_file():
            return str(candidate)
    return shutil.which("nvcc")


def nvcc_command(nvcc: str, path: str, options: CompileOptions, output: str) -> list[str]:
    cmd = [nvcc, "-cubin", f"-arch={options.arch}", f"-std={options.std}", "-o", output]
    cmd += [f"-I{d}" for d in options.include_dirs]
    for d in options.system_include_dirs:
        cmd += ["-isystem", d]
    cmd += [f"-D{d}" for d in options.defines] + [f"-U{u}" for u in options.undefines]
    if options.relaxed_constexpr:
        cmd.append("--expt-relaxed-constexpr")
    if options.extended_lambda:
        cmd.append("--extended-lambda")
    return [*cmd, *options.extra, path]
