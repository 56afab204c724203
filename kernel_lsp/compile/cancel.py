"""Stopping a compile from outside the process that runs it.

The server's compiles run in worker processes; a newer edit makes a running one worthless. The
server names a token file per check and creates it to cancel; the worker's nvcc loop looks for
it between short waits and kills nvcc's process group. A file, not a signal: the worker kills
its own child, whose pid it still holds (no risk of killing a pid reused by another program),
and nothing needs to be shared between the processes but a path.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar

_token: ContextVar[str | None] = ContextVar("kernel_lsp_cancel_token", default=None)


@contextlib.contextmanager
def cancel_scope(token: str | None) -> Iterator[None]:
    """Compiles started inside stop early once the file `token` exists."""
    reset = _token.set(token)
    try:
        yield
    finally:
        _token.reset(reset)


def cancelled() -> bool:
    token = _token.get()
    return token is not None and os.path.exists(token)


def cancel(token: str) -> None:
    """Ask the compiles of `token`'s scope to stop (idempotent; never raises)."""
    with contextlib.suppress(OSError), open(token, "a"):
        pass
