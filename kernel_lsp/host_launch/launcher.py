"""What a launcher says about its kernels' arguments, for specs and their skeletons: which host
function runs a pipeline of kernels, the buffers it passes under several parameter names (its
`rms` is the next kernel's `d_rms`), its temporaries (allocated there, never copied to or from the
host: `Scratch`, zeroed when it memsets them) and the values it passes for scalars."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..lexer import blank_comments
from ..source import find_kernels
from .model import HostCall, HostCode, HostFunction, HostLaunch, launch_matches
from .occupancy import host_code
from .scan import find_functions

_COPIES = ("cudaMemcpy", "cudaMemcpyAsync")


def launcher_for(host: HostCode, kernels: Sequence[str]) -> HostFunction | None:
    """The host function whose launches run `kernels` in this order (other launches between them
    allowed), the one with the fewest launches when several do."""
    fits = []
    for fn in host.launchers:
        i = 0
        for launch in fn.launches:
            if i < len(kernels) and launch_matches(launch, kernels[i]):
                i += 1
        if i == len(kernels):
            fits.append(fn)
    return min(fits, key=lambda f: len(f.launches)) if fits else None


def pipelines(host: HostCode) -> list[HostFunction]:
    """Launchers that launch more than one kernel (each a pipeline a spec may describe whole)."""
    return [f for f in host.launchers if len(dict.fromkeys(f.kernels)) > 1]


def launches_of(fn: HostFunction, kernels: Sequence[str]) -> list[HostLaunch]:
    """The launch of each of `kernels` in `fn`, in order (the first fitting one each)."""
    out: list[HostLaunch] = []
    rest = list(fn.launches)
    for kernel in kernels:
        while rest and not launch_matches(rest[0], kernel):
            rest.pop(0)
        if rest:
            out.append(rest.pop(0))
    return out


def one_buffer_names(fn: HostFunction, kernels: Sequence[str], pointers: set[str]) -> dict[str, str]:
    """{parameter: the parameter that first got the same buffer} for the pointer parameters of
    `kernels` that `fn` passes one launcher variable under another name (`d_rms` -> `rms`)."""
    first: dict[str, str] = {}
    out: dict[str, str] = {}
    for launch in launches_of(fn, kernels):
        for a in launch.arguments:
            if not a.source or a.param not in pointers:
                continue
            earlier = first.setdefault(a.source, a.param)
            if earlier != a.param:
                out.setdefault(a.param, earlier)
    return out


@dataclass(frozen=True)
class Temporary:
    """A buffer the launcher allocates for its kernels' own use."""

    name: str  # the launcher's variable
    allocation: HostCall | None
    zeroed: bool  # cudaMemset to 0 before use


def temporaries(fn: HostFunction) -> dict[str, Temporary]:
    """The launcher's temporaries that never cross to the host (no cudaMemcpy in or out): what a
    spec declares as Scratch. None in a `main`: every buffer is allocated there, and what it does
    with them (copies them back, prints a checksum, frees them unread) says nothing of scratch."""
    if not library_launcher(fn):
        return {}
    copied = {arg.strip().lstrip("&") for c in fn.calls if c.name in _COPIES for arg in c.args[:2]}
    out = {}
    for name in fn.temporaries:
        if name in copied:
            continue
        allocation = next((c for c in fn.allocations if c.target == name), None)
        zeroed = any(c.target == name and len(c.args) > 1 and c.args[1].strip() == "0" for c in fn.memsets)
        out[name] = Temporary(name, allocation, zeroed)
    return out


def library_launcher(fn: HostFunction) -> bool:
    """A launcher others call with the sizes (an `extern "C"` function, a torch op, llm.c's
    `layernorm_forward`), not a program's `main`, whose constants are its chosen sizes."""
    return fn.name != "main"


def entry_kernels(source: str, entry: str, defines: tuple[str, ...] = ()) -> list[str]:
    """The kernels a file's entry launches, in the order it launches them (each once): its own
    launches and those of the file's host functions it calls (`launch_pass1(...)` inside it), two
    calls deep. Where it reaches none, every kernel the file's host code launches, else every
    kernel of the file."""
    host = host_code(source, defines)
    names: list[str] = []
    if host.function(entry) is not None:
        code = blank_comments(source)
        starts = [0] + [i + 1 for i, c in enumerate(source) if c == "\n"]
        spans = {s.name.rpartition("::")[2]: s for s in find_functions(code, source)}

        def visit(name: str, depth: int, seen: set[str]) -> None:
            f, span = host.function(name), spans.get(name)
            if f is None or name in seen:
                return
            seen.add(name)
            events: list[tuple[int, str, str]] = []
            for x in f.launches:
                at = starts[x.line - 1] + x.col - 1 if 0 < x.line <= len(starts) else 0
                events.append((at, "launch", x.kernel))
            if span is not None and depth < 2:
                for m in re.finditer(r"\b([A-Za-z_]\w*)\s*(?:<[^<>;]*>)?\s*\(", code[span.open : span.close]):
                    if m.group(1) in spans and m.group(1) != name:
                        events.append((span.open + m.start(), "call", m.group(1)))
            for _, kind, what in sorted(events):
                if kind == "launch":
                    names.append(what)
                else:
                    visit(what, depth + 1, seen)

        visit(entry, 0, set())
    if not names:
        names = [x.kernel for x in host.launches]
    if not names:
        names = [k.name for k in find_kernels(source)]
    return list(dict.fromkeys(names))
