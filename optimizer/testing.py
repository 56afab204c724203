"""A deterministic stand-in for the GPU gates, for tests on machines without a GPU.

The compile gate stays real (NVRTC). Verification and timing are decided by the candidate's
content through rules: the first rule whose marker occurs in the source decides whether it is
correct and how long it "takes". Nothing is executed. Tests and the editor end-to-end tests use it
(a test sets it as optimizer/evaluator.INJECTED, tests/e2e/server_with_test_evaluator.py in the
server it starts); nothing else ever uses it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from kernel_lsp.gpu_reports import TOOLS, SanitizerFinding, SanitizerReport

from .evaluator import CheckResult, Evaluator
from .features import Hardware
from .model import Comparison, Figures


@dataclass(frozen=True)
class Rule:
    marker: str  # a substring of the source
    latency_s: float | None  # None: the verifier rejects it
    mismatch: str = ""  # the verifier's report when rejected


class ContentEvaluator(Evaluator):
    """`proofs`: {marker: (tool, message)}: the proof gate's run finds that bug in a candidate
    holding the marker (a text, lines included), at the marker's first line; without `proofs`
    the evaluator runs no sanitizer."""

    def __init__(
        self,
        path,
        spec,
        options,
        spec_source=None,
        rules=(),
        default_latency_s=100e-6,
        noise=0.004,
        proofs: dict[str, tuple[str, str]] | None = None,
    ):
        super().__init__(path, spec, options, spec_source)
        self.rules = list(rules)
        self.default_latency_s = default_latency_s
        self.noise = noise
        self.proofs = proofs
        self.checks = 0
        self.compares = 0
        self.trusted: dict[str, bool] = {}  # each source checked: was it run as the user's code?
        self.proved: list[str] = []

    def hardware(self) -> Hardware | None:
        return Hardware(
            "Scripted GPU (no GPU: content rules)",
            "sm_90",
            132,
            233472,
            65536,
            50 << 20,
            3.3e12,
            {"float32": 60e12},
        )

    def _rule(self, source: str) -> Rule:
        for r in self.rules:
            if r.marker in source:
                return r
        return Rule("", self.default_latency_s)

    def check(self, source: str, original: str, trusted: bool = False) -> CheckResult:
        self.checks += 1
        self.trusted[source] = trusted
        r = self._rule(source)
        if r.latency_s is None:
            return CheckResult(ok=False, problems=[r.mismatch or "mismatch: wrong result"])
        t = r.latency_s
        return CheckResult(
            ok=True, figures=Figures(t, t * 0.99, t * 1.02, 200, 0.5, "DRAM", 1e12, ["n=33554432"])
        )

    def prove(self, source: str, original: str, trusted: bool = False) -> SanitizerReport | None:
        if self.proofs is None:
            return None
        self.proved.append(source)
        report = SanitizerReport(tools=dict.fromkeys(TOOLS, 0.1), case="smallest case")
        for marker, (tool, message) in self.proofs.items():
            at = source.find(marker)
            if at >= 0:  # at the marker's (first) line
                line = source.count("\n", 0, at) + 1
                report.findings.append(SanitizerFinding(tool, message, os.path.basename(self.path), line))
        return report

    def compare(self, original: str, candidate: str, min_speedup: float, trusted: bool = False) -> Comparison:
        self.compares += 1
        a, b = self._rule(original).latency_s or 1.0, self._rule(candidate).latency_s or 1.0
        s = a / b
        return Comparison(speedup=s, ci_low=s * (1 - self.noise), ci_high=s * (1 + self.noise), samples=400)


def make_content_evaluator(
    path: str, spec: Any, options: Any, spec_source: str | None, specs: Any
) -> ContentEvaluator:
    """A factory for optimizer/evaluator.INJECTED: rules come from KERNEL_LSP_TEST_RULES, a JSON
    list of [marker, latency_s or null, mismatch]."""
    raw = json.loads(os.environ.get("KERNEL_LSP_TEST_RULES", "[]"))
    return ContentEvaluator(path, spec, options, spec_source, [Rule(m, t, msg) for m, t, msg in raw])
