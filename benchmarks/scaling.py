"""Evaluation on 1 GPU against N GPUs, through the local pool and through Ray: wall time, ratio,
which devices did the work, whether the verdicts are the same, and where each row's time went.

Workloads (each measurement in a fresh child process, from an empty result cache):
- tuner: one round of `optimize --proposer tune` (brute force) on samples/vector_add/
  vector_add_fp32.cu, kernel `vector_add`: 8 points of BLOCK x ITEMS x VEC, checked at once, one
  per GPU. Timed: the round (the run's start and the baseline before it, the A/B after it are in
  `wall`).
- llm: one LLM round of 8 candidates on the same file from a scripted model (tests/scripted_llm.py:
  no network), whole-file answers, each with other BLOCK/ITEMS/VEC; code an LLM wrote runs judged
  (the sandbox), locally or in the Ray actor's judge; then the A/B and the proof gate
  (compute-sanitizer) of the fastest. Timed: the round.
- check: `check`'s GPU verification of 6 spec'd sample files (samples/vector_add, dot,
  reduce_sum: fp32 and bf16, one kernel each, their own specs at their full sizes;
  `--check-files samples/vector_add,samples/dot,samples/reduce_sum,samples/softmax,samples/rmsnorm`
  for the 10 of the night of 2026-11-28, whose four rows do not fit the table's 5 minutes beside
  the optimize rounds), files spread over the GPUs. Timed: the files on the GPUs
  (each file's spec load, build for the GPU's arch, verification and timing, on the GPU it
  was lent); the files' compile checks before, opening and closing the GPUs are in `wall`.
- startup (only when named in `--workloads`): opening the GPUs alone (workers, actors), which
  every other row includes and shows as `open GPUs` in its `#` line.

The optimize rounds use the benchmark's own spec for vector_add_fp32.cu (`bench_spec()`: the sample's
inputs and checks, verified up to 1M elements and timed at 4M instead of 32M), so that a round's
work is the GPUs' (verification, timing) and a row takes seconds; the sample's spec and the judge's
defaults are unchanged. The tools after the gates are off unless `--tools`: ncu profiles (the
baseline's and the best's, ~5 s each on an H200) and the LLM run's proof gate (compute-sanitizer
on the fastest candidate, ~4.5 s): each runs on one GPU, outside the round, and only lengthens
`wall`; the candidates' verdicts compared across device counts do not depend on them.

What stays serial with more GPUs, so a round's ratio is below N: in `wall`, the start (GPUs, spec,
the original's compile), the baseline (a check on one GPU) and after the round the A/B and the
proof gate on one GPU; in the round, the compiles of the candidates (NVRTC in 2 shared worker
processes, ~0.1-0.5 s each, overlapped with the GPUs' checks and done before a GPU is borrowed)
and the split of 8 candidates over the GPUs (4+4 at best). Under each row a `#` line says where
the time went: `phases s` (start, baseline, ncu, round, after) and `calls` (count, seconds summed
over threads, most at once: compiles, GPU checks, waits for a free GPU, A/B, sanitizer). A row
killed at `--timeout` still prints what it had done.

Each row is printed (and flushed) as soon as it is measured. The rows run pair by pair (a
workload on a backend: 1 GPU, then N), and the `--deadline` is shared: each pair gets an equal
share of what is left when it starts (what an earlier pair left over goes to the later ones), and
in a pair a 1-GPU row may take 2/3 of what is left of the pair's share, an N-GPU row the rest, so
that no workload's rows eat the time of those after them (before, the Ray `check` rows came last
and got 24 s). A measurement that runs past its limit (`--timeout`, or its share) is killed with
its process group (its workers, its Ray actors die with their driver) and its row says which; a
row whose share is gone is skipped with a row that says so. The defaults (45 s a measurement,
270 s in all, tuner, llm and check) aim at 5 minutes on 2 H200s for the 12 rows.

On a machine without a GPU it runs on fake GPUs (the runner's no-GPU mode: each "slow" launch
sleeps 2 ms, compiles map sources to fake images, warm L2, 0.2 s sampling) and says so: the
figures then show the scheduling overhead and the parallelism, not GPU speed.

    python benchmarks/scaling.py [--gpus N] [--workloads tuner,llm,check,startup] [--backends local,ray]
                                 [--repeat 1] [--timeout 45] [--deadline 270] [--fake] [--tools]
                                 [--check-files samples/vector_add,samples/dot]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
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
# Spec'd samples for `check` (6 files, fp32 and bf16; `--check-files samples` for all of them).
CHECK_FILES = ["samples/vector_add", "samples/dot", "samples/reduce_sum"]

# The benchmark's spec for TUNED on a GPU: the sample's own (its inputs, checks and reference),
# its sizes without the 32M-element case, timed at 4M elements (48 MB a launch: past the H200's L2).
SAMPLE_SPEC = REPO / "samples" / "vector_add" / "vector_add_fp32.spec.py"
SAMPLE_SIZES = 'sizes=[{"n": 1}, {"n": 3}, {"n": 1000}, {"n": 65_537}, {"n": 1_000_003}, {"n": 1 << 25}],'
BENCH_SIZES = 'sizes=[{"n": 1}, {"n": 3}, {"n": 1000}, {"n": 65_537}, {"n": 1_000_003}],\n    timing_sizes=[{"n": 1 << 22}],'


def bench_spec() -> str:
    """The sample's spec text with the benchmark's sizes (fails loudly if the sample's changed)."""
    text = SAMPLE_SPEC.read_text()
    if SAMPLE_SIZES not in text:
        raise SystemExit(f"scaling.py: {SAMPLE_SPEC} no longer has the sizes line BENCH_SIZES replaces")
    return text.replace(SAMPLE_SIZES, BENCH_SIZES)


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
    """Fake GPU workers everywhere; a source's fake image follows its BLOCK (or `// fake: X`).
    The backends this process opens are fake (the engine's default, set here as a test sets it)
    and tell their workers and Ray actors so themselves."""
    from test_evaluation import VADD_MANGLED, artifact

    from kernel_lsp.evaluation import choose, local
    from kernel_lsp.gpu import GpuSession
    from kernel_lsp.model import TimingSettings

    local.FAKE_GPU_DEFAULT = True

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


class Phases:
    """Where a measurement's seconds went: spans of the driver's calls (count, seconds summed over
    threads, most at once) and the optimizer's phases from its progress events. Printed as a `#`
    line under the row, so a GPU run says where its time goes."""

    def __init__(self) -> None:
        self.began = time.perf_counter()
        self._lock = threading.Lock()
        self.spans: dict[str, list[float]] = {}  # name -> [count, seconds, running, most at once]
        self.marks: list[tuple[str, float]] = []  # (optimizer event, seconds since began)

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        original = getattr(owner, attr)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                span = self.spans.setdefault(name, [0, 0.0, 0, 0])
                span[2] += 1
                span[3] = max(span[3], span[2])
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                with self._lock:
                    span[0] += 1
                    span[1] += time.perf_counter() - start
                    span[2] -= 1

        setattr(owner, attr, timed)

    def __call__(self, event: Any) -> None:
        """An optimizer observer: the first time of each phase's event."""
        kind = "round" if event.kind == "round_start" else event.kind
        if kind in ("baseline", "profile", "round", "candidate", "prove", "compare", "done"):
            self.marks.append((kind, time.perf_counter() - self.began))

    def timeline(self) -> str:
        """Optimizer phases: start (GPUs opened, spec loaded, original compiled) until the
        baseline, the baseline's check, its ncu profile, the round, what followed (A/B, proof,
        profile of the best)."""
        if not any(kind == "baseline" for kind, _ in self.marks):
            return ""  # not an optimize run
        firsts: dict[str, float] = {}
        for kind, t in self.marks:
            firsts.setdefault(kind, t)
        last_candidate = max((t for k, t in self.marks if k == "candidate"), default=None)
        end = firsts.get("done", time.perf_counter() - self.began)
        points = [
            ("start", 0.0),
            ("baseline", firsts.get("baseline")),
            ("ncu", firsts.get("profile")),
            ("round", firsts.get("round")),
            ("after", last_candidate),
            ("end", end),
        ]
        known = [(n, t) for n, t in points if t is not None]
        return " ".join(f"{n} {t1 - t0:.2f}" for (n, t0), (_, t1) in itertools.pairwise(known))

    def render(self) -> str:
        parts = [
            f"{n} {int(c)}x {s:.2f}"
            + (f" ({int(most)} at once)" if most > 1 else "")
            + (f" [{int(running)} still running]" if running else "")
            for n, (c, s, running, most) in self.spans.items()
        ]
        line = self.timeline()
        return ("phases s: " + line + " | " if line else "") + "calls (n, s summed): " + ", ".join(parts)


PHASES = Phases()
FILES_ON_GPUS = "files on the GPUs"


def instrument(phases: Phases) -> None:
    """Time the driver's calls that a round is made of (after the fake GPU's own patches)."""
    from kernel_lsp import gpu
    from kernel_lsp.evaluation.pool import BackendPool
    from kernel_lsp.gpu import GpuSession
    from kernel_lsp.optimizer import evaluator
    from kernel_lsp.workspace import Workspace

    phases.wrap(Workspace, "open_gpus", "open GPUs")
    phases.wrap(evaluator.Evaluator, "compile", "compile (gate 1)")
    phases.wrap(GpuSession, "compile", "device compile")
    phases.wrap(GpuSession, "check", "GPU check")
    phases.wrap(GpuSession, "compare", "A/B")
    phases.wrap(GpuSession, "add_occupancy", "ncu")
    phases.wrap(GpuSession, "prove", "sanitizer")
    phases.wrap(GpuSession, "sandboxed_session", "judge twin")
    phases.wrap(BackendPool, "map", FILES_ON_GPUS)  # check's files spread over the GPUs
    phases.wrap(Workspace, "device_options", "file options")
    phases.wrap(gpu, "load_specs_isolated", "spec load")
    # Waiting for a free GPU: the pool's queue.
    original_init = BackendPool.__init__

    def init(self: Any, members: Any) -> None:
        original_init(self, members)
        phases.wrap(self._idle, "get", "wait for a GPU")

    BackendPool.__init__ = init  # type: ignore[method-assign]


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


def _spec_note(fake: bool) -> str:
    return "" if fake else "; benchmark spec: verified n=1..1000003, timed n=4194304"


def tuner(settings: Settings, work: Path, fake: bool) -> tuple[str, float | None, str]:
    from kernel_lsp.optimizer.session import RunRequest, run

    path, kernel = target(work, fake)
    clock = RoundClock()
    result = run(
        RunRequest(
            path=path,
            kernel=kernel,
            settings=settings,
            spec_source=None if fake else bench_spec(),
            proposer="tune",
            strategy="brute_force",
            rounds=1,
            candidates=8,
            use_cache=False,
            write_report=False,
        ),
        observers=[clock, PHASES],
    )
    what = f"{Path(path).name} `{kernel}`: 1 round of {len(result.outcomes)} tuner points" + _spec_note(fake)
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
            spec_source=None if fake else bench_spec(),
            proposer="llm",
            rounds=1,
            candidates=len(POINTS),
            use_cache=False,
            write_report=False,
        ),
        observers=[clock, PHASES],
        proposer=proposer,
    )
    what = (
        f"{Path(path).name} `{kernel}`: 1 LLM round of {len(result.outcomes)} whole-file answers (judged)"
        + _spec_note(fake)
    )
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
    start = time.perf_counter()
    checks = run_checks(paths, Workspace.fixed(settings), os.cpu_count() or 1)
    PHASES.spans["compile files (untimed)"] = [len(paths), time.perf_counter() - start, 0, 0]
    start = time.perf_counter()
    verify_checks(
        checks,
        Workspace.fixed(settings),
        log=lambda _: None,
        gpus=settings.gpu_devices,
        progress=lambda _: None,
    )
    # Timed: the files' verification on the GPUs, from the first file lent to a GPU to the last
    # one's verdict; opening the GPUs before it and closing them after are in `wall` (the
    # startup row).
    spread = PHASES.spans.get(FILES_ON_GPUS)
    seconds = spread[1] if spread else time.perf_counter() - start
    kernels = [k for c in checks for k in c.gpu_checks]
    used: dict[str, int] = {}
    for k in kernels:
        used[str(k.device_index)] = used.get(str(k.device_index), 0) + 1
    check.used = used  # type: ignore[attr-defined]
    statuses = [k.status for k in kernels]
    verdicts = ", ".join(f"{statuses.count(s)} {s}" for s in sorted(set(statuses)))
    names = sorted({Path(c.path).name for c in checks})
    what = f"{len(paths)} files, {len(kernels)} kernels verified and timed ({', '.join(names)})"
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


