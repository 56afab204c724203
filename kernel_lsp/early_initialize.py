"""`initialize` answered before the language-server libraries load (issue 33: <= 0.2 s).

pygls and lsprotocol take 0.2-1 s to import (lsprotocol.types alone is most of it), and an editor
waits for the `initialize` answer before it sends anything else. The answer is the server's
capabilities, which depend only on kernel-lsp's code, the `initialize` params and whether a
clangd binary is found. So:

- the first message is read here, with the standard library only, before anything heavy is
  imported;
- if an earlier start saved the answer the server gave to params it depends on alike (the
  client's capabilities and the clangd settings among the initializationOptions: `_answer_inputs`;
  not the workspace, so a folder never opened before is answered from another folder's start)
  with this very code (the version and the stamps of the server's modules) and the same places
  to find clangd in (PATH, site-packages: their stamps), that answer goes out at once;
- the message is then handed to the server as usual, which answers it itself: that answer is
  dropped when the early one went out (and saved, if it differs, for the next start), else sent
  and saved. A first start with new params, or after an upgrade, is only as fast as before.

The saved answers live in $XDG_CACHE_HOME/kernel-lsp/initialize (default ~/.cache/...), one
small file per params hash; nothing of a workspace is read or run here. KERNEL_LSP_EARLY_INITIALIZE=0
turns this off. What was read from stdin is handed on byte for byte (`prefix`), also when it is
not a well-formed `initialize` (the server's strict reader then reports it as before).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import BinaryIO

from .settings_shape import flatten_settings

MAX_HEADER_LINE = 8192  # as the server's reader (server/transport.py)
MAX_INITIALIZE_BYTES = 4 * 2**20  # larger than any real `initialize`: read by the server, not here
_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "server")


@dataclass
class Early:
    """The first message as read (`prefix`: the exact bytes), and what became of it."""

    prefix: bytes
    request_id: int | str | None = None  # the `initialize` request's id, None if it was not one
    key: str = ""  # the saved answer's file name ("" when none can be kept)
    answered: bytes | None = None  # the result JSON sent early, None when none was

    def server_reply(self, data: bytes) -> bool:
        """The server wrote `data` (one framed message): whether it goes out. The server's own
        `initialize` answer is saved for the next start, and dropped when the early one went
        out. Never raises."""
        if self.request_id is None or not self.key:
            return True
        try:
            body = data.split(b"\r\n\r\n", 1)[1]
            message = json.loads(body)
        except (IndexError, ValueError):
            return True
        if not isinstance(message, dict) or message.get("id") != self.request_id or "method" in message:
            return True
        self.request_id = None  # one answer per request: later messages pass untouched
        if "result" not in message:
            return self.answered is None  # an error: never saved (and the early answer stands)
        result = json.dumps(message["result"], separators=(",", ":"), sort_keys=True).encode()
        if result != self.answered:
            _save(self.key, result)
        return self.answered is None


def _frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kernel-lsp", "initialize")


def _code_stamp() -> str:
    """The version and the (name, mtime, size) of the server's modules: a change makes a new key."""
    from . import __version__

    parts = [__version__]
    for folder, dirs, files in os.walk(_SERVER):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                with contextlib.suppress(OSError):
                    st = os.stat(os.path.join(folder, name))
                    parts.append(f"{os.path.relpath(folder, _SERVER)}/{name}:{st.st_mtime_ns}:{st.st_size}")
    return "\n".join(parts)


def _environment_stamp() -> str:
    """What else the answer depends on: clangd's features are in it only when a clangd binary is
    found (server/clangd/binary.py looks on PATH and in the interpreter's site-packages), so an
    install or removal there (a folder's mtime), PATH and kernel-lsp's variables make a new key."""
    import sysconfig

    folders = [d for d in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(d)]
    folders += [sysconfig.get_paths()[k] for k in ("purelib", "platlib")]
    parts = [sys.executable, *sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith("KERNEL_LSP"))]
    for folder in dict.fromkeys(folders):
        for path in (folder, os.path.join(folder, "clangd", "data", "bin")):
            try:
                parts.append(f"{path}:{os.stat(path).st_mtime_ns}")
            except OSError:
                parts.append(f"{path}:-")
    return "\n".join(parts)


def _clangd_options(options: object) -> dict[str, object]:
    """The `clangd.*` settings of the initializationOptions, nested or dotted, with or without a
    `kernelLsp` wrapper (as server/clangd/binary.user_choice reads them)."""
    return {k: v for k, v in flatten_settings(options).items() if k.startswith("clangd.")}


def _answer_inputs(params: dict) -> dict:
    """What the server's answer is made of: pygls builds it from the client's capabilities and
    the features registered, and the server withdraws clangd's when the clangd settings turn it
    off or name no binary (server/notifications/initialized.py). Not the workspace (rootUri,
    workspaceFolders), the process, the client's name nor the other settings (the editor's
    settings hold the workspace's paths): tests/integration/test_early_initialize.py checks that
    the real server answers alike when they differ."""
    return {
        "capabilities": params.get("capabilities"),
        "clangd": _clangd_options(params.get("initializationOptions")),
    }


def _key(params: dict) -> str:
    text = "\n".join(
        [
            json.dumps(_answer_inputs(params), sort_keys=True, separators=(",", ":")),
            _code_stamp(),
            _environment_stamp(),
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32] + ".json"


def _load(key: str) -> bytes | None:
    path = os.path.join(_cache_dir(), key)
    with contextlib.suppress(OSError, ValueError):
        with open(path, "rb") as f:
            data = f.read(1 << 20)
        json.loads(data)  # a torn or foreign file is no answer
        return data
    return None


def _save(key: str, result: bytes) -> None:
    folder = _cache_dir()
    with contextlib.suppress(OSError):
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(result)
            os.replace(tmp, os.path.join(folder, key))
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _read_first(stdin: BinaryIO) -> tuple[bytes, bytes | None]:
    """(every byte read, the body of the first message or None when it is not one to answer)."""
    read = b""
    length = None
    while True:
        line = stdin.readline(MAX_HEADER_LINE)
        read += line
        if not line.endswith(b"\n"):
            return read, None  # the end of the stream, or a line too long: the server says so
        if line in (b"\r\n", b"\n"):
            break
        name, colon, value = line.partition(b":")
        if not colon:
            return read, None
        if name.strip().lower() == b"content-length":
            text = value.strip()
            if not text.isdigit() or int(text) > MAX_INITIALIZE_BYTES:
                return read, None
            length = int(text)
    if length is None:
        return read, None
    body = stdin.read(length)
    read += body
    return read, body if len(body) == length else None


def answer_early(stdin: BinaryIO, stdout: BinaryIO) -> Early:
    """Read the first message; answer it now if it is an `initialize` whose answer is saved."""
    if os.environ.get("KERNEL_LSP_EARLY_INITIALIZE", "1") == "0":
        return Early(b"")
    read, body = _read_first(stdin)
    early = Early(read)
    try:
        message = json.loads(body) if body is not None else None
    except ValueError:
        return early
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return early
    request_id, params = message.get("id"), message.get("params")
    if not isinstance(request_id, (int, str)) or isinstance(request_id, bool) or not isinstance(params, dict):
        return early
    early.request_id = request_id
    try:
        early.key = _key(params)
    except (TypeError, ValueError):
        return early
    saved = _load(early.key)
    if saved is not None:
        reply = b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (json.dumps(request_id).encode(), saved)
        try:
            stdout.write(_frame(reply))
            stdout.flush()
        except OSError:
            return early  # the server finds the pipe closed itself
        early.answered = saved
    return early
