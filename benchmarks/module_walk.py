"""Which kernel_lsp modules a save passes through, module by module (issue 47: ARCHITECTURE.md's
"A save, module by module"), and how many of its calls climb from a lower layer of
ARCHITECTURE.md's diagram into a higher one (tests/unit/test_architecture.py's LAYERS).

Two sides, each traced with a profile hook on a warm second save of one sample (the first save
starts the compile worker and fills the caches a save does not pay for again):

- the server's: `server.analysis.Analysis` asked to check the file, in this process, up to the
  findings it publishes (the check itself runs in a compile worker);
- the compile worker's: `check_jobs.check_job`, what that worker runs, in this process.

With `--candidate`, the driver's side of a candidate instead: one round of the built-in tuner
(`optimizer.session.run`) on tests/fixtures/tuner_entries/scale_iostream.cu, on the fake GPU (its
worker and accused processes, which run the candidate, are not traced).

    .venv/bin/python benchmarks/module_walk.py [--file samples/softmax/softmax_fp32.cu] [--candidate]

Each module is printed once, in the order a call first entered it, with its layer and the
function that entered it."""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "unit")]

from test_architecture import LAYERS  # noqa: E402


def part(module: str) -> str | None:
    names = module.split(".")
    return names[1] if names[0] == "kernel_lsp" and len(names) > 1 else None


class Walk:
    """The modules entered, in order, each with its first caller; the calls that climbed."""

    def __init__(self) -> None:
        self.first: dict[str, tuple[str, str]] = {}
        self.climbs: set[tuple[str, str, str]] = set()

    def hook(self, frame, event, arg):  # sys.setprofile's signature
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        if part(callee) is None:
            return
        back = frame.f_back
        caller = back.f_globals.get("__name__", "") if back is not None else ""
        self.first.setdefault(callee, (caller, frame.f_code.co_name))
        low, high = part(caller), part(callee)
        if low in LAYERS and high in LAYERS and low != high and LAYERS[high] > LAYERS[low]:
            self.climbs.add((caller, callee, frame.f_code.co_name))

    def print(self, title: str) -> None:
        print(f"{title}: {len(self.first)} modules, {len(self.climbs)} climbing calls")
        for module, (caller, function) in self.first.items():
            print(f"  {LAYERS.get(part(module) or '', '?')!s:>2} {module}  <- {caller}.{function}")
        for caller, callee, function in sorted(self.climbs):
            print(f"  climbs: {caller} -> {callee}.{function}")


async def server_side(path: str, walk: Walk) -> None:
    from kernel_lsp.server.analysis import Analysis, Snapshot
    from kernel_lsp.workspace import Workspace

    text = Path(path).read_text()
    workspace = Workspace(root=str(Path(path).parent.parent))
    version = [1]

    def snapshot(p: str) -> Snapshot:
        return Snapshot(f"{text}\n// {version[0]}\n", version[0]) if p == path else Snapshot(None, None)

    analysis = Analysis(publish=lambda p, d: None, snapshot=snapshot, workspace=lambda: workspace, workers=1)
    analysis.request(path)
    await analysis.wait(path, 300)  # the compile worker starts
    version[0] = 2
    sys.setprofile(walk.hook)
    threading.setprofile(walk.hook)
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(2))  # traced threads
    try:
        analysis.request(path)
        await analysis.wait(path, 300)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def worker_side(path: str, walk: Walk) -> None:
    from kernel_lsp.check_jobs import check_job
    from kernel_lsp.workspace import CheckRequest, Workspace

    text = Path(path).read_text()
    workspace = Workspace(root=str(Path(path).parent.parent))
    check_job(CheckRequest(path, text + "\n// 1\n", None, (), None, "walk"), workspace)
    sys.setprofile(walk.hook)
    try:
        check_job(CheckRequest(path, text + "\n// 2\n", None, (), None, "walk"), workspace)
    finally:
        sys.setprofile(None)


def candidate_side(walk: Walk) -> None:
    import shutil
    import tempfile

    from kernel_lsp.compile import cuda_include_dirs
    from kernel_lsp.config import Settings
    from kernel_lsp.gpu import GpuSession
    from kernel_lsp.model import TimingSettings
    from kernel_lsp.optimizer.session import RunRequest, run

    folder = Path(tempfile.mkdtemp())
    for suffix in (".cu", ".spec.py"):
        shutil.copy(
            REPO / "tests" / "fixtures" / "tuner_entries" / f"scale_iostream{suffix}",
            folder / f"scale{suffix}",
        )
    request = RunRequest(
        path=str(folder / "scale.cu"),
        kernel="scale",
        rounds=1,
        candidates=1,
        use_cache=False,
        workspace=str(folder),
        proposer="tune",
        settings=Settings(arch=("sm_90",), include_dirs=tuple(cuda_include_dirs())),
    )
    timing = TimingSettings(warmup_s=0.0, budget_s=0.05, min_samples=15, max_samples=15)
    with GpuSession(fake=True, timing=timing) as gpu:
        sys.setprofile(walk.hook)
        try:
            result = run(request, session=gpu)
        finally:
            sys.setprofile(None)
    print(f"the round: {result.verdict[:160]}")
    shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--file", default=str(REPO / "samples" / "softmax" / "softmax_fp32.cu"))
    parser.add_argument("--candidate", action="store_true", help="a tuner round's driver side instead")
    args = parser.parse_args()
    if args.candidate:
        walk = Walk()
        candidate_side(walk)
        walk.print("a candidate, the driver's side")
        return 0
    path = str(Path(args.file).resolve())
    server, worker = Walk(), Walk()
    asyncio.run(server_side(path, server))
    worker_side(path, worker)
    server.print("a save, the server's side")
    worker.print("a save, the compile worker's side")
    both = set(server.first) | set(worker.first)
    print(f"in all: {len(both)} modules, {len(server.climbs | worker.climbs)} climbing calls")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
