"""Evaluation on 1 GPU against N GPUs, through the local pool and through Ray: wall time, ratio,
and whether the result is the same.

Workloads (each run from an empty result cache):
- tuner: `optimize --proposer tune` (brute force over one tunable, so every run sees the same
  points), its candidates checked in parallel rounds, one per GPU;
- llm:   one LLM round through the scripted OpenAI-compatible server of the tests, one candidate
  per tune value of the same tunable;
- startup: opening the GPUs alone (workers, actors), which the other rows include;
- check: `--check` GPU verification of every spec'd file (samples/ on a GPU node), files spread
  over the GPUs. Only the evaluation part is timed (the files are compiled once before).

On a machine without a GPU it runs on fake GPUs (the runner's no-GPU mode: each "slow" launch
sleeps 2 ms, compiles map sources to fake images, warm L2, 0.2 s sampling) and says so: the
figures then show the scheduling overhead and the parallelism, not GPU speed.

    python benchmarks/scaling.py [--gpus N] [--repeat 3] [--workloads startup,tuner,llm,check] [--fake]
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the scripted LLM server
sys.path.insert(0, str(REPO / "tests" / "unit"))  # the fake compile

from kernel_lsp.config import Settings  # noqa: E402
from kernel_lsp.evaluation.pool import visible_gpu_count  # noqa: E402
from kernel_lsp.workspace import Workspace  # noqa: E402

TUNED = "samples/vector_add/vector_add_fp32.cu", "vector_add", "BLOCK", (256, 128, 512, 1024)

# The fake GPU's tunable kernel: BLOCK=512 is the fake's instant kernel, every other value the
# 2 ms one, so the accepted candidate is known.
FAKE_SOURCE = """\
#ifndef BLOCK
#define BLOCK 256
#endif
// kernel-lsp: launch vadd grid=cdiv(n, BLOCK) block=BLOCK
// kernel-lsp: tune BLOCK=256,128,512,1024
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""
FAKE_SPEC = """\
from kernel_lsp.spec import In, Out, Scalar, Spec
SPEC = Spec(
    kernel="vadd",
    sizes=[{"n": 1}, {"n": 1000}],
    timing_sizes=[{"n": 4096}],
    args={"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")},
    reference=lambda a, b: {"c": a + b},
)
"""


def with_block(source: str, value: int) -> str:
    return re.sub(r"#define BLOCK \d+", f"#define BLOCK {value}", source, count=1)


def use_fake_gpus() -> None:
    """Fake GPU workers everywhere; a source's fake image follows its BLOCK (or `// fake: X`)."""
    from test_evaluation import VADD_MANGLED, artifact

    from kernel_lsp.evaluation import choose
    from kernel_lsp.gpu import GpuSession
    from kernel_lsp.runner.timing import TimingSettings

    os.environ["KERNEL_LSP_FAKE_GPU"] = "1"

    def fake_compile(self: Any, source: str, path: str, options: Any = None) -> Any:
        m = re.search(r"// fake: (\w+)", source)
        block = re.search(r"#define BLOCK (\d+)", source)
        behaviour = m.group(1) if m else ("vadd" if block and block.group(1) == "512" else "slow")
        return artifact(path, {"vadd": (VADD_MANGLED, behaviour)})

    GpuSession.compile = fake_compile
    # Warm L2: the fake's instant kernel can fall under a cold-L2 speed-of-light bound on a busy CPU.
    choose.open_backends = functools.partial(
        choose.open_backends, timing=TimingSettings(cold_l2=False, budget_s=0.2)
    )


# --- workloads: each returns what must be equal across device counts ----------------------------


def tuner(settings: Settings, work: Path, fake: bool) -> str:
    from kernel_lsp.optimizer.session import RunRequest, run

    path, kernel, _, values = fake_target(work) if fake else tuned_target()
    result = run(
        RunRequest(
            path=path,
            kernel=kernel,
            settings=settings,
            proposer="tune",
            strategy="brute_force",
            candidates=len(values),
            max_evaluations=2 * len(values),
            use_cache=False,
            write_report=False,
        )
    )
    return result.accepted.note if result.accepted else "none accepted"


def llm(settings: Settings, work: Path, fake: bool) -> str:
    from dataclasses import replace

    from test_optimizer_llm import ScriptedLLM, fenced

    from kernel_lsp.optimizer.session import RunRequest, run

    path, kernel, _, values = fake_target(work) if fake else tuned_target()
    source = Path(path).read_text()
    script = {(1, i + 1): fenced(with_block(source, v), f"BLOCK={v}") for i, v in enumerate(values)}
    with ScriptedLLM(script, default="no idea") as server:
        settings = replace(
            settings, llm_base_url=server.base_url, llm_model="scripted-coder", llm_api_key="scripted"
        )
        result = run(
            RunRequest(
                path=path,
                kernel=kernel,
                settings=settings,
                proposer="llm",
                rounds=1,
                candidates=len(values),
                llm_concurrency=len(values),
                use_cache=False,
                write_report=False,
            )
        )
    if result.accepted is None:
        return "none accepted"
    block = re.search(r"#define BLOCK (\d+)", result.accepted.source)
    return f"BLOCK={block.group(1) if block else '?'}"


