"""Evaluation on 1 GPU against N GPUs, through the local pool and through Ray: wall time, ratio,
which devices did the work, and whether the verdicts are the same.

Workloads (each measurement in a fresh child process, from an empty result cache):
- check: `check` GPU verification of spec'd sample files (default: a fixed subset of samples/,
  `--check-files` for others), files spread over the GPUs. Only the verification is timed (the
  files are compiled first, in the same child).
- tuner: one round of `optimize --proposer tune` (brute force, 8 points of the same tunables),
  its candidates checked at once, one per GPU. Timed: the round (the baseline before it and
  the run's start are in `wall`).
- llm:   one LLM round of 8 candidates from a scripted model (tests/scripted_llm.py: no network),
  whole-file answers, each with other BLOCK/ITEMS/VEC; code an LLM wrote runs judged (the
  sandbox), locally or in the Ray actor's judge.
- startup: opening the GPUs alone (workers, actors), which the other rows include.

Each row is printed (and flushed) as soon as it is measured. A measurement that runs past
`--timeout` is killed with its process group (its workers, its Ray actors die with their
driver) and its row says so; past `--deadline` the rest are skipped, each with a row.

On a machine without a GPU it runs on fake GPUs (the runner's no-GPU mode: each "slow" launch
sleeps 2 ms, compiles map sources to fake images, warm L2, 0.2 s sampling) and says so: the
figures then show the scheduling overhead and the parallelism, not GPU speed.

    python benchmarks/scaling.py [--gpus N] [--workloads check,tuner,llm] [--backends local,ray]
                                 [--repeat 1] [--timeout 75] [--deadline 285] [--fake]
                                 [--check-files samples/vector_add,samples/dot]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the scripted LLM
sys.path.insert(0, str(REPO / "tests" / "integration"))  # the fake compile

from kernel_lsp.config import Settings  # noqa: E402
from kernel_lsp.evaluation.pool import visible_gpu_count  # noqa: E402

# One file, 3 tunables (BLOCK x ITEMS x VEC = 48 points): the tuner's round and the LLM's answers.
TUNED = "samples/vector_add/vector_add_fp32.cu", "vector_add"
POINTS = [  # the LLM's 8 answers: (BLOCK, ITEMS, VEC)
    (128, 1, 1), (256, 2, 1), (512, 1, 4), (1024, 1, 1), (256, 4, 2), (128, 8, 4), (512, 2, 2), (256, 1, 4),
]  # fmt: skip
# Spec'd samples for `check` (10 files, fp32 and bf16; `--check-files samples` for all of them).
CHECK_FILES = [
    "samples/vector_add",
    "samples/dot",
    "samples/reduce_sum",
    "samples/softmax",
    "samples/rmsnorm",
]

# The fake GPU's tunable kernel: BLOCK=512 is the fake's instant kernel, every other value the
# 2 ms one, so the accepted candidate is known.
FAKE_SOURCE = """\
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#ifndef VEC
#define VEC 1
#endif
// kernel-lsp: launch vadd grid=cdiv(n, BLOCK) block=BLOCK
// kernel-lsp: tune BLOCK=256,128,512,1024 ITEMS=1,2,4,8 VEC=1,2,4
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i] * (ITEMS * VEC / (ITEMS * VEC));
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


def with_defines(source: str, **values: int) -> str:
    for name, value in values.items():
        source = re.sub(rf"#define {name} \d+", f"#define {name} {value}", source, count=1)
    return source


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


def count_device_use() -> dict[str, int]:
    """Jobs per device (host:index) that the optimizer's pools ran, counted as they borrow."""
    from kernel_lsp.evaluation.pool import BackendPool

    used: dict[str, int] = {}
    run = BackendPool.run

    def counted(self: Any, job: Any) -> Any:
        def on(member: Any) -> Any:
            backend = getattr(member, "backend", member)
            key = str(getattr(backend, "device_index", "?"))
            used[key] = used.get(key, 0) + 1
            return job(member)

        return run(self, on)

    BackendPool.run = counted  # type: ignore[method-assign]
    return used


