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
`#embed`, a macro-named include, `__has_include`, `__has_embed`.

A library's own header may include a file a macro names (`#include THRUST_MR_STD_MR_HEADER`:
the header's user may configure it): a candidate's `#define` of such a macro is an include by
another road, so its value is checked as an include is (`configured_include_findings`)."""

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


def _include_problem(inc: Include, own: set[str], own_roots: Sequence[str]) -> str | None:
    """Why the compiler may not open `inc` (after `#include <name>`), or None."""
    shown = f'"{inc.name}"' if inc.quoted else f"<{inc.name}>"
    problem = name_problem(inc.name)
    if problem:
        return f"{shown}: {problem}"
    if inc.name in own:
        if _resolution(inc.name, own_roots) is False:
            return f"{shown} leads outside the original's folders"
        return None
    if inc.quoted or not allowed_header(inc.name):
        return f"{shown} is outside the CUDA and C/C++ standard headers" + (
            " and not included by the original file" if inc.quoted else ""
        )
    roots = cuda_include_roots()
    if _is_cuda_header(inc.name) and roots and not _resolution(inc.name, roots):
        return f"{shown} is not a header in CUDA's include folders"
    return None


_MACRO_INCLUDE = re.compile(rb"^[ \t]*#[ \t]*include[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
_DEFINED = re.compile(r"^\s*([A-Za-z_]\w*)(\(?)(.*)$", re.DOTALL)


@functools.cache
def configurable_include_macros() -> frozenset[str]:
    """The macros CUDA's headers include by name (`#include THRUST_MR_STD_MR_HEADER`): found by
    reading the headers (about a second, once a process), so that a newer CUDA's are found too."""
    names: set[str] = set()
    for root in cuda_include_roots():
        for folder, _dirs, files in os.walk(root):
            for name in files:
                try:
                    with open(os.path.join(folder, name), "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                names.update(m.group(1).decode() for m in _MACRO_INCLUDE.finditer(data))
    return frozenset(names)


def configured_include_findings(
    dirs: Iterable[Directive], own: set[str], own_roots: Sequence[str]
) -> list[Finding]:
    """A candidate's `#define` of a macro a library header includes by name: its value must be a
    plain include the candidate could write itself."""
    out = []
    for d in dirs:
        m = _DEFINED.match(d.rest) if d.name == "define" else None
        if m is None or m.group(1) not in configurable_include_macros():
            continue
        head = f"#define {m.group(1)}: a library header includes the file it names, and"
        plain = None if m.group(2) else _PLAIN.match(m.group(3))
        if plain is None:
            out.append(Finding("include", f'{head} it is not <name> or "name"', d.line))
            continue
        quoted = plain.group("quoted") is not None
        inc = Include(plain.group("quoted") if quoted else plain.group("angled"), quoted, d.line)
        problem = _include_problem(inc, own, own_roots)
        if problem:
            out.append(Finding("include", f"{head} {problem}", d.line))
    return out


def include_findings(
    ct: CleanText,
    original_source: str | None,
    original_path: str | None = None,
    include_dirs: Sequence[str] = (),
) -> list[Finding]:
    """Every include of the candidate that may not be read (see the module's doc)."""
    dirs = directives(ct)
    includes, out = plain_includes(dirs)
    for m in _FILE_OPENERS.finditer(ct.code):
        out.append(Finding("include", f"`{m.group(1)}` (it looks files up)", ct.line_at(m.start())))
    own = original_includes(original_source)
    own_roots = ([os.path.dirname(os.path.abspath(original_path))] if original_path else []) + list(
        include_dirs
    )
    for inc in includes:
        problem = _include_problem(inc, own, own_roots)
        if problem:
            out.append(Finding("include", f"#include {problem}", inc.line))
    return [*out, *configured_include_findings(dirs, own, own_roots)]