def check(settings: Settings, work: Path, fake: bool, compiled: dict[str, Any] = {}) -> tuple:  # noqa: B006
    from kernel_lsp.cli.check import run_checks
    from kernel_lsp.gpu_check import verify_checks

    if fake:
        files = []
        for i in range(8):
            cu = work / f"check{i}.cu"
            cu.write_text(FAKE_SOURCE + "// fake: slow\n")
            (work / f"check{i}.spec.py").write_text(FAKE_SPEC)
            files.append(str(cu))
    else:
        from kernel_lsp.check import collect_files

        files = collect_files([str(REPO / "samples")], settings.exclude).files
    key = (tuple(files), settings.archs()[0])
    if key not in compiled:  # compile once: only the GPU part is compared
        compiled[key] = run_checks(files, Workspace.fixed(settings), os.cpu_count() or 1)
    from copy import deepcopy

    checks = deepcopy(compiled[key])
    start = time.perf_counter()
    verify_checks(
        checks,
        Workspace.fixed(settings),
        log=lambda _: None,
        gpus=settings.gpu_devices,
        progress=lambda _: None,
    )
    check.last_eval_s = time.perf_counter() - start
    return tuple((Path(c.path).name, k.kernel, k.status) for c in checks for k in c.gpu_checks)


def startup(settings: Settings, work: Path, fake: bool) -> int:
    """Opening the GPUs alone (worker processes, Ray actors, device descriptions): the part of
    the other rows' wall time that more GPUs cannot shorten."""
    sessions, _ = Workspace.fixed(settings).open_gpus(settings.gpu_devices, log=lambda _: None)
    for s in sessions:
        s.close()
    return len(sessions)


def fake_target(work: Path) -> tuple[str, str, str, tuple[int, ...]]:
    cu = work / "vadd.cu"
    if not cu.exists():
        cu.write_text(FAKE_SOURCE)
        (work / "vadd.spec.py").write_text(FAKE_SPEC)
    return str(cu), "vadd", "BLOCK", (256, 128, 512, 1024)


def tuned_target() -> tuple[str, str, str, tuple[int, ...]]:
    path, kernel, param, values = TUNED
    return str(REPO / path), kernel, param, values


WORKLOADS = {"startup": startup, "tuner": tuner, "llm": llm, "check": check}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, help="N (default: every visible GPU; 2 fake ones without a GPU)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workloads", default="startup,tuner,llm,check")
    p.add_argument("--backends", default="local,ray")
    p.add_argument("--fake", action="store_true", help="fake GPUs even where a GPU is present")
    p.add_argument("--ray-address", help="a Ray cluster to join (default: start one here)")
    args = p.parse_args(argv)

    fake = args.fake or visible_gpu_count() == 0
    n = args.gpus or (2 if fake else visible_gpu_count())
    if fake:
        use_fake_gpus()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if "ray" in backends:
        import ray

        if args.ray_address:
            ray.init(address=args.ray_address, include_dashboard=False, log_to_driver=False)
        else:  # fake: N GPU resources; real: the GPUs Ray sees here
            ray.init(
                num_gpus=n if fake else None,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
    print(
        f"# devices: {'FAKE GPUs (runner no-GPU mode, no GPU here)' if fake else f'{n} GPUs'}; "
        f"1 vs {n}; repeat {args.repeat}; host CPUs: {os.cpu_count()}",
        flush=True,
    )
    rows = []
    for name in [w.strip() for w in args.workloads.split(",") if w.strip()]:
        work = WORKLOADS[name]
        for backend in backends:
            results: dict[int, list[Any]] = {}
            walls: dict[int, list[float]] = {}
            for count in (1, n):
                settings = Settings(evaluation_backend=backend, gpu_devices=str(count))
                for _ in range(args.repeat):
                    with tempfile.TemporaryDirectory() as tmp:
                        start = time.perf_counter()
                        outcome = work(settings, Path(tmp), fake)
                        wall = time.perf_counter() - start
                    if name == "check":
                        wall = check.last_eval_s
                    results.setdefault(count, []).append(outcome)
                    walls.setdefault(count, []).append(wall)
            one, many = statistics.median(walls[1]), statistics.median(walls[n])
            # Startup answers how many GPUs opened, which differs by design.
            same = all(r == results[c][0] for c in (1, n) for r in results[c]) and (
                name == "startup" or results[1][0] == results[n][0]
            )
            for count in (1, n):
                w = walls[count]
                rows.append(
                    [
                        name,
                        backend,
                        str(count),
                        f"{statistics.median(w):.2f}",
                        f"{min(w):.2f}-{max(w):.2f}",
                        str(len(w)),
                        f"{one / many:.2f}x" if count == n else "1.00x",
                        "yes" if same else "NO",
                        _short(results[count][0]),
                    ]
                )
            print(f"# {name} {backend}: done", file=sys.stderr, flush=True)
    head = ["workload", "backend", "GPUs", "median s", "min-max s", "n", "speedup", "same", "result"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def _short(result: Any) -> str:
    if isinstance(result, tuple):
        statuses = [s for *_, s in result]
        return f"{len(statuses)} kernels: " + ", ".join(
            f"{statuses.count(s)} {s}" for s in sorted(set(statuses))
        )
    return str(result)


if __name__ == "__main__":
    sys.exit(main())