# --- workloads: each returns (what must be equal across device counts, seconds timed, what) -----


def target(work: Path, fake: bool) -> tuple[str, str]:
    if not fake:
        return str(REPO / TUNED[0]), TUNED[1]
    cu = work / "vadd.cu"
    if not cu.exists():
        cu.write_text(FAKE_SOURCE)
        (work / "vadd.spec.py").write_text(FAKE_SPEC)
    return str(cu), "vadd"


class RoundClock:
    """The first round's wall: from its start to its last candidate."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.end: float | None = None

    def __call__(self, event: Any) -> None:
        if event.kind == "round_start" and event.round == 1:
            self.start = time.perf_counter()
        elif event.kind == "candidate" and event.round == 1:
            self.end = time.perf_counter()

    @property
    def seconds(self) -> float | None:
        return self.end - self.start if self.start is not None and self.end is not None else None


OFFERED: list[str] = []  # what a run offered: shown, not compared (near-equal candidates tie)


def _verdicts(result: Any) -> str:
    """The candidates' verdicts, compared across device counts."""
    statuses = [o.status.label for o in result.outcomes]
    OFFERED.append(result.accepted.note if result.accepted else "none")
    return ", ".join(f"{statuses.count(s)} {s}" for s in sorted(set(statuses)))


def tuner(settings: Settings, work: Path, fake: bool) -> tuple[str, float | None, str]:
    from kernel_lsp.optimizer.session import RunRequest, run

    path, kernel = target(work, fake)
    clock = RoundClock()
    result = run(
        RunRequest(
            path=path,
            kernel=kernel,
            settings=settings,
            proposer="tune",
            strategy="brute_force",
            rounds=1,
            candidates=8,
            use_cache=False,
            write_report=False,
        ),
        observers=[clock],
    )
    what = f"{Path(path).name} `{kernel}`: 1 round of {len(result.outcomes)} tuner points"
    return _verdicts(result), clock.seconds, what


def llm(settings: Settings, work: Path, fake: bool) -> tuple[str, float | None, str]:
    from scripted_llm import ScriptedClient

    from kernel_lsp.optimizer.proposers.llm import LlmProposer, LlmSettings
    from kernel_lsp.optimizer.session import RunRequest, run

    path, kernel = target(work, fake)
    source = Path(path).read_text()
    script = {
        (1, i + 1): "Here is the file:\n\n```cuda\n"
        + with_defines(source, BLOCK=b, ITEMS=it, VEC=v)
        + f"```\n\nBLOCK={b} ITEMS={it} VEC={v}."
        for i, (b, it, v) in enumerate(POINTS)
    }
    client = ScriptedClient(script, default="no idea")
    proposer = LlmProposer(
        LlmSettings(model="scripted-coder", concurrency=len(POINTS), retries=0), client=client
    )
    clock = RoundClock()
    result = run(
        RunRequest(
            path=path,
            kernel=kernel,
            settings=settings,
            proposer="llm",
            rounds=1,
            candidates=len(POINTS),
            use_cache=False,
            write_report=False,
        ),
        observers=[clock],
        proposer=proposer,
    )
    what = f"{Path(path).name} `{kernel}`: 1 LLM round of {len(result.outcomes)} whole-file answers (judged)"
    return _verdicts(result), clock.seconds, what


