"""The compile_commands.json clangd reads: kernel-lsp's flags for each file it has seen, in a
private folder of its own (`--compile-commands-dir`), never in the user's tree.

clangd reloads it when it changes; files that have no entry get the entry of the nearest file
that has one (clangd interpolates), so a `.cu` that go-to-definition lands in is parsed as CUDA
with the project's flags too. The folder is made with mode 0700 and removed when the server ends;
a server that was killed cannot remove its own, so the next one removes the folders of servers
that are gone (`tempdirs`: an owner file in each).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile

from ...api.checks import make_temp_folder

log = logging.getLogger(__name__)

DATABASE_NAME = "compile_commands.json"
PREFIX = "kernel-lsp-clangd-"


class PrivateDatabase:
    def __init__(self) -> None:
        self.folder = make_temp_folder(PREFIX)
        # clangd's temporary files (its preambles on disk): here, not in the system's temp
        # folder, so that they go with the folder however clangd ends.
        self.scratch = os.path.join(self.folder, "tmp")
        os.mkdir(self.scratch, 0o700)
        self._entries: dict[str, list[str]] = {}
        self._write()  # clangd finds a database from its first file on

    @property
    def path(self) -> str:
        return os.path.join(self.folder, DATABASE_NAME)

    def command(self, file: str) -> list[str] | None:
        return self._entries.get(file)

    def set(self, file: str, arguments: list[str]) -> bool:
        """Record `file`'s command; True when it is new or different (and was written)."""
        if self._entries.get(file) == arguments:
            return False
        self._entries[file] = arguments
        self._write()
        return True

    def _write(self) -> None:
        entries = [
            {"directory": os.path.dirname(file), "file": file, "arguments": args}
            for file, args in sorted(self._entries.items())
        ]
        try:
            # Whole or not at all: clangd may read it at any moment.
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".compile_commands.", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entries, f, indent=1)
            os.replace(tmp, self.path)
        except OSError as e:
            log.warning("cannot write clangd's compile_commands.json in %s: %s", self.folder, e)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

