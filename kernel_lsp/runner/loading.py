"""A candidate's or a kernel's image loaded into runnable steps: a CUBIN's functions, or a host
entry's library (runner/entry.py). The worker loads the user's own code with it, and the accused
(runner/accused.py) the code under judgement."""

from __future__ import annotations

import tempfile
from typing import TYPE_CHECKING, Any

from kernel_lsp.runner.entry import EntryStep, LibraryState, library_globals, load_library, load_runtime
from kernel_lsp.runner.isolation import ModuleState
from kernel_lsp.runner.verify import Failed, Problem, Step

if TYPE_CHECKING:
    from .device_protocol import Device


def build_steps(
    device: Device,
    cubin: bytes,
    steps: list[dict[str, Any]],
    modules: list[Any],
    states: list[Any] | None = None,
    sandboxed: bool = False,
    folder: str | None = None,
    image_path: str | None = None,
) -> list[Any]:
    """Load the CUBIN and resolve each step's function; with `states`, also keep the image of
    the module's mutable globals for restoring before launches (runner/isolation.py). A host
    entry's step (`kind: entry`) loads the blob as a shared library instead (runner/entry.py);
    code that is not the user's own (`trusted` false) loads only in a sandboxed worker.
    `image_path`: a file that holds the blob already (a confined process writes none)."""
    if steps and steps[0].get("kind") == "entry":
        return [_entry_step(device, cubin, steps[0], modules, states, sandboxed, folder, image_path)]
    module = device.load(cubin)
    modules.append(module)
    if states is not None:
        states.append(ModuleState.snapshot(device, module, cubin))
    return [
        Step(
            s["kernel"],
            device.function(module, s["symbol"]),
            list(s["params"]),
            s["grid"],
            s["block"],
            str(s.get("smem") or "0"),
            dict(s.get("constants") or {}),
        )
        for s in steps
    ]


def _entry_step(
    device: Device,
    image: bytes,
    step: dict[str, Any],
    modules: list[Any],
    states: list[Any] | None,
    sandboxed: bool,
    folder: str | None,
    image_path: str | None = None,
) -> EntryStep:
    if not step.get("trusted", False) and not sandboxed:
        raise Failed(
            Problem(
                "sandbox",
                "",
                f"`{step['kernel']}` is host code the user did not write: it runs only in a sandboxed "
                "GPU worker (sandboxed=True), and this worker is not",
            )
        )
    runtime = load_runtime() if b"libcudart" in image else None
    library, fn = load_library(image, folder or tempfile.gettempdir(), step["symbol"], runtime, image_path)
    modules.append(library)
    checks = None if device.fake else runtime
    if states is not None:
        variables = library_globals(library, list(step.get("globals") or []), checks)
        states.append(LibraryState(library, ModuleState.of(device, variables)))
    return EntryStep(
        step["kernel"],
        fn,
        list(step["params"]),
        list(step["codes"]),
        str(step.get("returns", "void")),
        checks,
        library,
    )