def check(settings: Settings, work: Path, fake: bool, files: list[str]) -> tuple[Any, float, str]:
    from kernel_lsp.check import collect_files
    from kernel_lsp.cli.check import run_checks
    from kernel_lsp.gpu_check import verify_checks
    from kernel_lsp.workspace import Workspace

    if fake:
        paths = []
        for i in range(8):
            cu = work / f"check{i}.cu"
            cu.write_text(FAKE_SOURCE + "// fake: slow\n")
            (work / f"check{i}.spec.py").write_text(FAKE_SPEC)
            paths.append(str(cu))
    else:
        paths = collect_files([str(REPO / f) for f in files], settings.exclude).files
    checks = run_checks(paths, Workspace.fixed(settings), os.cpu_count() or 1)
    start = time.perf_counter()
    verify_checks(
        checks,
        Workspace.fixed(settings),
        log=lambda _: None,
        gpus=settings.gpu_devices,
        progress=lambda _: None,
    )
    seconds = time.perf_counter() - start
    kernels = [k for c in checks for k in c.gpu_checks]
    used: dict[str, int] = {}
    for k in kernels:
        used[str(k.device_index)] = used.get(str(k.device_index), 0) + 1
    check.used = used  # type: ignore[attr-defined]
    statuses = [k.status for k in kernels]
    verdicts = ", ".join(f"{statuses.count(s)} {s}" for s in sorted(set(statuses)))
    what = f"{len(paths)} files, {len(kernels)} kernels verified and timed"
    # The verdicts compared across device counts: every kernel's, by file.
    per_kernel = ";".join(f"{Path(c.path).name}:{k.kernel}={k.status}" for c in checks for k in c.gpu_checks)
    digest = hashlib.sha256(per_kernel.encode()).hexdigest()[:6]
    return f"{verdicts} [{digest}]", seconds, what


def startup(settings: Settings, work: Path, fake: bool) -> tuple[str, float | None, str]:
    """Opening the GPUs alone (worker processes, Ray actors, device descriptions): the part of
    the other rows' wall time that more GPUs cannot shorten."""
    from kernel_lsp.workspace import Workspace

    sessions, _ = Workspace.fixed(settings).open_gpus(settings.gpu_devices, log=lambda _: None)
    names = sorted({f"{s.backend.host or 'local'}:{s.device.name if s.device else '?'}" for s in sessions})
    for s in sessions:
        s.close()
    return "opened", None, f"{len(sessions)} GPU(s): {', '.join(names)}"


WORKLOADS = ("startup", "check", "tuner", "llm")


def one(args: argparse.Namespace) -> int:
    """The child: one workload on one backend and device count; prints one JSON line."""
    name, backend, count = args.one
    if args.fake:
        use_fake_gpus()
    used = count_device_use()
    if backend == "ray":
        from kernel_lsp.evaluation.ray_backend import connect

        connect(args.ray_address)
    settings = Settings(evaluation_backend=backend, gpu_devices=count, cluster_address=args.ray_address)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        if name == "check":
            outcome, timed, what = check(settings, Path(tmp), args.fake, args.check_files.split(","))
            used = check.used  # type: ignore[attr-defined]
        else:
            outcome, timed, what = globals()[name](settings, Path(tmp), args.fake)
        wall = time.perf_counter() - start
    print(
        "RESULT "
        + json.dumps(
            {
                "outcome": outcome,
                "wall": wall,
                "timed": timed,
                "what": what,
                "used": used,
                "offered": OFFERED[-1] if OFFERED else "",
            }
        ),
        flush=True,
    )
    return 0


