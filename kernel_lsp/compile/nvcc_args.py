"""Arguments for nvcc that its shell cannot read as commands.

nvcc runs its steps (the host preprocessor, cudafe++, cicc, ptxas, the host compiler) through
`sh -c`, each value in double quotes: it escapes `$` in paths but not a backtick or a backslash,
and puts -D/-U values in without escaping anything. Measured with the nvcc 13 wheel, each of
these runs `touch M`: `-DX=1$(touch M)`, `-UX$(touch M)`, `-I/a/\\`touch M\\``, `-I/a/x\\$(touch M)`,
the same paths after `-isystem` and `-include`, and a path that ends in a backslash (it escapes
the closing quote, so the next argument is read as commands). Defines, include folders and
pre-included files come from the workspace (compile_commands.json, pyproject.toml, settings), so
none of them may reach that shell as it is written:

- defines and undefines never go on nvcc's command line: they are `#define`/`#undef` lines of a
  header in the compile's private temporary folder, passed with `-include` (the meaning of -D:
  `NAME` is `#define NAME 1`, `NAME=` defines it empty, the -U's come after the -D's, as on the
  command line kernel-lsp used to build); a value the header cannot hold is refused before
  (`options.macro_problems`);
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


def shell_safe(path: str) -> bool:
    """Whether nvcc can pass `path` to its shell in its double quotes without it being read."""
    return _SHELL_SAFE_PATH.fullmatch(path) is not None


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
        """`-include <tmp>/klsp_defines.h` holding the defines, or nothing when there are none."""
        if not defines and not undefines:
            return []
        self.header = os.path.join(self.tmp, DEFINES_HEADER)
        with open(self.header, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(defines_text(defines, undefines))
        return ["-include", self.header]

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
