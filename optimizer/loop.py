"""The FSR loop (Feature Search and Reinforcement, arXiv 2506.09092).

Each round the proposer offers N candidates; each goes through three gates in order — NVRTC
compile, the function validator (GPU verifier against the spec's reference and the original
kernel's outputs), the performance profiler (timing). Compiler logs and mismatch reports of the
failed ones go into the next round's prompt; the fastest correct candidate, with its figures,
seeds the next round. The loop stops after D rounds, when the time budget is spent, when a round
brings no improvement, or when the proposer has nothing more to offer.

Acceptance: the fastest correct candidate is timed against the original interleaved (A B A B);
it is offered only when correct on every case AND the lower bound of the speedup's bootstrap
interval clears `min_speedup`. Otherwise the verdict says why nothing was offered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from kernel_lsp.gpu_reports import ProfileReport, SanitizerReport
from kernel_lsp.spec import Spec

from .cache import ResultCache
from .entry import signature_problem
from .evaluator import Evaluator, compile_log, launch_problem, resources_of
from .features import Features, Profile
from .model import (
    Comparison,
    Figures,
    Outcome,
    Proposal,
    Resources,
    RoundSummary,
    RunResult,
    Status,
    source_hash,
)
from .observers import ProgressEvent
from .proposers.base import Proposer, RoundContext
from .static_checks import NEW_GLOBAL, inspect_candidate

log = logging.getLogger(__name__)
IMPROVEMENT = 0.01  # a round "improves" when its best is at least 1 % faster than the best before


@dataclass
class LoopSettings:
    rounds: int | None = 3  # None: until the proposer has nothing more to offer
    candidates: int = 4
    time_budget_s: float | None = None
    min_speedup: float = 1.02  # the A/B lower bound must clear this
    patience: int = 1  # rounds without improvement before stopping (proposers that want it)
    max_evaluations: int = 256
    compare_top: int = 2  # A/B this many of the fastest candidates, best first, until one passes
    # Candidates that declare `__device__`/`__managed__` variables the original did not have are
    # rejected (state that outlives a launch is how results get memoised); True runs them.
    allow_new_globals: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Target:
    """What is optimized: one spec'd kernel (or pipeline) of one file, as the run started."""

    path: str
    source: str
    spec: Spec
    kernels: list[str]  # the launched kernels, in order
    spec_source: str | None = None

    @property
    def kernel(self) -> str:
        return self.spec.kernel

    @property
    def entry(self) -> str | None:
        """The host function an entry spec names: candidates rewrite the whole file around it."""
        return (self.spec.entry or self.spec.kernel) if self.spec.is_entry else None


@dataclass
class _State:
    baseline: Outcome
    seen: dict[str, Outcome] = field(default_factory=dict)
    evaluations: int = 0
    allow_new_globals: bool = False


def _emit(observers: Iterable[Callable[[ProgressEvent], None]], event: ProgressEvent) -> None:
    for obs in observers:
        try:
            obs(event)
        except Exception:
            log.exception("progress observer failed")


def _outcome_from_cache(d: dict[str, Any], base: Outcome) -> Outcome:
    base.status = Status(d["status"])
    base.message = d.get("message", "")
    base.figures = Figures(**d["figures"]) if d.get("figures") else None
    base.resources = [Resources(**r) for r in d.get("resources", [])]
    base.cost_s = float(d.get("cost_s", 0.0))
    base.cached = True
    return base