def measure(
    args: argparse.Namespace, name: str, backend: str, count: int, address: str | None, timeout: float
) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", name, backend, str(count), "--check-files", args.check_files]
    cmd += ["--fake"] if args.fake else []
    cmd += ["--ray-address", address] if address else []
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return {"error": f"timed out after {timeout:.0f} s (killed)"}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    tail = [line for line in err.strip().splitlines() if line.strip()][-1:] or [f"exit {proc.returncode}"]
    return {"error": f"failed: {tail[0][:120]}"}


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def start_ray(n: int, fake: bool) -> tuple[Any, str]:
    """A Ray head in this process over N GPUs (fake: N GPU resources); the children join it."""
    import ray

    ray.init(
        address="local", num_gpus=n, include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    return ray, ray.get_runtime_context().gcs_address


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--gpus", type=int, help="N (default: every visible GPU; 2 fake ones without a GPU)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--workloads", default="startup,tuner,llm,check")
    p.add_argument("--backends", default="local,ray")
    p.add_argument("--fake", action="store_true", help="fake GPUs even where a GPU is present")
    p.add_argument("--ray-address", help="a Ray cluster to join (default: start one here)")
    p.add_argument("--timeout", type=float, default=75.0, help="seconds per measurement (default 75)")
    p.add_argument("--deadline", type=float, default=285.0, help="seconds for the whole table (default 285)")
    p.add_argument("--check-files", default=",".join(CHECK_FILES))
    p.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        return one(args)

    args.fake = args.fake or visible_gpu_count() == 0
    n = args.gpus or (2 if args.fake else visible_gpu_count())
    if args.fake:
        os.environ["KERNEL_LSP_FAKE_GPU"] = "1"  # the Ray head's workers inherit it
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in names if w not in WORKLOADS]
    if unknown:
        p.error(f"unknown workload(s) {unknown}; known: {', '.join(WORKLOADS)}")
    began = time.perf_counter()
    ray, address = None, args.ray_address
    if "ray" in backends and not address:
        ray, address = start_ray(n, args.fake)
    print(
        f"# devices: {'FAKE GPUs (runner no-GPU mode, no GPU here)' if args.fake else f'{n} GPUs'}; "
        f"1 vs {n}; repeat {args.repeat}; timeout {args.timeout:g} s a measurement, deadline "
        f"{args.deadline:g} s; host CPUs: {os.cpu_count()}; ray: {address or 'not used'}",
        flush=True,
    )
    print("# timed: check = verification only; tuner, llm = the round (wall = the whole run)", flush=True)
    head = ["workload", "backend", "GPUs", "wall s", "timed s", "speedup", "jobs per GPU", "same", "verdicts"]
    widths = [8, 7, 4, 7, 7, 7, 12, 4, 0]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip(), flush=True)
    described: set[str] = set()
    try:
        for name in names:
            for backend in backends:
                timed: dict[int, float] = {}
                outcomes: dict[int, list[str]] = {}
                for count in (1, n):
                    for _ in range(args.repeat):
                        left = args.deadline - (time.perf_counter() - began)
                        if left < 5:
                            r: dict[str, Any] = {"error": "skipped: the table's deadline has passed"}
                        else:
                            r = measure(args, name, backend, count, address, min(args.timeout, left))
                        if "error" not in r and name not in described:
                            print(f"# {name}: {r['what']}", flush=True)
                            described.add(name)
                        row = [name, backend, str(count)]
                        if "error" in r:
                            print(
                                "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False))
                                + "  "
                                + r["error"],
                                flush=True,
                            )
                            continue
                        seconds = r["timed"] if r["timed"] is not None else r["wall"]
                        outcomes.setdefault(count, []).append(r["outcome"])
                        timed[count] = min(timed.get(count, seconds), seconds)
                        base = timed.get(1)
                        speedup = f"{base / seconds:.2f}x" if base and count != 1 else "1.00x"
                        first = outcomes[min(outcomes)][0]
                        same = "yes" if all(o == first for got in outcomes.values() for o in got) else "NO"
                        if name == "startup":
                            same, speedup = "-", "-"
                        used = "+".join(str(v) for _, v in sorted(r["used"].items())) or "-"
                        verdicts = str(r["outcome"]) + (
                            f"; offered: {r['offered']}" if r.get("offered") else ""
                        )
                        row += [f"{r['wall']:.2f}", f"{seconds:.2f}", speedup, used, same, verdicts]
                        print(
                            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(),
                            flush=True,
                        )
    finally:
        if ray is not None:
            ray.shutdown()
    print(f"# total {time.perf_counter() - began:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
