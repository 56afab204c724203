"""Which files a candidate may make the compiler read. Its includes are checked before any
compiler sees the text: a header the fence lets through is read by nvcc, and what nvcc reads can
come back in its messages (an include of /etc/passwd prints its first line as a syntax error).

Every include must be the plain form, `#include <name>` or `#include "name"`, after the
preprocessor's own rewriting (see text.py); the name must be normal (no `..` component, not
absolute, no backslash, only file-name characters) and either on the allowlist of CUDA and
standard headers (angle form) or already included by the original file; and where it can be
found under an allowed root (CUDA's include folders for CUDA's headers; the original's folder and
its include folders for the original's own), it must resolve inside that root (no link out).
Everything else that makes the preprocessor open a file is refused: `#include_next`, `#import`,
`#embed`, a macro-named include, `__has_include`, `__has_embed`."""

from __future__ import annotations

import functools
import glob
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .allowlists import CUDA_HEADER_DIRS, CUDA_HEADERS, allowed_header
from .findings import Finding
from .text import CleanText, Directive, clean, directives

_PLAIN = re.compile(r'^[ \t\f\v]*(?:<(?P<angled>[^<>]*)>|"(?P<quoted>[^"]*)")[ \t\f\v]*$')
_NAME = re.compile(r"^[\w.+-]+(?:/[\w.+-]+)*$")
_FILE_OPENERS = re.compile(r"\b(__has_include_next|__has_include|__has_embed)\b")
# Directives that read another file, besides a plain #include.
_OTHER_READERS = {
    "include_next": "#include_next (it searches the folders after the one that held the header)",
    "import": "#import (an include under another name)",
    "embed": "#embed (a file's bytes in the program)",
}


@dataclass(frozen=True)
class Include:
    name: str
    quoted: bool
    line: int


def plain_includes(dirs: Iterable[Directive]) -> tuple[list[Include], list[Finding]]:
    """The plain includes among `dirs`, and a finding for each include of another form."""
    found, bad = [], []
    for d in dirs:
        if d.name in _OTHER_READERS:
            bad.append(Finding("include", f"{_OTHER_READERS[d.name]} is not allowed", d.line))
        elif d.name == "include":
            m = _PLAIN.match(d.rest)
            if m is None:
                bad.append(
                    Finding(
                        "include",
                        'a computed #include (a macro, or anything but <name> or "name", names the header)',
                        d.line,
                    )
                )
            else:
                quoted = m.group("quoted") is not None
                found.append(Include(m.group("quoted") if quoted else m.group("angled"), quoted, d.line))
    return found, bad


def original_includes(original_source: str | None) -> set[str]:
    """The header names the user's own file includes (its plain includes)."""
    if not original_source:
        return set()
    includes, _ = plain_includes(directives(clean(original_source)))
    return {i.name for i in includes}


def name_problem(name: str) -> str | None:
    """Why an include name is not a plain relative file name (None: it is)."""
    if "\\" in name:
        return "a backslash in the name"
    if name.startswith("/"):
        return "an absolute path"
    if ".." in name.split("/"):
        return "a `..` component (it climbs out of the include folders)"
    if not _NAME.match(name):
        return "characters that are not a file name's"
    return None


@functools.cache
def cuda_include_roots() -> tuple[str, ...]:
    """CUDA's header folders: the pip wheels' (cuda.pathfinder) and the nvcc toolkit's own."""
    from ..compile.options import cuda_include_dirs
    from ..compile.toolchain import find_toolchain

    roots = list(cuda_include_dirs())
    nvcc = find_toolchain().nvcc
    if nvcc:
        top = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
        roots += [os.path.join(top, "include"), *glob.glob(os.path.join(top, "targets", "*", "include"))]
    return tuple(dict.fromkeys(r for r in roots if os.path.isdir(r)))


def _resolution(name: str, roots: Sequence[str]) -> bool | None:
    """True: `name` is a file under one of `roots` and stays inside it (links followed); False:
    it is there but leads outside; None: none of the roots holds it."""
    for root in roots:
        candidate = os.path.join(root, name)
        if not os.path.exists(candidate):
            continue
        real_root = os.path.realpath(root)
        real = os.path.realpath(candidate)
        return os.path.isfile(real) and os.path.commonpath([real, real_root]) == real_root
    return None


def _is_cuda_header(name: str) -> bool:
    return name in CUDA_HEADERS or name.startswith(CUDA_HEADER_DIRS)


def include_findings(
    ct: CleanText,
    original_source: str | None,
    original_path: str | None = None,
    include_dirs: Sequence[str] = (),
) -> list[Finding]:
    """Every include of the candidate that may not be read (see the module's doc)."""
    includes, out = plain_includes(directives(ct))
    for m in _FILE_OPENERS.finditer(ct.code):
        out.append(Finding("include", f"`{m.group(1)}` (it looks files up)", ct.line_at(m.start())))
    own = original_includes(original_source)
    own_roots = ([os.path.dirname(os.path.abspath(original_path))] if original_path else []) + list(
        include_dirs
    )
    for inc in includes:
        shown = f'"{inc.name}"' if inc.quoted else f"<{inc.name}>"
        problem = name_problem(inc.name)
        if problem:
            out.append(Finding("include", f"#include {shown}: {problem}", inc.line))
            continue
        if inc.name in own:
            if _resolution(inc.name, own_roots) is False:
                out.append(
                    Finding("include", f"#include {shown} leads outside the original's folders", inc.line)
                )
            continue
        if inc.quoted or not allowed_header(inc.name):
            out.append(
                Finding(
                    "include",
                    f"#include {shown} is outside the CUDA and C/C++ standard headers"
                    + (" and not included by the original file" if inc.quoted else ""),
                    inc.line,
                )
            )
            continue
        roots = cuda_include_roots()
        if _is_cuda_header(inc.name) and roots and not _resolution(inc.name, roots):
            out.append(
                Finding("include", f"#include {shown} is not a header in CUDA's include folders", inc.line)
            )
    return out