def evaluate(
    proposal: Proposal,
    oid: str,
    round_no: int,
    target: Target,
    evaluator: Evaluator,
    cache: ResultCache | None,
    state: _State | None,
    ran: dict[str, Outcome] | None = None,
) -> Outcome:
    """One candidate through the three gates (`ran`: gates already run, by source hash, in a
    parallel round)."""
    start = time.perf_counter()
    out = Outcome(
        id=oid,
        round=round_no,
        origin=proposal.origin,
        status=Status.NO_CODE,
        note=proposal.note,
        source=proposal.source,
        config=proposal.config,
        trusted=proposal.trusted,
    )
    if proposal.source is None:
        out.status = proposal.failure or Status.NO_CODE
        out.message = proposal.detail
        return out
    out.extraction = proposal.detail  # what extraction did to the answer (spliced, includes added)
    key = source_hash(proposal.source)
    if state is not None and key in state.seen:
        earlier = state.seen[key]
        out.status = Status.DUPLICATE
        out.message = f"identical to {earlier.id}"
        out.figures, out.resources, out.speedup = earlier.figures, earlier.resources, earlier.speedup
        return out
    if state is not None:
        findings = inspect_candidate(proposal.source, target.source, host=target.entry is not None)
        out.findings = [str(f) for f in findings]
        new_globals = [f for f in findings if f.kind == NEW_GLOBAL]
        if new_globals and not state.allow_new_globals:
            out.status = Status.UNSAFE
            out.message = (
                "rejected before running: "
                + "; ".join(str(f) for f in new_globals)
                + " (the setting optimizer.allowNewGlobals allows them)"
            )
            state.seen[key] = out
            out.seconds = time.perf_counter() - start
            return out
    cached = cache.get(_kind("check", evaluator), proposal.source) if cache else None
    if cached is not None:
        _outcome_from_cache(cached, out)
    elif ran is not None and key in ran:
        done = ran[key]
        out.status, out.message, out.figures = done.status, done.message, done.figures
        out.resources, out.cost_s = done.resources, done.cost_s
    else:
        _run_gates(out, proposal.source, target, evaluator, proposal.trusted)
        out.cost_s = time.perf_counter() - start
        if cache is not None:
            cache.put(
                _kind("check", evaluator),
                proposal.source,
                {
                    "status": out.status.value,
                    "message": out.message,
                    "figures": asdict(out.figures) if out.figures else None,
                    "resources": [asdict(r) for r in out.resources],
                    "cost_s": out.cost_s,
                },
            )
    if state is not None:
        state.seen[key] = out
        if not out.cached:
            state.evaluations += 1
        base = state.baseline.latency_s
        if out.figures and base:
            out.speedup = base / out.figures.latency_s
    out.seconds = time.perf_counter() - start
    return out


def _gates_in_parallel(
    proposals: list[Proposal],
    target: Target,
    evaluator: Evaluator,
    cache: ResultCache | None,
    state: _State,
    stop: Callable[[], bool],
) -> dict[str, Outcome]:
    """The gates of a round's new candidates, run at once on the evaluator's GPUs (one candidate
    per GPU at a time, the next ones compiling meanwhile), by source hash. Duplicates and cached ones are left to `evaluate`, in order, so a
    parallel round decides exactly what a serial one would. Once `stop()` (cancel, time budget),
    candidates not yet started are not."""
    fresh: dict[str, Proposal] = {}
    for p in proposals:
        if p.source is None:
            continue
        key = source_hash(p.source)
        if (
            key in state.seen
            or key in fresh
            or (cache and cache.get(_kind("check", evaluator), p.source) is not None)
        ):
            continue
        findings = inspect_candidate(p.source, target.source, host=target.entry is not None)
        if any(f.kind == NEW_GLOBAL for f in findings) and not state.allow_new_globals:
            continue  # `evaluate` rejects it before it runs
        fresh[key] = p

    def gates(p: Proposal) -> Outcome | None:
        if stop() or p.source is None:
            return None
        start = time.perf_counter()
        out = Outcome(id="", round=0, origin="", status=Status.NO_CODE, source=p.source)
        _run_gates(out, p.source, target, evaluator, p.trusted)
        out.cost_s = time.perf_counter() - start
        return out

    if len(fresh) < 2:
        return {}
    # Twice as many threads as GPUs: a candidate compiles (gate 1, on the CPU) while the ones
    # before it hold the GPUs; the pool still lends each GPU to one candidate at a time.
    with ThreadPoolExecutor(max_workers=2 * evaluator.parallelism, thread_name_prefix="fsr-eval") as ex:
        futures = {key: ex.submit(gates, p) for key, p in fresh.items()}
    return {key: out for key, f in futures.items() if (out := f.result()) is not None}


