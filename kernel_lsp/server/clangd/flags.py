"""The flags kernel-lsp compiles a file with (`CompileOptions`), spelled for clang in CUDA mode.

Checked with clangd 22 on the NVIDIA wheels (see DESIGN.md):
- clang needs `-x cuda` (for `.cuh` too), `--cuda-path=<site-packages>/nvidia/cu13` (it adds that
  root's `include/`, the cudart headers, itself) and `--cuda-gpu-arch=sm_XX`; the CCCL headers
  (`cub/`, `thrust/`, `cuda/std`) are a separate folder, passed with `-isystem`.
- clang rejects nvcc-only flags (`-forward-unknown-to-host-compiler`, `--generate-code=...`,
  `-Xcompiler=-fPIC`, `-extended-lambda`, `-compress-mode=size`): a project's database reaches us
  already reduced to include folders, defines, `-std` and archs (`compile_commands.py`), and the
  few code-generation flags left are translated or dropped here.
- clang reads `-isystem=/path` as a path under the sysroot: folders go as two arguments.
- libdevice must be under the CUDA root (`nvvm/libdevice`, from the nvcc wheel) or clang stops;
  `-nocudalib` would do without it, but then clang takes the pre-9.2 launch API and reports every
  `<<<...>>>` as a use of an undeclared `cudaConfigureCall` (no go to definition from a launch):
  it is passed only when libdevice is missing.
- clang 22 knows CUDA up to 12.9 and warns about 13.x on every file: silenced.
- clang 22 takes `sm_90a`, `sm_100a`, `sm_120`, but not the family archs of CUDA 12.9+ (`sm_100f`:
  "unsupported CUDA gpu architecture", and then nothing CUDA parses): those go as their base arch.
"""

from __future__ import annotations

import os

from ...api.checks import CompileOptions, Workspace

# What argv[0] says in the database: clangd never runs it (no --query-driver is passed).
COMPILER_NAME = "clang++"


def cuda_root() -> tuple[str | None, str | None]:
    """(the CUDA root clang takes as --cuda-path, the CCCL include folder) from NVIDIA's wheels."""
    cudart, cccl = None, None
    for d in Workspace.cuda_include_dirs():
        if d.rstrip(os.sep).endswith(os.path.join("include", "cccl")):
            cccl = d
        elif cudart is None:
            cudart = d
    return (os.path.dirname(cudart.rstrip(os.sep)) if cudart else None), cccl


def clang_arch(arch: str) -> str:
    return arch[:-1] if arch.startswith("sm_") and arch.endswith("f") else arch


def _codegen(flag: str) -> list[str]:
    """nvcc code-generation flags that change what clang parses; the rest change only the code."""
    if flag.startswith("--pre-include="):
        return ["-include", flag.removeprefix("--pre-include=")]
    if flag == "--relocatable-device-code=true":
        return ["-fgpu-rdc"]
    return []


def clang_arguments(options: CompileOptions, source: str) -> list[str]:
    """The whole command line (compiler first, the source last) for a database entry."""
    root, cccl = cuda_root()
    args = [COMPILER_NAME, "-x", "cuda"]
    if root:
        args.append(f"--cuda-path={root}")
    args += [f"--cuda-gpu-arch={clang_arch(options.arch)}", "-Wno-unknown-cuda-version"]
    if not root or not os.path.isdir(os.path.join(root, "nvvm", "libdevice")):
        args.append("-nocudalib")
    args.append(f"-std={options.std}")
    for d in options.include_dirs:
        args += ["-I", d]
    for d in options.system_include_dirs:
        args += ["-isystem", d]
    if cccl:
        args += ["-isystem", cccl]
    args += [f"-D{d}" for d in options.defines]
    args += [f"-U{u}" for u in options.undefines]
    for flag in options.extra:
        args += _codegen(flag)
    args.append(source)
    return args