def tools_off() -> None:
    """No ncu, no compute-sanitizer, here and in the Ray head's workers started after: the run
    notes "not profiled", "not proven" and goes on."""
    os.environ["KERNEL_LSP_NCU"] = "/nonexistent/ncu"
    os.environ["KERNEL_LSP_COMPUTE_SANITIZER"] = "/nonexistent/compute-sanitizer"


def one(args: argparse.Namespace) -> int:
    """The child: one workload on one backend and device count; prints one JSON line."""
    name, backend, count = args.one
    if args.fake:
        use_fake_gpus()
    if not args.tools:
        tools_off()
    used = count_device_use()
    instrument(PHASES)
    if backend == "ray":
        from kernel_lsp.evaluation.ray_backend import connect

        connect(args.ray_address)
    # Killed past --timeout: say first where the time went so far (the parent reads it). After
    # Ray's start, which sets a SIGTERM handler of its own.
    signal.signal(signal.SIGTERM, _say_phases_and_exit)
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
                "phases": PHASES.render(),
            }
        ),
        flush=True,
    )
    return 0


def _say_phases_and_exit(signum: int, frame: Any) -> None:
    print("PARTIAL " + json.dumps({"phases": PHASES.render()}), flush=True)
    os._exit(1)


def row_limit(pair_left_s: float, weights_left: list[int], timeout_s: float) -> tuple[float, bool]:
    """A row's limit: its weight's part of what is left of its pair's share (`weights_left`: this
    row's weight first, then the pair's rows after it: 2 a 1-GPU row, 1 an N-GPU row), never over
    `timeout_s`; and whether the share, not `timeout_s`, set it."""
    share = pair_left_s * weights_left[0] / sum(weights_left)
    return (share, True) if share < timeout_s else (timeout_s, False)


