"""What only the compiler can tell about a candidate's host code, read from its own warnings
after the compile (the library it built is dropped before anything loads it)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

from .findings import Finding

# cudafe++'s "arithmetic on pointer to void or function type": `f + 1`, `&f + 1`, or a `void*`
# that holds a function's address moved by arithmetic, through any number of variables.
FUNCTION_ARITHMETIC = "1143"
_CODE = re.compile(r"^(\d+)(-D)?$")


def check_diagnostics(diagnostics: Iterable[Any], path: str) -> list[Finding]:
    """Findings in the compile's own diagnostics of the candidate at `path`."""
    out, lines = [], set()
    own = os.path.abspath(path)
    for d in diagnostics:
        m = _CODE.match(d.code or "")
        if m and m.group(1) == FUNCTION_ARITHMETIC and os.path.abspath(d.path) == own and d.line not in lines:
            lines.add(d.line)  # the front end runs for the host and for the device: said twice
            out.append(
                Finding(
                    "address",
                    "arithmetic on the address of a function (or on a `void*`): a jump into the middle of "
                    "code; do pointer arithmetic on typed data pointers",
                    d.line,
                )
            )
    return out
