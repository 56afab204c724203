"""A flag source for PyTorch extensions (`#include <torch/extension.h>`, `<ATen/...>`, `<c10/...>`):
the folders and defines `torch.utils.cpp_extension` builds them with.

Where the file's compile_commands.json entry already holds torch's headers (the build's own
`-I`/`-isystem` of another environment's torch: a CMake or setuptools build database), those are
the folders, and torch need not be installed beside kernel-lsp (`found_in`). Otherwise torch is
asked in a child process of the interpreter that runs kernel-lsp, once per process: importing it
takes seconds and hundreds of MB, which neither the server's event loop nor every compile worker
should pay. When torch is not importable, `torch_flags()` says what to install. Never raises.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
from dataclasses import dataclass

from ..child_python import python_code
from ..source import IncludeLine, find_includes

TORCH_HEADER_PREFIXES = ("torch/", "ATen/", "c10/")
LOOKUP_TIMEOUT_S = 120.0

_ASK_TORCH = "import json, torch.utils.cpp_extension as e; print(json.dumps(e.include_paths()))"  # CPU and CUDA builds alike


@dataclass(frozen=True)
class TorchFlags:
    system_include_dirs: tuple[str, ...] = ()
    problem: str | None = None  # torch cannot be used, and what to do about it


def torch_include(source: str) -> IncludeLine | None:
    """The first `#include` of a PyTorch header, or None for files that are not extensions."""
    return next((inc for inc in find_includes(source) if inc.target.startswith(TORCH_HEADER_PREFIXES)), None)


def found_in(include: IncludeLine, dirs: tuple[str, ...]) -> bool:
    """Whether the torch header `include` names is in one of `dirs` (a database's folders)."""
    return any(os.path.isfile(os.path.join(d, include.target)) for d in dirs)


def extension_defines(path: str) -> tuple[str, ...]:
    """The macros torch's build passes that the headers and PYBIND11_MODULE need to parse:
    TORCH_EXTENSION_NAME is the module's name (here the file's stem, as `load(name=...)` would)."""
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0]) or "extension"
    if stem[0].isdigit():
        stem = "_" + stem
    return (f"TORCH_EXTENSION_NAME={stem}", "TORCH_API_INCLUDE_EXTENSION_H")


@functools.cache
def torch_flags() -> TorchFlags:
    """torch's include folders plus the Python headers, asked once per process."""
    install = (
        f"install PyTorch into the interpreter that runs kernel-lsp ({sys.executable} -m pip install torch)"
    )
    if importlib.util.find_spec("torch") is None:
        return TorchFlags(
            problem=f"not checked: this is a PyTorch extension and torch is not importable; {install}"
        )
    try:
        done = subprocess.run(
            python_code(_ASK_TORCH),
            capture_output=True,
            text=True,
            timeout=LOOKUP_TIMEOUT_S,
            check=False,
        )
        dirs = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        return TorchFlags(
            problem=f"not checked: asking torch for its include folders failed ({e}); {install}"
        )
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return TorchFlags(
            problem=f"not checked: torch is installed but cannot be imported ({last}); {install}"
        )
    python_headers = sysconfig.get_paths().get("include")
    if python_headers:
        dirs.append(python_headers)
    return TorchFlags(system_include_dirs=tuple(dirs))
