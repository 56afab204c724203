"""A judge's A/B timed in several pairs of processes (evaluation/local.LocalBackend.compare,
_pooled) is offered on all of its pairs: a candidate cannot be offered on one lucky pair, nor
hide a pair that went wrong behind earlier ones."""

from __future__ import annotations

import pytest

from kernel_lsp.evaluation import local
from kernel_lsp.evaluation.local import LocalBackend
from kernel_lsp.gpu_results import Comparison, Problem


def timing(speedup: float, low: float, **more) -> tuple[Comparison, list[float], list[float]]:
    """One pair's A/B and its samples (baseline's 10 us, the candidate's 10 us over `speedup`)."""
    a, b = [10e-6] * 8, [10e-6 / speedup] * 8
    c = Comparison(speedup, low, speedup + (speedup - low), len(a), None, None, faster=low > 1.02, **more)
    return c, a, b


@pytest.fixture
def scripted(monkeypatch):
    """A backend whose pairs read as `script` says, in turn (no worker, no GPU)."""

    def make(script: list) -> tuple[LocalBackend, list]:
        backend = LocalBackend(fake=True, judged_pairs=5)
        taken: list = []
        monkeypatch.setattr(LocalBackend, "available", property(lambda self: True))
        monkeypatch.setattr(LocalBackend, "device", property(lambda self: None))
        monkeypatch.setattr(local, "spec_desc", lambda spec, source: {})

        def compare_once(self, message, blobs, min_speedup, on_progress):
            one = script[len(taken)]
            taken.append(one)
            return one

        monkeypatch.setattr(LocalBackend, "_compare_once", compare_once)
        return backend, taken

    return make


def compare(backend: LocalBackend) -> Comparison:
    return backend.compare(None, None, (b"", []), (b"", []))  # type: ignore[arg-type]


def test_a_lucky_first_pair_is_not_an_offer(scripted):
    # Exact work whose first pair read 1.10x [1.05, 1.15], as the spread between processes
    # makes now and then: the next pairs read it as it is.
    backend, taken = scripted(
        [timing(1.10, 1.05), timing(0.97, 0.95), timing(0.96, 0.94), timing(1.0, 0.98), timing(1.0, 0.98)]
    )
    result = compare(backend)
    assert len(taken) >= 2 and result.pairs == len(taken)
    assert not result.faster and result.ci_low < 1.02, result


def test_a_pair_gone_wrong_after_a_fast_one_is_the_verdict(scripted):
    suspicious = "12 of its 40 timed runs ended sooner than the GPU switches to its process and back"
    for later in (
        timing(1.30, 1.25, suspicious=suspicious),
        timing(1.30, 1.25, problems=[Problem("mismatch", "n=1024", "wrong in case n=1024")]),
        (Comparison(1.0, 1.0, 1.0, 0, None, None, error="its process ended during case n=1024"), [], []),
    ):
        backend, taken = scripted([timing(1.30, 1.25), later, timing(1.30, 1.25)])
        result = compare(backend)
        assert len(taken) == 2, "the pairs stop at the one that went wrong"
        assert not result.faster and result.pairs == 2, result
        assert result.suspicious or result.problems or result.error, result


def test_an_honest_speed_up_is_offered_on_all_its_pairs(scripted):
    backend, taken = scripted([timing(1.10, 1.06)] * 5)
    result = compare(backend)
    assert len(taken) == 5 and result.pairs == 5 and result.n == 40
    assert result.faster and result.ci_low == pytest.approx(1.06), result