def measure(
    args: argparse.Namespace,
    name: str,
    backend: str,
    count: int,
    address: str | None,
    timeout: float,
    by_share: bool = False,
) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", name, backend, str(count), "--check-files", args.check_files]
    cmd += ["--fake"] if args.fake else []
    cmd += ["--tools"] if args.tools else []
    cmd += ["--ray-address", address] if address else []
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            out, _ = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a grandchild in its own session holds the pipe
            out = ""
        partial = [json.loads(x[len("PARTIAL ") :]) for x in out.splitlines() if x.startswith("PARTIAL ")]
        why = " at its share of the table's deadline" if by_share else ""
        return {"error": f"timed out after {timeout:.0f} s (killed{why})", **(partial[-1] if partial else {})}
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
    p.add_argument("--workloads", default="tuner,llm,check")
    p.add_argument("--backends", default="local,ray")
    p.add_argument("--fake", action="store_true", help="fake GPUs even where a GPU is present")
    p.add_argument("--ray-address", help="a Ray cluster to join (default: start one here)")
    p.add_argument("--timeout", type=float, default=45.0, help="seconds per measurement (default 45)")
    p.add_argument("--deadline", type=float, default=270.0, help="seconds for the whole table (default 270)")
    p.add_argument(
        "--tools", action="store_true", help="keep ncu profiles and the compute-sanitizer proof gate (serial)"
    )
    p.add_argument("--check-files", default=",".join(CHECK_FILES))
    p.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        return one(args)

    args.fake = args.fake or visible_gpu_count() == 0
    n = args.gpus or (2 if args.fake else visible_gpu_count())
    if not args.tools:
        tools_off()
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
    print("# timed: check = the files on the GPUs; tuner, llm = the round (wall = the whole run)", flush=True)
    tools = "on" if args.tools else "off (--tools)"
    print(f"# ncu profiles and the proof gate (compute-sanitizer): {tools}", flush=True)
    head = ["workload", "backend", "GPUs", "wall s", "timed s", "speedup", "jobs per GPU", "same", "verdicts"]
    widths = [8, 7, 4, 7, 7, 7, 12, 4, 0]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip(), flush=True)
    described: set[str] = set()
    pairs_left = len(names) * len(backends)
    try:
        for name in names:
            for backend in backends:
                timed: dict[int, float] = {}
                outcomes: dict[int, list[str]] = {}
                # This pair's share of what is left of the table's deadline.
                pair_began = time.perf_counter()
                pair_share = (args.deadline - (pair_began - began)) / pairs_left
                pairs_left -= 1
                weights = [2 if count == 1 else 1 for count in (1, n) for _ in range(args.repeat)]
                for count in (1, n):
                    for _ in range(args.repeat):
                        left = args.deadline - (time.perf_counter() - began)
                        limit, by_share = row_limit(
                            pair_share - (time.perf_counter() - pair_began), weights, min(args.timeout, left)
                        )
                        weights.pop(0)
                        if left < 5:
                            r: dict[str, Any] = {"error": "skipped: the table's deadline has passed"}
                        elif limit < 5:
                            r = {"error": "skipped: its share of the table's deadline has passed"}
                        else:
                            r = measure(args, name, backend, count, address, limit, by_share)
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
                            if r.get("phases"):
                                print(f"#   {r['phases']}", flush=True)
                            continue
                        seconds = r["timed"] if r["timed"] is not None else r["wall"]
                        outcomes.setdefault(count, []).append(r["outcome"])
                        timed[count] = min(timed.get(count, seconds), seconds)
                        base = timed.get(1)
                        # No 1-GPU figure (its row killed or skipped): no ratio, rather than 1.00x.
                        speedup = "1.00x" if count == 1 else f"{base / seconds:.2f}x" if base else "-"
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
                        if r.get("phases"):
                            print(f"#   {r['phases']}", flush=True)
    finally:
        if ray is not None:
            ray.shutdown()
    print(f"# total {time.perf_counter() - began:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