def _run_gates(
    out: Outcome, source: str, target: Target, evaluator: Evaluator, trusted: bool = False
) -> None:
    if target.entry is not None:
        _run_entry_gates(out, source, target, evaluator, trusted)
        return
    # Gate 0, for device code an LLM wrote: no include or directive that makes the compiler read
    # a file the user did not name (it would land in the kernel's constants, or in the errors).
    if not trusted:
        reads = evaluator.engine.files_read(source, target.source, target.path, evaluator.options.include_dirs)
        if reads:
            out.status = Status.UNSAFE
            out.message = "not compiled (the fence): " + "; ".join(f.describe() for f in reads)
            return
    # Gate 1: the compiler (NVRTC, or nvcc for a file with host code).
    compiled = evaluator.compile(source)
    if not compiled.ok:
        out.status = Status.COMPILE_ERROR
        out.message = _with_extraction(out, compile_log(compiled))
        return
    # Each launched kernel must be in the module: by source name, template instance (mangled
    # entries from the resource report), or the CUBIN's own symbols.
    missing = evaluator.engine.missing_kernels(compiled, target.kernels)
    if missing:
        out.status = Status.COMPILE_ERROR
        out.message = _with_extraction(out, "; ".join(missing) + " (renamed or templated?)")
        return
    defines = evaluator.options.defines
    problem = launch_problem(compiled, source, target.spec, target.kernels, defines)
    if problem:
        out.status = Status.CANNOT_LAUNCH
        out.message = problem
        return
    out.resources = resources_of(compiled, source, target.spec, target.kernels, defines)
    _verify_and_time(out, source, target, evaluator, trusted)


def _run_entry_gates(out: Outcome, source: str, target: Target, evaluator: Evaluator, trusted: bool) -> None:
    """The gates of an entry spec's candidate: its entry keeps the original's signature (the
    user's program calls it), the fence passes its host code (an LLM's: before nvcc reads it, and
    its host object before it is linked), the shared library builds, its launches fit the arch;
    then the same verification and timing as kernels, in a sandboxed worker unless trusted."""
    assert target.entry is not None
    if source != target.source:
        problem = signature_problem(source, target.source, target.entry)
        if problem:
            out.status = Status.CANNOT_LAUNCH
            out.message = _with_extraction(out, problem)
            return
    build = evaluator.build(source, target.source, trusted)
    if build.fence:
        out.status = Status.UNSAFE
        out.message = "host code not run (the fence): " + "; ".join(f.describe() for f in build.fence)
        return
    if not build.result.ok:
        out.status = Status.COMPILE_ERROR
        out.message = _with_extraction(out, compile_log(build.result))
        return
    defines = evaluator.options.defines
    problem = launch_problem(build.result, source, target.spec, [], defines)
    if problem:
        out.status = Status.CANNOT_LAUNCH
        out.message = problem
        return
    out.resources = resources_of(build.result, source, target.spec, [], defines)
    _verify_and_time(out, source, target, evaluator, trusted)


def _kind(kind: str, evaluator: Evaluator) -> str:
    """A cached result's kind: judged figures (end to end) and plain ones (CUDA events) differ."""
    return f"{kind}-judged" if getattr(evaluator, "judge_everything", False) else kind


def _with_extraction(out: Outcome, message: str) -> str:
    """A gate's message about code the user never wrote says where that code came from."""
    return f"{message}\n(extraction: {out.extraction})" if out.extraction else message


def _verify_and_time(out: Outcome, source: str, target: Target, evaluator: Evaluator, trusted: bool) -> None:
    """Gates 2 and 3: the GPU verifier, then timing."""
    check = evaluator.check(source, target.source, trusted=trusted)
    out.figures = check.figures
    if check.suspicious:
        out.status = Status.SUSPICIOUS
        out.message = "\n".join(check.problems)
    elif not check.ok:
        out.status = Status.INCORRECT
        out.message = "\n".join(check.problems) or "verification failed"
        out.figures = None
    elif check.figures is None:
        out.status = Status.INCORRECT
        out.message = "verified, but the timing produced no figures"
    else:
        out.status = Status.CORRECT


