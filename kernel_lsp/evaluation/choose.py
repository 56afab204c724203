"""Which evaluation backend serves a run: `evaluation.backend` / `--backend` = local | ray | auto.

`local`: one LocalBackend per device of `--gpus all|N` on this machine. `ray`: one actor per GPU
of a Ray cluster (joined at `cluster.address` / `--ray-address` / RAY_ADDRESS, else started here).
`auto`: Ray when a cluster address is given, else local. When Ray cannot serve (not installed, no
cluster at the address), an explicit `ray` is an error (RayUnavailable, one message); `auto`
says why in one line and goes on locally.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .local import LocalBackend, fake_gpu_default
from .pool import parse_gpus, visible_gpu_count
from .ray_backend import RayUnavailable, cluster_address, open_ray_backends
from .ray_bridge import open_bridged_backends
from .ray_bridge import wanted as bridged

BACKENDS = ("auto", "local", "ray")

__all__ = ["BACKENDS", "RayUnavailable", "open_backends", "ray_count", "wants_ray"]


def wants_ray(kind: str | None, address: str | None) -> bool:
    return kind == "ray" or (kind in (None, "", "auto") and bool(cluster_address(address)))


def ray_count(gpus: str | int | None) -> tuple[int | None, str | None]:
    """Actors for `--gpus`: None/"" one (as local), `all` every GPU of the cluster (None), N."""
    if gpus is None or gpus == "":
        return 1, None
    text = str(gpus).strip().lower()
    if text == "all":
        return None, None
    if text.isdigit() and int(text) > 0:
        return int(text), None
    return 1, f"--gpus takes `all` or a number of GPUs, not `{gpus}`"


def open_backends(
    kind: str | None,
    gpus: str | int | None,
    first: int | None = None,
    address: str | None = None,
    log: Callable[[str], Any] = print,
    launch_timeout_s: float = 5.0,
    timing: Any = None,
    fake: bool | None = None,
    start_timeout_s: float = 60.0,
    lanes: int = 1,
) -> list[Any]:
    """The backends of a run, one per GPU (not yet checked for availability). Raises
    RayUnavailable only when Ray was asked for explicitly. `lanes`: the worker processes a
    local run will have on each GPU (each local backend is told; a Ray actor is one)."""
    fake = fake if fake is not None else fake_gpu_default()
    opts = {
        "launch_timeout_s": launch_timeout_s,
        "timing": timing,
        "fake": fake,
        "start_timeout_s": start_timeout_s,
    }
    if kind not in (None, *BACKENDS):
        log(f"kernel-lsp: unknown evaluation backend `{kind}` (expected local or ray); using local")
        kind = "local"
    if wants_ray(kind, address):
        count, problem = ray_count(gpus)
        if problem:
            log(f"kernel-lsp: {problem}")
        # A local cluster gets this machine's GPUs; with fake GPUs (CI), as many as asked for.
        local_gpus = visible_gpu_count() or ((count or 2) if fake else 0)
        try:
            joined = cluster_address(address)
            if joined and bridged(joined):  # a cluster elsewhere: Ray in a child process
                return open_bridged_backends(count, joined, log=log, **opts)
            return open_ray_backends(count, address, local_gpus=local_gpus, log=log, **opts)
        except RayUnavailable as e:
            if kind == "ray":
                raise
            log(f"kernel-lsp: {e}; evaluating on this machine's GPUs (`local`) instead")
    devices, problem = parse_gpus(gpus, first)
    if problem:
        log(f"kernel-lsp: {problem}")
    return [LocalBackend(d, **opts, lanes=lanes) for d in devices]
