"""Results of the gates, kept on disk per device, so a second run over the same space is instant.

A result is keyed by the device (name and arch), the candidate's text, the original's text (the
candidate was verified against its outputs), the spec file's text and the compile options. Any
change to one of them is a different key, so a stale result is never reused. Location:
$XDG_CACHE_HOME/kernel-lsp/optimizer (default ~/.cache/kernel-lsp/optimizer).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

# Bumped whenever the gates change what they decide: older results are then not reused.
# 3: the memory bound became the best stream kernel's rate, so fewer honest figures are over it.
CACHE_VERSION = "3"


def default_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kernel-lsp", "optimizer")


class ResultCache:
    def __init__(self, directory: str | None, device_key: str, context: str) -> None:
        """`context`: everything besides the candidate that a result depends on (original source,
        spec text, compile options), as one string."""
        self.directory = (
            os.path.join(directory, re.sub(r"[^A-Za-z0-9_.-]+", "_", device_key)) if directory else None
        )
        self.context = hashlib.sha256(
            (CACHE_VERSION + "\n" + context).encode("utf-8", "surrogatepass")
        ).hexdigest()
        self.hits = 0

    def _path(self, kind: str, source: str) -> str | None:
        if not self.directory:
            return None
        h = hashlib.sha256()
        h.update(self.context.encode())
        h.update(kind.encode())
        h.update(source.encode("utf-8", "surrogatepass"))
        key = h.hexdigest()
        return os.path.join(self.directory, key[:2], key + ".json")

    def get(self, kind: str, source: str) -> dict[str, Any] | None:
        path = self._path(kind, source)
        if not path:
            return None
        try:
            with open(path, encoding="utf-8") as f:
                value = json.load(f)
        except (OSError, ValueError):
            return None
        self.hits += 1
        return value

    def put(self, kind: str, source: str, value: dict[str, Any]) -> None:
        path = self._path(kind, source)
        if not path:
            return
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(value, f)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache costs only time