def optimize(
    target: Target,
    proposer: Proposer,
    evaluator: Evaluator,
    settings: LoopSettings | None = None,
    observers: Iterable[Callable[[ProgressEvent], None]] = (),
    cancel: threading.Event | None = None,
    cache: ResultCache | None = None,
) -> RunResult:
    settings = settings or LoopSettings()
    cancel = cancel or threading.Event()
    observers = list(observers)
    started = time.perf_counter()
    hw = evaluator.hardware()
    result = RunResult(
        path=target.path,
        kernel=target.kernel,
        proposer=proposer.name,
        original=target.source,
        baseline=Outcome("baseline", 0, "original", Status.NO_CODE, source=target.source),
        device=hw.name if hw else "",
        settings={"loop": settings.to_dict(), **proposer.settings()},
    )

    def emit(kind: str, round_no: int, message: str, outcome: Outcome | None = None) -> None:
        correct = [o for o in result.outcomes if o.status is Status.CORRECT]
        best = max((o.speedup or 0.0 for o in correct), default=None)
        _emit(
            observers,
            ProgressEvent(
                kind=kind,
                round=round_no,
                rounds=settings.rounds,
                proposed=len(result.outcomes),
                compiled=sum(1 for o in result.outcomes if o.status not in _NOT_COMPILED),
                correct=len(correct),
                best_speedup=best,
                message=message,
                outcome=outcome,
            ),
        )

    # The kernel as written: the baseline every candidate is measured against, on the road the
    # candidates take (judged, unless every proposal is the user's own code).
    evaluator.original = target.source
    evaluator.judge_everything = not proposer.proposes_trusted
    emit("baseline", 0, "measuring the kernel as written")
    baseline = evaluate(
        Proposal("original", target.source, trusted=True), "baseline", 0, target, evaluator, cache, None
    )
    baseline.origin = "original"
    result.baseline = baseline
    if baseline.status is not Status.CORRECT:
        result.verdict = f"the kernel as written does not pass its gates ({baseline.status.label}): {baseline.message.splitlines()[0] if baseline.message else ''}"
        result.stop_reason = "baseline failed"
        result.seconds = time.perf_counter() - started
        emit("done", 0, result.verdict)
        return result
    baseline.speedup = 1.0
    proposer.seed(baseline)
    state = _State(
        baseline=baseline,
        seen={source_hash(target.source): baseline},
        allow_new_globals=settings.allow_new_globals,
    )
    best = baseline
    emit("profile", 0, "profiling the kernel as written (ncu)")
    _profile(baseline, evaluator, cache)
    features = Features(target.kernel, target.kernels, target.path, target.source, target.spec, hw)
    features.profile = Profile(baseline.figures, baseline.resources, baseline.profile)
    result.features = features.render()
    last_round: list[Outcome] = []
    stalled = 0
    round_no = 0
    while True:
        round_no += 1
        if settings.rounds is not None and round_no > settings.rounds:
            result.stop_reason = f"{settings.rounds} round(s) done"
            break
        if _over_budget(started, settings):
            result.stop_reason = f"time budget of {settings.time_budget_s:g} s spent"
            break
        if cancel.is_set():
            result.stop_reason = "cancelled"
            break
        if state.evaluations >= settings.max_evaluations:
            result.stop_reason = f"evaluation budget of {settings.max_evaluations} spent"
            break
        emit(
            "round_start",
            round_no,
            f"round {round_no}: asking {proposer.name} for {settings.candidates} candidates",
        )
        ctx = RoundContext(round_no, settings.candidates, features, best, last_round, cancel)
        proposals = proposer.propose(ctx)
        if not proposals:
            result.stop_reason = "the proposer has nothing more to offer" + (
                " (search finished)" if not proposer.stop_when_stalled else ""
            )
            break
        outcomes = []
        ran = (
            _gates_in_parallel(
                proposals,
                target,
                evaluator,
                cache,
                state,
                lambda: cancel.is_set() or _over_budget(started, settings),
            )
            if evaluator.overlaps_gates
            else {}
        )
        for i, p in enumerate(proposals, start=1):
            if cancel.is_set() or _over_budget(started, settings):
                break
            o = evaluate(p, f"r{round_no}c{i}", round_no, target, evaluator, cache, state, ran)
            outcomes.append(o)
            result.outcomes.append(o)
            emit("candidate", round_no, f"{o.id}: {o.status.label}", o)
        proposer.observe(outcomes)
        correct = [o for o in outcomes if o.status is Status.CORRECT and o.latency_s]
        round_best = min(correct, key=lambda o: o.latency_s or 0.0) if correct else None
        improved = bool(
            round_best
            and round_best.latency_s
            and best.latency_s
            and round_best.latency_s < best.latency_s * (1 - IMPROVEMENT)
        )
        if improved and round_best is not None:
            previous, best = best, round_best
            # The paper's feature search: the next prompt says what the new best is limited by,
            # and what changed since the previous best.
            if proposer.reads_profile:
                emit("profile", round_no, f"profiling {best.id}, the new best (ncu)")
                _profile(best, evaluator, cache)
            features = Features(target.kernel, target.kernels, target.path, target.source, target.spec, hw)
            features.profile = Profile(
                best.figures, best.resources, best.profile, previous.profile, previous.id
            )
            stalled = 0
        else:
            stalled += 1
        result.rounds.append(
            RoundSummary(
                round=round_no,
                proposed=len(outcomes),
                compiled=sum(1 for o in outcomes if o.status not in _NOT_COMPILED),
                correct=len(correct),
                best_id=round_best.id if round_best else None,
                best_latency_s=round_best.latency_s if round_best else None,
                improved=improved,
            )
        )
        emit("round_end", round_no, f"round {round_no}: {len(correct)}/{len(outcomes)} correct")
        last_round = outcomes
        if cancel.is_set():
            result.stop_reason = "cancelled"
            break
        if proposer.stop_when_stalled and stalled >= settings.patience:
            result.stop_reason = f"no improvement in {stalled} round(s)"
            break

    _decide(result, target, evaluator, settings, cache, cancel, emit)
    result.sandbox = evaluator.sandbox
    if result.best is not None and not cancel.is_set():
        _profile(result.best, evaluator, cache)  # the report shows what limits the best point
    result.seconds = time.perf_counter() - started
    emit("done", round_no, result.verdict)
    return result


