"""Command lines for the Python child processes kernel-lsp starts (the GPU worker, the profiler's
launcher, the question to torch), such that the current folder is not searched for modules.

`python -m x` puts the current folder first on `sys.path`, `python -c` puts "" there: started
from a workspace (a CLI run in the repository, an editor that starts the server there), a
`numpy.py` or `torch/` of the workspace would be imported instead of the real one, and run.
Python 3.11 has `-P` for this; on 3.10 the child drops that entry itself before importing."""

from __future__ import annotations

import os
import sys

_SAFE_PATH_FLAG = sys.version_info >= (3, 11)


def protect_children() -> None:
    """Every Python child of this process, those `multiprocessing` starts too (the compile
    workers: `python -c ...` in the current folder), leaves the current folder off sys.path:
    `kernel-lsp --check` run in a repository with its own `multiprocessing.py` or `pickle.py`
    would run it otherwise. PYTHONSAFEPATH is Python 3.11's; 3.10 ignores it."""
    os.environ.setdefault("PYTHONSAFEPATH", "1")


def python_module(module: str) -> list[str]:
    """`python -m module` without the current folder on sys.path (arguments follow)."""
    if _SAFE_PATH_FLAG:
        return [sys.executable, "-P", "-m", module]
    run = f"import runpy, sys; del sys.path[0]; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    return [sys.executable, "-c", run]


def python_code(code: str) -> list[str]:
    """`python -c code` without the current folder on sys.path."""
    if _SAFE_PATH_FLAG:
        return [sys.executable, "-P", "-c", code]
    return [sys.executable, "-c", "import sys; del sys.path[0]\n" + code]
