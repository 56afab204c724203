"""The three gates behind one small interface: compile (NVRTC) → verify (GPU, against the spec's
reference and the original kernel's outputs) → time, and the final interleaved A/B comparison.

`Evaluator` is what the loop talks to. `GpuEvaluator` is the real one, over
kernel_lsp.gpu.GpuSession. The compile gate is the same real NVRTC compile for every evaluator;
tests replace only the GPU gates (see tests/integration/test_optimizer_llm.py).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernel_lsp import archs
from kernel_lsp.config import Settings
from kernel_lsp.gpu_reports import ProfileReport, SanitizerReport
from kernel_lsp.gpu_request import GpuCheckRequest, GpuCompareRequest
from kernel_lsp.model import CompileOptions, CompileResult, LibraryBuild, Severity
from kernel_lsp.source import parse_directives
from kernel_lsp.spec import Spec, SpecError, SpecLoad
from kernel_lsp.workspace import Workspace

if TYPE_CHECKING:
    from kernel_lsp.workspace import GpuPool

from .entry import entry_kernels, entry_launch_shapes
from .features import Hardware
from .model import Comparison, Figures, Resources
from .tunables import define_values, launch_shapes

log = logging.getLogger(__name__)


@dataclass
class CheckResult:
    """Gates 2 and 3 for one candidate."""

    ok: bool
    problems: list[str] = field(default_factory=list)  # "mismatch (n=97): ..." per problem
    suspicious: bool = False
    figures: Figures | None = None


class Evaluator(ABC):
    """compile → verify → time → compare, for one kernel of one file."""

    def __init__(
        self,
        path: str,
        spec: Spec,
        options: CompileOptions,
        spec_source: str | None = None,
        engine: Workspace | None = None,
    ):
        self.path = path
        self.spec = spec
        self.options = options
        self.spec_source = spec_source
        # What compiles, fences and pools GPUs for the gates (the run's Workspace; a fresh one with
        # default settings where none is given: the options above are already the file's).
        self.engine = engine if engine is not None else Workspace.fixed(Settings())
        # The file as the run started (the loop sets it): what candidates are fenced against.
        self.original: str | None = None
        # Set by the loop for a round whose proposals may be code an LLM wrote: the user's own
        # code (the baseline) then runs the judged road too, measured as the candidates are.
        self.judge_everything = False

    # --- availability and hardware --------------------------------------------------------------

    @property
    def available(self) -> bool:
        return True

    @property
    def reason(self) -> str:
        return ""

    def hardware(self) -> Hardware | None:
        return None

    @property
    def device_key(self) -> str:
        """Names the device for the result cache (results are only reused on the same GPU)."""
        hw = self.hardware()
        return f"{hw.name}-{hw.arch}" if hw else "unknown"

    @property
    def parallelism(self) -> int:
        """How many candidates `check` can take at once (one per GPU)."""
        return 1

    @property
    def overlaps_gates(self) -> bool:
        """Whether a round's candidates may go through the gates from several threads at once:
        then the next candidates compile (gate 1, on the CPU) while the GPUs verify and time
        the ones before, on one GPU as on several."""
        return self.parallelism > 1

    def compile_options(self) -> CompileOptions:
        hw = self.hardware()
        return self.options.with_arch(hw.arch if hw else None)

    # --- gate 1: the compiler (real for every evaluator) -------------------------------------------

    def compile(self, source: str) -> CompileResult:
        """compile_source picks the backend: NVRTC for device code, nvcc when the candidate keeps
        the file's host code; the same gate for the original and every candidate."""
        return self.engine.compile_text(
            launch_ready(source, self.options.defines), self.path, self.compile_options()
        )

    def build(self, source: str, original: str, trusted: bool) -> LibraryBuild:
        """Gate 1 of an entry spec: the file as a shared library. A candidate whose host code an
        LLM wrote (`trusted` False) passes the fence first: its text before nvcc reads it, its
        host object before it is linked (LibraryBuild.fence holds the findings)."""
        return self.engine.build_library(source, self.path, self.compile_options(), None if trusted else original)

    # --- gates 2 and 3, and the A/B --------------------------------------------------------------

    @abstractmethod
    def check(self, source: str, original: str, trusted: bool = False) -> CheckResult:
        """Verify `source` against the spec and against `original`'s outputs; time it. An entry
        candidate that is not `trusted` runs in a sandboxed worker."""

    @abstractmethod
    def compare(self, original: str, candidate: str, min_speedup: float, trusted: bool = False) -> Comparison:
        """Interleaved A/B timing: speedup of `candidate` over `original` with its bound."""

    def prove(self, source: str, original: str, trusted: bool = False) -> SanitizerReport | None:
        """The proof gate before an offer: `source` run once under compute-sanitizer (None: this
        evaluator runs no sanitizer; a report's `note` says why a run was skipped)."""
        return None

    @property
    def sandbox(self) -> str:
        """How host code an LLM wrote was confined, in words ("" where none ran)."""
        return ""

    def profile(self, source: str) -> ProfileReport | None:
        """What limits a verified `source`, from ncu (None: this evaluator does not profile).
        Never on the timing path; called for the baseline and each round's best."""
        return None

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release the GPU session if this evaluator opened it."""


# --- launch lines with macros -------------------------------------------------------------------

_LAUNCH_LINE = re.compile(r"^(?P<lead>.*//\s*kernel-lsp:\s*launch\s+)(?P<rest>.*)$", re.M)


def launch_ready(source: str, defines: tuple[str, ...] = ()) -> str:
    """The source with integer macros in its launch lines replaced by their values
    (`grid=cdiv(n, BLOCK)` → `grid=cdiv(n, 256)`), so that the spec's evaluator, which knows only
    the sizes, can evaluate them. Only comments change: the compiled code is the same."""
    values = define_values(source, defines)
    if not values:
        return source

    def substitute(m: re.Match[str]) -> str:
        rest = m.group("rest")
        kernel, _, exprs = rest.partition(" ")
        exprs = re.sub(
            r"\b([A-Za-z_]\w*)\b",
            lambda w: str(values[w.group(1)]) if w.group(1) in values else w.group(1),
            exprs,
        )
        return m.group("lead") + kernel + " " + exprs

    return _LAUNCH_LINE.sub(substitute, source)


def spec_launch_shapes(
    source: str, spec: Spec, kernels: list[str], sizes: dict[str, int], defines: tuple[str, ...]
) -> dict[str, tuple[tuple[int, int, int], tuple[int, int, int], int]]:
    """The launches at `sizes`: an entry's own (those that evaluate), else the launch lines of
    `kernels` (SpecError when one does not evaluate)."""
    if spec.is_entry:
        return entry_launch_shapes(source, spec, sizes, defines)
    return launch_shapes(source, kernels, sizes, defines)


def launch_problem(
    result: CompileResult, source: str, spec: Spec, kernels: list[str], defines: tuple[str, ...] = ()
) -> str | None:
    """Why the compiled candidate cannot launch on its arch, or None: too many threads per block,
    more registers than the SM's file holds for one block, or too much shared memory."""
    lim = archs.limits_for(result.arch)
    if lim is None:
        return None
    try:
        shapes = {}
        for sizes in spec.timing_cases() + spec.verification_sizes()[:1]:
            shapes.update(spec_launch_shapes(source, spec, kernels, sizes, defines))
    except SpecError as e:
        return f"launch line cannot be evaluated: {e}"
    by_name = {k.name: k for k in result.kernels}
    for name, (_grid, block, smem) in shapes.items():
        threads = block[0] * block[1] * block[2]
        if threads > lim.max_threads_per_block:
            return f"`{name}`: block of {threads} threads is over the limit of {lim.max_threads_per_block}"
        res = by_name.get(name)
        if res is None:
            continue
        warps = -(-threads // 32)
        regs_per_warp = -(-res.registers * 32 // lim.register_alloc_unit) * lim.register_alloc_unit
        if warps * regs_per_warp > lim.registers_per_sm:
            return (
                f"`{name}`: {res.registers} registers × {threads} threads needs "
                f"{warps * regs_per_warp} registers, the SM has {lim.registers_per_sm}"
            )
        if res.shared_bytes + smem > lim.max_shared_per_block:
            return (
                f"`{name}`: {res.shared_bytes + smem} bytes of shared memory per block, "
                f"the limit is {lim.max_shared_per_block}"
            )
    return None


def resources_of(
    result: CompileResult, source: str, spec: Spec, kernels: list[str], defines: tuple[str, ...] = ()
) -> list[Resources]:
    """Registers, shared memory, spills and occupancy at the timing size's launch (for an entry:
    of each kernel it launches)."""
    timing = spec.timing_cases()
    try:
        shapes = spec_launch_shapes(source, spec, kernels, timing[0], defines) if timing else {}
    except SpecError:
        shapes = {}
    names = entry_kernels(source, spec.entry or spec.kernel, defines) if spec.is_entry else kernels
    out = []
    for k in result.kernels:
        if k.name not in names:
            continue
        block = smem = None
        occ = None
        if k.name in shapes:
            _, b, smem = shapes[k.name]
            block = b[0] * b[1] * b[2]
            occ = archs.occupancy(result.arch, block, k.registers, k.shared_bytes, smem)
        out.append(
            Resources(
                kernel=k.name,
                registers=k.registers,
                shared_bytes=k.shared_bytes,
                spill_bytes=k.spill_store_bytes + k.spill_load_bytes,
                block=block,
                occupancy=occ.fraction if occ else None,
                limiter=occ.limiter if occ else None,
            )
        )
    return out


# What a compile's feedback may hold: a message of the candidate's own file, cut to this, and
# the whole text cut to the prompt's share for one candidate.
MAX_MESSAGE_CHARS = 300
MAX_COMPILE_LOG_CHARS = 1500
IN_HEADER = "(in an included header)"
# A compiler line that names a file: nvcc's `file(12): ...`, g++'s `file:12:5: ...`, the context
# lines of either (`In file included from file:3`, `from file:3`).
_LOG_FILE_LINE = re.compile(
    r"^\s*(?:In file included from |from )?(?P<path>[^\s:(][^:(]*?)(?:\((?P<l1>\d+)\)|:(?P<l2>\d+)[:,])"
)


def _own_file(path: str, candidate: str) -> bool:
    return bool(path) and os.path.normpath(os.path.abspath(path)) == os.path.normpath(
        os.path.abspath(candidate)
    )


def _diagnostic_line(d: Any, candidate: str) -> str:
    """One error of the feedback: the candidate's own, or only that it is in a header (a header's
    message can quote the header, and a header can be any file the text named)."""
    if not _own_file(d.path, candidate):
        return IN_HEADER
    if d.header_copy:
        return f"line {d.line}: {d.severity.label}: {IN_HEADER}"
    message = d.message if len(d.message) <= MAX_MESSAGE_CHARS else d.message[:MAX_MESSAGE_CHARS] + " [...]"
    return f"line {d.line}:{d.col}: {d.severity.label}: {message}"


def own_file_log(log: str, candidate: str) -> str:
    """The raw compiler log, keeping only what is about `candidate`: a line that names another
    file, and the excerpt and caret lines under it, become one `(in an included header)`."""
    out: list[str] = []
    foreign = False
    for line in log.splitlines():
        m = _LOG_FILE_LINE.match(line)
        if m and not line.startswith(" "):
            foreign = not _own_file(m.group("path"), candidate) and not (
                os.path.basename(m.group("path")) == os.path.basename(candidate)
                and "/" not in m.group("path")
            )
        elif m and line.lstrip().startswith(("In file included from", "from ")):
            foreign = True
        if foreign:
            if not out or out[-1] != IN_HEADER:
                out.append(IN_HEADER)
            continue
        out.append(line[:MAX_MESSAGE_CHARS])
    return "\n".join(out)


def _cut(text: str, limit: int = MAX_COMPILE_LOG_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "\n[... cut]"


def compile_log(result: CompileResult, limit: int = 12) -> str:
    """The errors of a failed compile, as the compiler said them (for the report and the prompt),
    about the compiled file alone: an error inside another file (a header, or whatever a
    candidate made the compiler read) is only said to be there, never quoted; the text is cut to
    MAX_COMPILE_LOG_CHARS."""
    errors = [d for d in result.diagnostics if d.severity >= Severity.ERROR] or result.diagnostics
    lines: list[str] = []
    for d in errors[:limit]:
        line = _diagnostic_line(d, result.path)
        if line not in lines:
            lines.append(line)
    if len(errors) > limit:
        lines.append(f"... and {len(errors) - limit} more")
    if lines:
        return _cut("\n".join(lines))
    return _cut(own_file_log(result.log, result.path).strip()) or "compile failed"


# --- the real one -------------------------------------------------------------------------------


class GpuEvaluator(Evaluator):
    """The gates on GPUs, through kernel_lsp.gpu.GpuSession (a worker process per GPU). With more
    than one session, candidates are checked in parallel, one per GPU; an A/B comparison always
    runs both sides on one GPU. For an entry spec, a candidate whose host code an LLM wrote runs
    (check, A/B, proof) only in sandboxed sessions over the same GPUs, opened when first needed."""

    def __init__(
        self,
        session: Any,
        path: str,
        spec: Spec,
        options: CompileOptions,
        spec_source: str | None = None,
        specs: SpecLoad | None = None,
        own_session: bool = False,
        more_sessions: Sequence[Any] = (),
        engine: Workspace | None = None,
    ):
        super().__init__(path, spec, options, spec_source, engine)
        self.session = session
        self.pool = self.engine.gpu_pool([session, *more_sessions])
        self.specs = specs if specs is not None else [spec]
        self._own = own_session
        self._hw: Hardware | None = None
        self._verified: dict[str, Any] = {}  # launch-ready source -> its KernelCheck, for profile()
        self._trusted: dict[str, bool] = {}  # entry candidates checked: is their host code the user's?
        self._boxed: GpuPool | None = None  # the judged sessions' pool, opened when first needed
        self._no_sandbox = ""
        # Device compiles of this run, by (launch-ready text, device options): each text is
        # compiled once for the GPUs (the original once, not once per candidate's reference), and
        # before a GPU is borrowed, not while it waits. The compile workers' own caches are per
        # process, so a repeat could land on the other worker and compile again.
        self._device_compiles: dict[tuple[str, str], Future[CompileResult]] = {}
        self._device_compiles_lock = threading.Lock()
        self._judges_starting: ThreadPoolExecutor | None = None

    @property
    def available(self) -> bool:
        return bool(self.session.available)

    @property
    def reason(self) -> str:
        return str(self.session.reason)

    @property
    def parallelism(self) -> int:
        return len(self.pool)

    @property
    def overlaps_gates(self) -> bool:
        return True  # the sessions are thread-safe; the pool lends each GPU to one candidate at a time

    def hardware(self) -> Hardware | None:
        if self._hw is None and self.available:
            dev = self.session.device
            self._hw = Hardware.from_device(dev) if dev is not None else None
        return self._hw

    def _sessions(self, trusted: bool) -> GpuPool | None:
        """Where a source runs: the caller's sessions for the user's own code, else the judged
        ones, whose worker runs each candidate's kernels and host code in a confined process of
        its own (runner/judge.py): None, with `_no_sandbox` saying why, where the backend has
        none."""
        if trusted and not self.judge_everything:
            return self.pool
        if self._boxed is None and not self._no_sandbox:
            maybe_boxed = [m.sandboxed_session() for m in self.pool.members]
            boxed = [b for b in maybe_boxed if b is not None]
            if len(boxed) < len(maybe_boxed):
                self._no_sandbox = (
                    "host code an LLM wrote runs only in a sandboxed local GPU worker, "
                    "and this evaluation backend (Ray) has none"
                )
                return None
            self._boxed = self.engine.gpu_pool(boxed)
            self._start_judges(boxed)
        return self._boxed

    def _start_judges(self, judged: list[Any]) -> None:
        """Start every GPU's judge at once, in threads, when the first is asked for (the
        baseline's check): otherwise the second GPU's judge starts at its first candidate, a
        serial second or two inside the parallel round. The first job waits for its own GPU's
        judge to answer, as it did."""
        if len(judged) < 2:
            return
        self._judges_starting = ThreadPoolExecutor(len(judged), thread_name_prefix="fsr-judge-start")
        for session in judged:
            self._judges_starting.submit(_start_judge, session)

    @property
    def judged_sessions(self) -> list[Any]:
        """The judged sessions opened so far (one per GPU), where code an LLM wrote ran."""
        return list(self._boxed.members) if self._boxed is not None else []

    def _artifact(
        self, session: Any, source: str, original: str | None = None, trusted: bool = True
    ) -> tuple[str, Any]:
        """The text to run and its artifact for `session`'s own device: for a kernel spec the
        launch-ready text and its compile (the compile cache makes the repeat of gate 1 free on
        a device like the first); for an entry spec the text and its shared library (fenced
        unless `trusted`)."""
        if self.spec.is_entry:
            # Fail closed: without the original, an untrusted text is fenced against nothing.
            candidate_of = None if trusted or source == original else (original or "")
            return source, session.build_library(source, self.path, self.options, candidate_of)
        text = launch_ready(source, self.options.defines)
        return text, self._device_compile(session, text)

    def _request(self, text: str, artifact: Any, reference: tuple[str, Any] | None = None) -> GpuCheckRequest:
        """What a session verifies (check) or proves: `text` run from `artifact`, this target's
        kernel, spec and defines; with `reference` (the original's text and artifact), its
        outputs compared with the original's too."""
        return GpuCheckRequest(
            text,
            self.path,
            kernel=self.spec.kernel,
            spec=self.specs,
            spec_source=self.spec_source,
            artifact=artifact,
            defines=self.options.defines,
            reference=reference,
        )

    def _device_compile(self, session: Any, text: str) -> CompileResult:
        """`session.compile(text)`, once per text and device options in this run (concurrent
        callers wait for the first); a failed compile is not kept."""
        key = (text, repr(session.compile_options_for_device(self.options)))
        with self._device_compiles_lock:
            pending = self._device_compiles.get(key)
            mine = pending is None
            if pending is None:
                pending = self._device_compiles[key] = Future()
        if not mine:
            return pending.result()
        try:
            result: CompileResult = session.compile(text, self.path, self.options)
        except BaseException as e:
            with self._device_compiles_lock:
                self._device_compiles.pop(key, None)
            pending.set_exception(e)
            raise
        if not result.ok:
            with self._device_compiles_lock:
                self._device_compiles.pop(key, None)
        pending.set_result(result)
        return result

    def _compile_before_borrowing(self, *sources: str) -> None:
        """Compile a kernel spec's texts for the GPUs before one is borrowed, for the first GPU's
        options (its arch): a borrowed GPU of that arch then finds them compiled and only
        verifies and times. A GPU of another arch compiles on its turn, as before."""
        if self.spec.is_entry:
            return
        for source in dict.fromkeys(sources):
            self._device_compile(self.session, launch_ready(source, self.options.defines))

    def check(self, source: str, original: str, trusted: bool = False) -> CheckResult:
        trusted = trusted or source == original
        pool = self._sessions(trusted)
        if pool is None:
            return CheckResult(ok=False, problems=[f"sandbox: {self._no_sandbox}"])
        self._compile_before_borrowing(source, original)

        def on(session: Any) -> Any:
            text, artifact = self._artifact(session, source, original, trusted)
            reference = self._artifact(session, original) if original != source else None
            return session.check(self._request(text, artifact, reference=reference))

        kc = pool.run(on)
        problems = [f"{p.kind}" + (f" ({p.case})" if p.case else "") + f": {p.message}" for p in kc.problems]
        if not problems and not kc.ok:
            problems = [f"{kc.status}: {kc.message}"]
        figures = None
        if kc.timings:
            last = kc.timings[-1]
            figures = Figures(
                latency_s=sum(t.measurement.median_s for t in kc.timings),
                p10_s=sum(t.measurement.p10_s for t in kc.timings),
                p90_s=sum(t.measurement.p90_s for t in kc.timings),
                samples=min(t.measurement.n for t in kc.timings),
                roofline=last.roofline,
                bound=last.bound,
                bandwidth_Bps=last.bandwidth_Bps,
                cases=[t.case for t in kc.timings],
                over_bound="; ".join(t.over_bound for t in kc.timings if t.over_bound),
                bound_note=last.bound_note,
            )
        # Over 100% of a bound is never accepted, even where the worker did not call it suspicious
        # (a warm-L2 figure).
        over = [f"suspicious ({t.case}): {t.over_bound}" for t in kc.timings if t.over_bound]
        suspicious = any(p.kind == "suspicious" for p in kc.problems) or bool(over)
        problems += [p for p in over if p not in problems]
        if kc.ok and kc.timings:
            self._verified[self._key(source)] = kc
            self._trusted[source] = trusted
        return CheckResult(ok=kc.ok, problems=problems, suspicious=suspicious, figures=figures)

    @property
    def sandbox(self) -> str:
        if self._boxed is None:
            return self._no_sandbox
        how = getattr(self._boxed.members[0].backend, "sandbox", None) or {}
        parts = [
            f"writes: {how.get('files')}",
            f"network: {how.get('network')}",
            f"memory: {how.get('memory')}",
        ]
        return "a sandboxed GPU worker (" + ", ".join(p for p in parts if not p.endswith(": None")) + ")"

    def _key(self, source: str) -> str:
        return source if self.spec.is_entry else launch_ready(source, self.options.defines)

    def profile(self, source: str) -> ProfileReport | None:
        # An entry candidate is profiled as it was checked: fenced and sandboxed unless trusted.
        trusted = self._trusted.get(source, source == self.original or not self.spec.is_entry)
        if not trusted and self.original is None:
            return ProfileReport(
                note="not profiled: the original is not known to fence the candidate against"
            )
        pool = self._sessions(trusted)
        if pool is None:
            return ProfileReport(note=f"not profiled: {self._no_sandbox}")
        session = pool.members[0]
        ready, artifact = self._artifact(session, source, self.original, trusted)
        kc = self._verified.get(self._key(source))
        if kc is None:  # its check came from the result cache: verify and time it here once
            kc = session.check(self._request(ready, artifact))
            if not (kc.ok and kc.timings):
                return ProfileReport(note=f"not profiled: {kc.message or kc.status}")
        session.add_occupancy(kc, self._request(ready, artifact))
        return kc.profile

    def compare(self, original: str, candidate: str, min_speedup: float, trusted: bool = False) -> Comparison:
        pool = self._sessions(trusted)
        if pool is None:
            return Comparison(speedup=1.0, ci_low=1.0, ci_high=1.0, samples=0, problems=[self._no_sandbox])
        self._compile_before_borrowing(original, candidate)

        def on(session: Any) -> Any:  # both sides on this one GPU, interleaved
            base_text, base = self._artifact(session, original)
            cand_text, cand = self._artifact(session, candidate, original, trusted)
            request = GpuCompareRequest(
                base_text,
                cand_text,
                self.path,
                kernel=self.spec.kernel,
                spec=self.specs,
                spec_source=self.spec_source,
                baseline_artifact=base,
                candidate_artifact=cand,
                defines=self.options.defines,
                min_speedup=min_speedup,
            )
            return session.compare(request)

        c = pool.run(on)
        problems = [p.message for p in c.problems]
        if c.error:
            problems.insert(0, c.error)
        if c.suspicious:
            problems.append(f"suspicious: {c.suspicious}")
        return Comparison(
            speedup=c.speedup, ci_low=c.ci_low, ci_high=c.ci_high, samples=c.n, problems=problems
        )

    def prove(self, source: str, original: str, trusted: bool = False) -> SanitizerReport | None:
        pool = self._sessions(trusted)
        if pool is None:
            return SanitizerReport(note=f"the proof gate was skipped: {self._no_sandbox}")

        def on(session: Any) -> SanitizerReport:
            text, artifact = self._artifact(session, source, original, trusted)
            return session.prove(self._request(text, artifact))

        return pool.run(on)

    def close(self) -> None:
        if self._judges_starting is not None:  # a judge still starting is closed below, started
            self._judges_starting.shutdown(wait=True, cancel_futures=True)
        if self._boxed is not None:
            self._boxed.close()
        if self._own:
            self.pool.close()


def _start_judge(session: Any) -> None:
    """A judged session's worker started and its confinement known: locally the judge process,
    on Ray the judge inside the GPU's actor."""
    try:
        if session.available:
            getattr(session.backend, "sandbox", None)
    except Exception as e:  # the job that needs it starts it again and says what failed
        log.debug("starting a judge ahead failed: %s", e)


# A test seam: a factory `(path, spec, options, spec_source, specs) -> Evaluator` that replaces the
# GPU gates, so the editor tests can run the whole code action on a machine without a GPU. Tests
# set it themselves (in process; the editor tests start the server through
# tests/e2e/server_with_test_evaluator.py, which sets it first): nothing in the environment or a
# workspace can name code for the optimizer to import.
INJECTED: Callable[..., Evaluator] | None = None


def kernels_launched(spec: Spec, source: str, defines: tuple[str, ...] = ()) -> list[str]:
    """The kernels a run launches: the spec's (those with launch lines first), or for an entry
    spec the kernels its host function launches."""
    if spec.is_entry:
        return entry_kernels(source, spec.entry or spec.kernel, defines)
    names = spec.kernels
    known = {d.kernel for d in parse_directives(source).launches}
    return [k for k in names if k in known] or names