def _profile(outcome: Outcome, evaluator: Evaluator, cache: ResultCache | None) -> None:
    """Fill `outcome.profile` once, for a correct candidate (from the cache when this source was
    profiled before: an ncu run costs seconds). A profiler that fails is a note on the profile,
    never the end of the run, and is not cached."""
    if outcome.profile is not None or outcome.status is not Status.CORRECT or not outcome.source:
        return
    cached = cache.get("profile", outcome.source) if cache else None
    if cached is not None:
        outcome.profile = ProfileReport.from_dict(cached)
        return
    try:
        outcome.profile = evaluator.profile(outcome.source)
    except Exception as e:  # the user's kernel and ncu are both outside our control
        log.warning("profiling %s failed: %s", outcome.id, e)
        outcome.profile = ProfileReport(note=f"profiling failed: {e}")
        return
    if cache is not None and outcome.profile is not None and outcome.profile.kernels:
        cache.put("profile", outcome.source, outcome.profile.to_dict())


_NOT_COMPILED = {Status.REQUEST_FAILED, Status.NO_CODE, Status.COMPILE_ERROR, Status.DUPLICATE}


def _over_budget(started: float, settings: LoopSettings) -> bool:
    return settings.time_budget_s is not None and time.perf_counter() - started > settings.time_budget_s


