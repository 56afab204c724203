"""An in-process LRU of compile results keyed by content, options and header stamps."""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict

from ..model import FAULT_CODES, CompileResult
from .includes import header_stamps, include_closure
from .options import CompileOptions

_OUT_OF_MEMORY = "out of memory"


class CompileCache:
    """LRU of results keyed by content, options and the stamps of the user headers read."""

    def __init__(self, capacity: int = 256) -> None:
        self._items: OrderedDict[str, CompileResult] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    @staticmethod
    def key(source: str, path: str, options: CompileOptions) -> str:
        user_dirs = tuple(options.include_dirs)
        headers = include_closure(source, path, user_dirs)
        h = hashlib.sha256()
        h.update(source.encode("utf-8", "surrogatepass"))
        h.update(repr((os.path.abspath(path), options, header_stamps(headers))).encode())
        return h.hexdigest()

    def get(self, key: str) -> CompileResult | None:
        with self._lock:
            r = self._items.get(key)
            if r is not None:
                self._items.move_to_end(key)
            return r

    def put(self, key: str, result: CompileResult) -> None:
        """Keep `result`, unless the compile did not finish (a deadline, the memory limit, a
        crash): that says nothing about the text, and the next check must try again."""
        compiled = getattr(result, "result", result)  # a shared-library build holds its compile
        if any(d.code in FAULT_CODES for d in compiled.diagnostics) or _OUT_OF_MEMORY in compiled.log:
            return
        with self._lock:
            self._items[key] = result
            self._items.move_to_end(key)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)


_cache = CompileCache()
