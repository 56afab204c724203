"""The in-process compile cache holds at most its count of results and its budget of CUBIN and
log bytes, dropping the least recently used first."""

from __future__ import annotations

from kernel_lsp.compile.cache import CompileCache
from kernel_lsp.model import CompileResult


def _result(cubin_bytes: int) -> CompileResult:
    return CompileResult("k.cu", "sm_90", True, cubin=b"x" * cubin_bytes, log="ptxas info")


def test_the_byte_budget_drops_the_least_recently_used():
    cache = CompileCache(capacity=100, max_bytes=1000)
    for key in "abc":
        cache.put(key, _result(300))
    assert cache.get("a") is not None  # a is now the most recently used
    cache.put("d", _result(300))  # 4 x 310 bytes > 1000: b goes
    assert cache.get("b") is None
    assert all(cache.get(k) is not None for k in "acd")


def test_a_result_over_the_budget_is_not_kept_and_replacing_a_key_counts_once():
    cache = CompileCache(capacity=100, max_bytes=1000)
    cache.put("big", _result(5000))
    assert cache.get("big") is None
    for _ in range(10):
        cache.put("same", _result(400))
    cache.put("other", _result(400))
    assert cache.get("same") is not None and cache.get("other") is not None


def test_the_count_limit_still_holds():
    cache = CompileCache(capacity=2)
    for key in "abc":
        cache.put(key, _result(1))
    assert cache.get("a") is None and cache.get("c") is not None
