"""Functions of one file, memoised by the file's stamp (mtime, size): many checks read the same
header or ask the same nvcc, and a file written since (a header edited, a toolkit installed over
the old one) is read again."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TypeVar, cast

T = TypeVar("T")


def by_stamp(maxsize: int, missing: object) -> Callable[[Callable[[str], T]], Callable[[str], T]]:
    """`fn(path)` computed once per version of the file; `missing` where it cannot be stat'ed."""

    def wrap(fn: Callable[[str], T]) -> Callable[[str], T]:
        @functools.lru_cache(maxsize=maxsize)
        def of_version(path: str, mtime_ns: int, size: int) -> T:
            return fn(path)

        @functools.wraps(fn)
        def call(path: str) -> T:
            try:
                st = os.stat(path)
            except OSError:
                return cast(T, missing)  # the caller's own value for no file
            return of_version(path, st.st_mtime_ns, st.st_size)

        return call

    return wrap