def _decide(
    result: RunResult,
    target: Target,
    evaluator: Evaluator,
    settings: LoopSettings,
    cache: ResultCache | None,
    cancel: threading.Event,
    emit: Callable[..., None],
) -> None:
    """Pick the candidate to offer, with the interleaved A/B as the final word."""
    base = result.baseline.latency_s or 0.0
    correct = sorted(
        (o for o in result.outcomes if o.status is Status.CORRECT and o.latency_s),
        key=lambda o: o.latency_s or 0.0,
    )
    result.best = correct[0] if correct else None
    failures = result.failures()
    failed_text = ", ".join(f"{n} {k}" for k, n in sorted(failures.items(), key=lambda kv: -kv[1]))
    tail = (
        f" {sum(failures.values())} of {len(result.outcomes)} candidate(s) failed: {failed_text}."
        if failures
        else ""
    )
    if cancel.is_set():
        result.verdict = "cancelled: nothing offered." + tail
        return
    faster = [o for o in correct if o.latency_s and o.latency_s < base]
    if not faster:
        best_text = (
            f" The best correct candidate ran at {result.best.speedup:.2f}x."
            if result.best and result.best.speedup
            else ""
        )
        result.verdict = (
            "nothing offered: no correct candidate was faster than the kernel as written." + best_text + tail
        )
        return
    for cand in faster[: max(1, settings.compare_top)]:
        emit("compare", cand.round, f"A/B: {cand.id} against the original")
        cached = cache.get(_kind("compare", evaluator), cand.source or "") if cache else None
        if cached is not None:
            comp = Comparison(**cached)
        else:
            # The tuner's candidates are the user's own code with other constants: timed as the
            # user's code (not fenced, not sandboxed), as its gates ran.
            comp = evaluator.compare(
                target.source, cand.source or "", settings.min_speedup, trusted=cand.trusted
            )
            if cache is not None and not comp.problems:
                cache.put(_kind("compare", evaluator), cand.source or "", asdict(comp))
        if result.comparison is None or cand is result.best:
            result.comparison = comp
        if comp.problems:
            cand.message = "A/B: " + "; ".join(comp.problems)
            continue
        if comp.ci_low > settings.min_speedup:
            blocked = _prove(cand, result, target, evaluator, emit)
            if blocked:
                continue
            result.comparison = comp
            result.accepted = cand
            result.best = cand
            extraction = f" Extraction: {cand.extraction}." if cand.extraction else ""
            result.verdict = (
                f"{cand.id} ({cand.note or cand.origin}) is {comp.speedup:.2f}x faster than the kernel as written "
                f"(95% interval {comp.ci_low:.2f}-{comp.ci_high:.2f}, {comp.samples} interleaved samples), "
                f"correct on every case. {result.proof_note}{extraction}" + tail
            )
            return
    measured = result.comparison
    best = faster[0]
    if best.status is Status.SANITIZER:
        why = f"compute-sanitizer found a bug in {best.id}, the fastest correct candidate: {best.message}"
        result.verdict = f"nothing offered: {why}." + tail
        return
    if measured and not measured.problems:
        why = (
            f"the fastest correct candidate ({best.id}) measured {measured.speedup:.2f}x in the interleaved A/B, "
            f"but its lower bound {measured.ci_low:.3f} does not clear {settings.min_speedup:g}"
        )
    else:
        why = f"the A/B of {best.id} failed: {best.message}"
    result.verdict = f"nothing offered: {why}." + tail


def _prove(
    cand: Outcome, result: RunResult, target: Target, evaluator: Evaluator, emit: Callable[..., None]
) -> bool:
    """The proof gate before an offer: code an LLM wrote runs once under compute-sanitizer, and
    a finding blocks the offer (the candidate's status says so, with the sanitizer's message at
    the line). Returns whether it blocked. A gate that could not run says why in the report."""
    if cand.trusted:
        result.proof_note = (
            "The proof gate (compute-sanitizer) was not run: the candidate is your own code with other "
            "constants (the tuner's)."
        )
        return False
    emit("prove", cand.round, f"proof gate: {cand.id} under compute-sanitizer")
    try:
        report = evaluator.prove(cand.source or "", target.source, cand.trusted)
    except Exception as e:  # the sanitizer is outside our control; a gate that failed is said
        log.warning("the proof gate failed for %s: %s", cand.id, e)
        report = SanitizerReport(note=f"the proof gate failed: {type(e).__name__}: {e}")
    if report is None:
        result.proof_note = "The proof gate (compute-sanitizer) was not run: this evaluator has no sanitizer."
        return False
    cand.proof = report
    if report.blocks_offer:
        lines = (cand.source or "").splitlines()
        cand.status = Status.SANITIZER
        # Each finding in kernel-lsp's words (`summary`), quoting the candidate's own line: the
        # tool's text goes to the report, never to the next prompt.
        cand.message = "\n".join(
            f.summary() + (f"  `{lines[f.line - 1].strip()}`" if 0 < f.line <= len(lines) else "")
            for f in report.findings
        ) or (
            "the proof gate could not run it confined" if report.unconfined else "the proof gate stopped it"
        )
        if cand is result.best:
            result.best = None
        return True
    if report.ran:
        tools = ", ".join(report.tools)
        result.proof_note = f"compute-sanitizer ({tools}, {report.case}) found nothing."
        if report.note:
            result.proof_note += f" Note: {report.note}."
    else:
        result.proof_note = f"Not proven: {report.note or 'the proof gate ran no tool'}."
    return False
