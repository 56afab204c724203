"""An in-process LRU of compile results keyed by content, options and header stamps."""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from typing import Any, Generic, TypeVar

from ..model import FAULT_CODES, CompileResult
from .includes import header_stamps, include_closure
from .options import CompileOptions

_OUT_OF_MEMORY = "out of memory"

# What a cache holds: a CompileResult, or a shared library's build (compile/shared_lib.py), which
# holds its CompileResult as `.result`.
Item = TypeVar("Item")


class CompileCache(Generic[Item]):
    """LRU of results keyed by content, options and the stamps of the user headers read; at most
    `capacity` results and `max_bytes` of CUBINs and logs (a CUB-heavy file's CUBIN is MBs: 256
    of them held a long-lived compile worker at hundreds of MB)."""

    def __init__(self, capacity: int = 256, max_bytes: int = 32 * 2**20) -> None:
        self._items: OrderedDict[str, Item] = OrderedDict()
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def key(source: str, path: str, options: CompileOptions) -> str:
        user_dirs = tuple(options.include_dirs)
        headers = include_closure(source, path, user_dirs)
        h = hashlib.sha256()
        h.update(source.encode("utf-8", "surrogatepass"))
        h.update(repr((os.path.abspath(path), options, header_stamps(headers))).encode())
        return h.hexdigest()

    def get(self, key: str) -> Item | None:
        with self._lock:
            r = self._items.get(key)
            if r is not None:
                self._items.move_to_end(key)
            return r

    def put(self, key: str, result: Item) -> None:
        """Keep `result`, unless the compile did not finish (a deadline, the memory limit, a
        crash): that says nothing about the text, and the next check must try again. Nor one
        larger than the whole byte budget."""
        compiled = _compiled(result)
        if any(d.code in FAULT_CODES for d in compiled.diagnostics) or _OUT_OF_MEMORY in compiled.log:
            return
        if _size(result) > self._max_bytes:
            return
        with self._lock:
            if (old := self._items.pop(key, None)) is not None:
                self._bytes -= _size(old)
            self._items[key] = result
            self._bytes += _size(result)
            while len(self._items) > self._capacity or self._bytes > self._max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= _size(dropped)


def _compiled(item: Any) -> CompileResult:
    """The compile an item holds: itself, or a shared-library build's `.result`."""
    return getattr(item, "result", item)


def _size(item: Any) -> int:
    """The bytes a cached result holds: its CUBIN and log (and a shared-library build's library)."""
    compiled = _compiled(item)
    return len(getattr(item, "library", None) or b"") + len(compiled.cubin or b"") + len(compiled.log)


_cache: CompileCache[CompileResult] = CompileCache()
