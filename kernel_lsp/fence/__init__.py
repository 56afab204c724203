"""The fence around host code an LLM wrote (issue 21, part 4).

A candidate's launcher runs on the CPU, so before it runs:
- its text is checked (`check_source`), read as the preprocessor reads it (text.py): includes
  outside the CUDA and C/C++ standard headers (a quoted header is allowed only where the
  original file includes it too), any other way to make the compiler open a file, host `asm`
  and system calls in any `asm`, attributes that run code at load time, pragmas, token pasting,
  macros over reserved names, dangerous calls, library functions' addresses and the loader's
  tables (values.py);
- its own host object (`nvcc -c`, before linking with cudart) is checked (`check_object`): every
  imported symbol on an allowlist (fence/allowlists.py), no constructor but nvcc's registration,
  no imported function's address taken, no raw system-call instruction in any executable
  section; and the compiler's own warnings (`check_diagnostics`): no arithmetic on a function's
  address;
and then it runs only in a GPU worker started with `sandboxed=True` (fence/sandbox.py): no
network, no writes outside the worker's temporary folder, a memory limit. Where no sandbox
mechanism works, the worker refuses the code (fail closed). The user's own file is trusted as
the user's code, as before: none of this applies to it.

The optimizer's entry point is `check_candidate_host_code`.
"""

from __future__ import annotations

from .compiler_checks import check_diagnostics
from .findings import Finding
from .object_checks import check_object
from .source_checks import check_files_read, check_source


def check_candidate_host_code(
    source: str, original_source: str | None, object_path: str | None
) -> list[Finding]:
    """Every reason the candidate's host code may not run (empty: it may, in a sandboxed worker).
    `object_path`: the candidate's own object from `nvcc -c` (None: only the text is checked)."""
    findings = check_source(source, original_source)
    if object_path is not None:
        findings += check_object(object_path)
    return findings


__all__ = [
    "Finding",
    "check_candidate_host_code",
    "check_diagnostics",
    "check_files_read",
    "check_object",
    "check_source",
]
