"""Arguments for nvcc that its shell cannot read as commands.

nvcc runs its steps (the host preprocessor, cudafe++, cicc, ptxas, the host compiler) through
`sh -c`, each value in double quotes: it escapes `$` in paths but not a backtick or a backslash,
and puts -D/-U values in without escaping anything. Measured with the nvcc 13 wheel, each of
these runs `touch M`: `-DX=1$(touch M)`, `-UX$(touch M)`, `-I/a/\\`touch M\\``, `-I/a/x\\$(touch M)`,
the same paths after `-isystem` and `-include`, and a path that ends in a backslash (it escapes
the closing quote, so the next argument is read as commands). Defines, include folders and
pre-included files come from the workspace (compile_commands.json, pyproject.toml, settings), so
none of them may reach that shell as it is written:

- a plain define (`NAME` or `NAME=value`, the name an identifier, the value made of
  `[A-Za-z0-9_.+-/:=]` only) and every undefine (an identifier) go on nvcc's command line as
  written: nvcc hands them to the host preprocessor before its own `-include cuda_runtime.h`, so
  `-DCUDA_API_PER_THREAD_DEFAULT_STREAM=1` or `-D_XOPEN_SOURCE=600` mean what they mean to nvcc.
  Measured (`nvcc -dryrun`): each step gets them as `-D "NAME=value"`, unchanged; no character of
  that set is read inside double quotes, and the comma is left out because nvcc splits a -D at
  commas (`-DZ=1,2` is `-D "Z=1" -D "2"`);
- any other define (a value with `$`, a backtick, a backslash, a quote, a space, a comma, ...;
  a function-like macro) is a `#define` line of a header in the compile's private temporary
  folder, passed with `-include` (the meaning of -D: `NAME` is `#define NAME 1`, `NAME=` defines
  it empty, the -U's come after the -D's); every define of a name one of them names goes there
  too, with its -U, so the last one still wins. That header comes after `cuda_runtime.h`: the one
  way such a define differs from nvcc's. A value the header cannot hold (a line break) is refused
  before (`options.usable_macros`);
- a path that holds a character the shell reads inside double quotes (a backtick, a backslash, a
  double quote, a control character) is passed as a symlink in that folder, and the log names the
  real path again.
"""

from __future__ import annotations

import os
import re

DEFINES_HEADER = "klsp_defines.h"
# What the preprocessor calls -D's origin: the header's findings read as they did with -D.
COMMAND_LINE = "<command-line>"
# Inside double quotes sh still reads `$` (nvcc escapes it), a backtick, a backslash and `"`.
_SHELL_SAFE_PATH = re.compile(r"[^`\\\"\x00-\x1f\x7f]*")
# A define nvcc may pass as written: an identifier, and a value no shell reads inside double
# quotes and nvcc neither splits (a comma) nor unescapes (a backslash).
_PLAIN_DEFINE = re.compile(r"[A-Za-z_]\w*(=[A-Za-z0-9_.+\-/:=]*)?", re.ASCII)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*", re.ASCII)


def shell_safe(path: str) -> bool:
    """Whether nvcc can pass `path` to its shell in its double quotes without it being read."""
    return _SHELL_SAFE_PATH.fullmatch(path) is not None


def plain_define(define: str) -> bool:
    """Whether `-D<define>` can reach nvcc's shell as it is written."""
    return _PLAIN_DEFINE.fullmatch(define) is not None


def macro_name(define: str) -> str:
    """`NAME` of `NAME`, `NAME=value` and `NAME(a)=body`."""
    return re.split(r"[=(]", define, maxsplit=1)[0]


def split_macros(
    defines: tuple[str, ...], undefines: tuple[str, ...]
) -> tuple[list[str], tuple[str, ...], tuple[str, ...]]:
    """(nvcc's -D/-U flags, the defines and undefines for the header). A name with any define that
    is not plain keeps all its defines and -U's in the header, in order: a plain `-DX=2` on the
    command line would come before the header's `#define X ...` and lose to it."""
    in_header = {macro_name(d) for d in defines if not plain_define(d)}
    flags = [f"-D{d}" for d in defines if macro_name(d) not in in_header]
    flags += [f"-U{u}" for u in undefines if _IDENTIFIER.fullmatch(u) and u not in in_header]
    header_defines = tuple(d for d in defines if macro_name(d) in in_header)
    header_undefines = tuple(u for u in undefines if u in in_header)
    return flags, header_defines, header_undefines


def defines_text(defines: tuple[str, ...], undefines: tuple[str, ...]) -> str:
    """The header that stands for `-D...` then `-U...`."""
    lines = []
    for d in defines:
        name, eq, value = d.partition("=")
        lines.append(f"#define {name} {value if eq else '1'}".rstrip(" ") + "\n")
    lines += [f"#undef {u}\n" for u in undefines]
    return "".join(lines)


class NvccArgs:
    """The shell-safe spelling of one compile's workspace values, in its temporary folder `tmp`
    (private to the compile: made by `tempfile`, mode 0700)."""

    def __init__(self, tmp: str) -> None:
        self.tmp = tmp
        self.aliases: dict[str, str] = {}  # symlink in tmp -> the real path
        self.header: str | None = None
        self.dropped: list[str] = []  # paths no safe spelling was found for

    def path(self, real: str) -> str | None:
        """`real`, or a symlink to it in the temporary folder when the shell would read it; None
        when no link can be made (the path is then left out, and named in `dropped`)."""
        if shell_safe(real):
            return real
        alias = os.path.join(self.tmp, f"klsp_path{len(self.aliases)}")
        try:
            os.symlink(real, alias)
        except (OSError, ValueError):  # no symlinks here, or a NUL in the name
            self.dropped.append(real)
            return None
        self.aliases[alias] = real
        return alias

    def macros(self, defines: tuple[str, ...], undefines: tuple[str, ...]) -> list[str]:
        """The plain -D's and -U's as they are, then `-include <tmp>/klsp_defines.h` holding the
        others when there are any."""
        flags, header_defines, header_undefines = split_macros(defines, undefines)
        if not header_defines:
            return flags
        self.header = os.path.join(self.tmp, DEFINES_HEADER)
        with open(self.header, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(defines_text(header_defines, header_undefines))
        return [*flags, "-include", self.header]

    def restore(self, log: str) -> str:
        """The log with the real paths in place of the links, and the header named as the
        command line its lines stand for."""
        for alias, real in self.aliases.items():
            log = log.replace(alias, real)
        if self.header:
            where = re.escape(self.header)
            # gcc says a -D's line as `<command-line>:`, and no header includes it.
            log = re.sub(rf"In file included from {re.escape(COMMAND_LINE)}:\n(?={where})", "", log)
            log = re.sub(rf"{where}(:\d+)*", COMMAND_LINE, log)
        return log
