"""The wire format between the client (kernel_lsp.gpu) and the GPU worker (kernel_lsp.runner.worker).

Each message is one frame on the worker's stdin (requests) or stdout (replies):

    4 bytes   magic b"KLSP"
    4 bytes   little-endian uint32: length J of the JSON header
    J bytes   UTF-8 JSON object; its optional "blobs" key lists the byte lengths of raw payloads
    ...       the raw payloads (CUBIN images), back to back, in the order of "blobs"

Requests carry `"op"`: `hello`, `device_info`, `check`, `compare`, `shutdown`. While it works on a
request the worker sends any number of `{"event": "progress", "phase", "case", "timeout_s"}`
frames, then exactly one `{"event": "result", ...}` (or `{"event": "error", "message"}`).
`timeout_s` in a progress frame is how long the client may wait for the next frame before it
declares the worker hung, kills it and reports the phase and case of that last progress frame:
launches get the session's launch timeout, host-side work (numpy references) a long one.

After a sticky CUDA error (illegal address, ...) the worker sends its result with
`"fatal": true` and exits: its context is unusable, and the client starts a new worker.
Nothing but frames may reach the worker's stdout: the worker moves fd 1 to stderr at start, so a
print() in a spec file cannot corrupt the stream.
"""

from __future__ import annotations

import json
import struct
from typing import IO, Any

MAGIC = b"KLSP"
_HEADER = struct.Struct("<4sI")
MAX_JSON = 64 << 20


class ProtocolError(RuntimeError):
    """The stream does not hold a well-formed frame (the peer died or wrote garbage)."""


def write_message(stream: IO[bytes], message: dict[str, Any], blobs: list[bytes] | None = None) -> None:
    blobs = blobs or []
    header = dict(message)
    if blobs:
        header["blobs"] = [len(b) for b in blobs]
    data = json.dumps(header, separators=(",", ":"), allow_nan=True).encode()
    stream.write(_HEADER.pack(MAGIC, len(data)))
    stream.write(data)
    for blob in blobs:
        stream.write(blob)
    stream.flush()


def _read_exact(stream: IO[bytes], n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError(f"stream closed with {left} of {n} bytes unread")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_message(stream: IO[bytes]) -> tuple[dict[str, Any], list[bytes]]:
    """One frame: (header, blobs). EOFError when the stream ends cleanly before a frame."""
    head = stream.read(_HEADER.size)
    if not head:
        raise EOFError("stream closed")
    if len(head) < _HEADER.size:
        head += _read_exact(stream, _HEADER.size - len(head))
    magic, length = _HEADER.unpack(head)
    if magic != MAGIC:
        raise ProtocolError(f"bad frame magic {magic!r}")
    if length > MAX_JSON:
        raise ProtocolError(f"frame header of {length} bytes is too large")
    try:
        message = json.loads(_read_exact(stream, length))
    except json.JSONDecodeError as e:
        raise ProtocolError(f"bad frame JSON: {e}") from None
    if not isinstance(message, dict):
        raise ProtocolError("frame JSON is not an object")
    blobs = [_read_exact(stream, int(n)) for n in message.pop("blobs", [])]
    return message, blobs
