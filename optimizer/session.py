"""One optimization run from a file and a kernel name: find the spec, pick the proposer, open the
GPU, run the loop, write the report. The CLI and the language server both call `run`."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kernel_lsp.config import Settings
from kernel_lsp.gpu_reports import GPU_OFF_IN_EDITOR, no_gpu_message
from kernel_lsp.model import CompileOptions, RayUnavailable
from kernel_lsp.spec import Spec, SpecLoad, spec_path_for
from kernel_lsp.spec.isolated import load_specs_isolated
from kernel_lsp.workspace import Workspace

from . import evaluator as evaluators
from .cache import ResultCache, default_dir
from .entry import entry_kernels
from .evaluator import Evaluator, GpuEvaluator, compile_log, kernels_launched
from .loop import LoopSettings, Target, optimize
from .model import RunResult
from .observers import ProgressEvent
from .proposers.base import Proposer
from .proposers.llm import LlmProposer, LlmSettings
from .proposers.tuner import TunerProposer
from .report import write_report
from .strategies import DEFAULT_STRATEGY


class OptimizeError(Exception):
    """The run cannot start (no spec, no GPU, nothing to tune...): the message says what to do."""


@dataclass
class RunRequest:
    path: str
    kernel: str
    settings: Settings = field(default_factory=Settings)
    source: str | None = None  # the editor's text; read from disk when None
    spec_source: str | None = None
    proposer: str | None = None  # auto | llm | tune (None: settings.optimizer_proposer)
    rounds: int | None = None
    candidates: int | None = None
    strategy: str = DEFAULT_STRATEGY
    min_speedup: float = 1.02
    time_budget_s: float | None = None
    max_evaluations: int = 256
    use_cache: bool = True
    cache_dir: str | None = None
    workspace: str | None = None  # where .kernel-lsp/reports goes (default: the file's folder)
    # The engine's front door (settings per file, compile options); default: `settings` as they are.
    engine: Workspace | None = None
    llm_temperature: float = 0.7
    llm_timeout_s: float = 120.0
    llm_concurrency: int = 4
    llm_retries: int = 4
    write_report: bool = True


def find_spec(
    path: str,
    kernel: str,
    spec_source: str | None = None,
    source: str | None = None,
    engine: Workspace | None = None,
) -> tuple[Spec, SpecLoad]:
    """The spec that describes `kernel` (its own, a pipeline that launches it, or an entry spec
    whose host function launches it). `source`: the `.cu` text (default: read from disk)."""
    spec_path = spec_path_for(path)
    if spec_source is None and not os.path.exists(spec_path):
        raise OptimizeError(
            f"`{kernel}` has no spec: {os.path.basename(spec_path)} does not exist. A spec says what the "
            f"kernel must compute; `kernel-lsp spec {os.path.basename(path)} --kernel {kernel}` (or the "
            "editor's code action 'Write a spec skeleton') starts one."
        )
    loaded = load_specs_isolated(spec_path, spec_source)
    if not loaded.ok:
        first = next(d for d in loaded.diagnostics if d.severity.label == "error")
        raise OptimizeError(f"{os.path.basename(spec_path)}:{first.line}: {first.message}")
    for spec in loaded.specs:
        if kernel in (spec.kernel, spec.name) or kernel in spec.kernels:
            return spec, loaded
    # A kernel an entry spec's launcher launches: the entry is what is optimized.
    if source is None:
        source, _ = (engine or Workspace.fixed(Settings())).read(path)
    for spec in loaded.specs:
        if (
            spec.is_entry
            and source is not None
            and kernel in entry_kernels(source, spec.entry or spec.kernel)
        ):
            return spec, loaded
    names = ", ".join(s.kernel for s in loaded.specs) or "none"
    raise OptimizeError(f"{os.path.basename(spec_path)} has no spec for `{kernel}` (it has: {names})")


def llm_settings(req: RunRequest) -> LlmSettings | None:
    s = req.settings
    return LlmSettings.resolve(
        s.llm_model,
        s.llm_base_url,
        s.llm_api_key,
        temperature=req.llm_temperature,
        timeout_s=req.llm_timeout_s,
        concurrency=req.llm_concurrency,
        retries=req.llm_retries,
    )


def choose_proposer(req: RunRequest, target: Target, arch: str) -> Proposer:
    kind = req.proposer or req.settings.optimizer_proposer or "auto"
    llm = llm_settings(req)
    if kind == "auto":
        kind = "llm" if llm is not None else "tune"
    if kind == "llm":
        if llm is None:
            raise OptimizeError(
                "the LLM proposer needs a model: set kernelLsp.llm.model (and llm.baseUrl / OPENAI_API_KEY), "
                "or OPENAI_MODEL; or use the tuner (--proposer tune)"
            )
        return LlmProposer(llm)
    if kind != "tune":
        raise OptimizeError(f"unknown proposer `{kind}` (llm or tune)")
    tuner = TunerProposer(
        target.source, target.spec, target.kernels, arch, req.settings.defines, strategy=req.strategy
    )
    if not tuner.searchable:
        why = f" ({tuner.reason})" if tuner.reason else ""
        raise OptimizeError(
            f"nothing to tune in {os.path.basename(target.path)}{why}: mark compile-time parameters with "
            "`// kernel-lsp: tune NAME=v1,v2,...` (each used as a #define), or launch the kernel with "
            "a block size from a constant (`#define BLOCK 256`, `constexpr int threads = 256;`, a "
            "literal in the launch line), or configure an LLM"
        )
    return tuner


def run(
    req: RunRequest,
    session: Any = None,
    observers: Iterable[Callable[[ProgressEvent], None]] = (),
    cancel: threading.Event | None = None,
    evaluator: Evaluator | None = None,
    more_sessions: Sequence[Any] = (),
    proposer: Proposer | None = None,
) -> RunResult:
    """Run one optimization. Raises OptimizeError when it cannot start. `session` (and
    `more_sessions`, one per further GPU) are the caller's; without one, gpu.devices says which
    GPUs to open. `proposer`: the caller's own, instead of the one `req` names."""
    engine = req.engine or Workspace.fixed(req.settings, req.workspace)
    req = replace(req, settings=engine.settings_for(req.path))
    source = req.source
    if source is None:
        source, problem = engine.read(req.path)
        if source is None:
            raise OptimizeError(problem.message if problem else f"cannot read {req.path}")
    spec, loaded = find_spec(req.path, req.kernel, req.spec_source, source, engine)
    target = Target(
        req.path, source, spec, kernels_launched(spec, source, req.settings.defines), req.spec_source
    )
    base_dir = os.path.dirname(os.path.abspath(req.path))
    options: CompileOptions = engine.compile_options(req.path, None, source)
    own = False
    from .requirements import fsr_cannot_run

    if evaluator is None:
        factory = evaluators.INJECTED
        if factory is not None:
            evaluator = factory(req.path, spec, options, req.spec_source, loaded)
            evaluator.engine = engine
        else:
            if not req.settings.gpu_enabled:
                raise OptimizeError(
                    fsr_cannot_run(no_gpu_message(GPU_OFF_IN_EDITOR), req.settings, req.proposer)
                )
            more: list[Any] = list(more_sessions)
            if session is None:
                session, more = _open_sessions(engine, req)
                own = True
            evaluator = GpuEvaluator(
                session,
                req.path,
                spec,
                options,
                req.spec_source,
                loaded,
                own_session=own,
                more_sessions=more,
                engine=engine,
            )
    try:
        if not evaluator.available:
            raise OptimizeError(fsr_cannot_run(no_gpu_message(evaluator.reason), req.settings, req.proposer))
        hw = evaluator.hardware()
        arch = hw.arch if hw else options.arch
        # The original must compile before anything else is tried.
        # (An entry spec's file as the shared library it runs as.)
        if spec.is_entry:
            first = evaluator.build(source, source, True).result
        else:
            first = engine.compile_text(source, req.path, evaluator.compile_options())
        if not first.ok:
            raise OptimizeError(
                f"{os.path.basename(req.path)} does not compile; fix its errors first ({compile_log(first, 1)})"
            )
        proposer = proposer or choose_proposer(req, target, arch)
        is_tuner = isinstance(proposer, TunerProposer)
        loop = LoopSettings(
            rounds=req.rounds
            if req.rounds is not None
            else (None if is_tuner else req.settings.optimizer_rounds),
            candidates=req.candidates or req.settings.optimizer_candidates or 4,
            time_budget_s=req.time_budget_s,
            min_speedup=req.min_speedup,
            max_evaluations=req.max_evaluations,
            allow_new_globals=req.settings.optimizer_allow_new_globals,
        )
        cache = None
        if req.use_cache:
            context = "\n".join(
                [source, req.spec_source or _read(engine, spec.path), repr(evaluator.compile_options())]
            )
            cache = ResultCache(req.cache_dir or default_dir(), evaluator.device_key, context)
        result = optimize(target, proposer, evaluator, loop, observers, cancel, cache)
        result.device = _where(evaluator, result.device)
        if cache is not None:
            result.settings["cache_hits"] = cache.hits
        if req.write_report:
            secrets = [req.settings.llm_api_key, os.environ.get("OPENAI_API_KEY")]
            try:
                write_report(result, req.workspace or base_dir, secrets)
            except OSError as e:  # the run's result stands; only its report is missing
                result.report_problem = f"no report written: {e}"
        return result
    finally:
        evaluator.close()


def _open_sessions(engine: Workspace, req: RunRequest) -> tuple[Any, list[Any]]:
    """The first GPU's session, and one more per further GPU that answers (a round's candidates
    are then checked in parallel, one per GPU), on the backend the settings choose. None answers:
    OptimizeError with the reason; Ray asked for and unavailable: OptimizeError with its message."""
    from .requirements import fsr_cannot_run

    try:
        sessions, reason = engine.open_gpus(log=lambda line: print(line, file=sys.stderr))
    except RayUnavailable as e:
        raise OptimizeError(str(e)) from None
    if not sessions:
        raise OptimizeError(fsr_cannot_run(no_gpu_message(reason), req.settings, req.proposer))
    return sessions[0], sessions[1:]


def _where(evaluator: Evaluator, device: str) -> str:
    """The device's name, and the host that holds it when that is a cluster's (Ray)."""
    backend = getattr(getattr(evaluator, "session", None), "backend", None)
    host = getattr(backend, "host", "")
    if backend is None or type(backend).__name__ == "LocalBackend" or not host:
        return device
    return f"{device} on {host} (Ray)"


def _read(engine: Workspace, path: str) -> str:
    try:
        return engine.file_text(path)
    except (OSError, UnicodeDecodeError):
        return ""
