"""The LLM proposer and the FSR loop against a scripted OpenAI-compatible server.

Real parts: HTTP on 127.0.0.1 (http.server), the real `openai` client, NVRTC for the compile gate,
the extraction, the prompts, the loop's selection and the reports.
Scripted part: this machine has no GPU, so the function validator and the performance profiler
are optimizer.testing.ContentEvaluator — it decides by the candidate's text (a subtraction is
"wrong", float4 is "fast", a __threadfence is "slow") and runs nothing. The GPU tests
(tests/gpu/test_optimizer_gpu.py) run the same loop with the real gates.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fixture_sources import VADD

from kernel_lsp.compile import CompileOptions
from kernel_lsp.config import Settings
from kernel_lsp.optimizer.model import Status
from kernel_lsp.optimizer.proposers.llm import LlmProposer, LlmSettings
from kernel_lsp.optimizer.session import RunRequest, run
from kernel_lsp.optimizer.testing import ContentEvaluator, Rule

API_KEY = "sk-kernel-lsp-test-SECRET-9f8e7d"


SPEC = """\
from kernel_lsp.spec import In, Out, Scalar, Spec

SPEC = Spec(
    kernel="vadd",
    sizes=[{"n": 1}, {"n": 1000}, {"n": 1 << 20}],
    args={
        "a": In("float32", shape="n"),
        "b": In("float32", shape="n"),
        "c": Out("float32", shape="n"),
        "n": Scalar("int32"),
    },
    reference=lambda a, b: {"c": a + b},
)
"""

WRONG = VADD.replace("a[i] + b[i]", "a[i] - b[i]")
SLOW = VADD.replace("if (i < n)", "__threadfence();\n    if (i < n)")
NOT_COMPILING = VADD.replace("int i =", "flaot i =")
FAST = """\
// kernel-lsp: launch vadd grid=cdiv(cdiv(n, 4), 256) block=256
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n)
{
    int v = blockIdx.x * blockDim.x + threadIdx.x;  // one float4 per thread
    int full = n / 4;
    if (v < full) {
        float4 x = reinterpret_cast<const float4*>(a)[v];
        float4 y = reinterpret_cast<const float4*>(b)[v];
        reinterpret_cast<float4*>(c)[v] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    } else if (v == full) {
        for (int i = full * 4; i < n; ++i) c[i] = a[i] + b[i];
    }
}
"""
UNROLLED = """\
#define ITEMS 2
// kernel-lsp: launch vadd grid=cdiv(n, 256 * ITEMS) block=256
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n)
{
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        int i = blockIdx.x * 256 * ITEMS + k * 256 + threadIdx.x;
        if (i < n) c[i] = a[i] + b[i];
    }
}
"""

RULES = [
    Rule("a[i] - b[i]", None, "mismatch (n=97): c[0] = -0.412, expected 1.377 (max abs error 2.9)"),
    Rule("float4", 60e-6),
    Rule("__threadfence", 150e-6),
    Rule("ITEMS", 80e-6),
]


def fenced(code: str, after: str = "Vectorized the loads.") -> str:
    return f"Here is the kernel:\n\n```cuda\n{code}```\n\n{after}"


class ScriptedLLM:
    """An OpenAI-compatible /v1/chat/completions server that answers by (round, candidate index),
    read from the prompt's "candidate I of N in round R"."""

    def __init__(self, script: dict[tuple[int, int], str], default: str) -> None:
        self.script = script
        self.default = default
        self.requests: list[dict] = []
        self.auth: list[str] = []
        self.attempts: dict[tuple[int, int], int] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest's output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                user = body["messages"][-1]["content"]
                m = re.search(r"candidate (\d+) of (\d+) in round (\d+)", user)
                key = (int(m.group(3)), int(m.group(1))) if m else (0, 0)
                with outer.lock:
                    outer.requests.append({"key": key, "body": body})
                    outer.auth.append(self.headers.get("Authorization", ""))
                    outer.attempts[key] = outer.attempts.get(key, 0) + 1
                    attempt = outer.attempts[key]
                action = outer.script.get(key, outer.default)
                if action == "429-then-ok":
                    if attempt == 1:
                        return self._send(
                            429,
                            {"error": {"message": "rate limited", "type": "rate_limit"}},
                            {"Retry-After": "0"},
                        )
                    action = fenced(UNROLLED, "Two elements per thread, unrolled.")
                if action == "timeout":
                    time.sleep(2.5)
                    action = fenced(FAST)
                self._send(
                    200,
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", "scripted"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": action},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    },
                )

            def _send(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (the timeout case)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


ROUND1 = {
    (1, 1): "I would vectorize the loads and use a grid-stride loop; that should help a lot.",
    (1, 2): fenced(NOT_COMPILING, "Changed the index type."),
    (1, 3): fenced(WRONG, "Simplified the arithmetic."),
    (1, 4): fenced(SLOW, "Added a fence for safety."),
    (1, 5): fenced(FAST, "One float4 per thread with a scalar tail."),
    (1, 6): "429-then-ok",
    (1, 7): "timeout",
}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "vadd.cu").write_text(VADD)
    (tmp_path / "vadd.spec.py").write_text(SPEC)
    return tmp_path


def _run(workspace: Path, llm: ScriptedLLM, rounds: int = 2):
    from kernel_lsp.spec import load_specs

    path = str(workspace / "vadd.cu")
    spec = load_specs(str(workspace / "vadd.spec.py")).specs[0]
    evaluator = ContentEvaluator(path, spec, CompileOptions(arch="sm_90"), rules=RULES)
    settings = Settings(
        arch=("sm_90",), llm_base_url=llm.base_url, llm_model="scripted-coder", llm_api_key=API_KEY
    )
    req = RunRequest(
        path=path,
        kernel="vadd",
        settings=settings,
        proposer="llm",
        rounds=rounds,
        candidates=7,
        llm_timeout_s=1.0,
        llm_concurrency=7,
        llm_retries=2,
        use_cache=False,
        workspace=str(workspace),
    )
    return run(req, evaluator=evaluator), evaluator


def test_scripted_llm_round_picks_the_fast_candidate_and_reports_the_rest(workspace, caplog):
    caplog.set_level(logging.DEBUG)  # everything, openai's and httpx's debug logs included
    with ScriptedLLM(ROUND1, default=fenced(SLOW, "Slower, sorry.")) as llm:
        result, evaluator = _run(workspace, llm)

    by_id = {o.id: o for o in result.outcomes}
    r1 = {i: by_id[f"r1c{i}"] for i in range(1, 8)}
    assert r1[1].status is Status.NO_CODE and "no code" in r1[1].message
    assert r1[2].status is Status.COMPILE_ERROR and 'identifier "flaot" is undefined' in r1[2].message
    assert r1[3].status is Status.INCORRECT and "mismatch (n=97)" in r1[3].message
    assert r1[4].status is Status.CORRECT and r1[4].speedup == pytest.approx(100 / 150)
    assert r1[5].status is Status.CORRECT and r1[5].speedup == pytest.approx(100 / 60)
    assert r1[6].status is Status.CORRECT and r1[6].speedup == pytest.approx(100 / 80)
    assert "after 1 retry" in r1[6].note
    assert r1[7].status is Status.REQUEST_FAILED and "timeout" in r1[7].message

    # Exactly the fast one is offered, with the A/B's figures.
    assert result.accepted is r1[5]
    assert result.accepted.source == FAST
    assert result.comparison is not None and result.comparison.ci_low > 1.02
    assert "1.67x faster" in result.verdict
    # Round 2 brought nothing better: the loop stopped on its own.
    assert [r.improved for r in result.rounds] == [True, False]
    assert result.stop_reason == "no improvement in 1 round(s)"
    # The 429 was retried once; the timeout was not retried.
    assert llm.attempts[(1, 6)] == 2 and llm.attempts[(1, 7)] == 1
    # Only candidates that compiled reached the GPU gates: the baseline and round 1's wrong, slow,
    # fast and unrolled ones. Round 2's answers repeat r1c4 and are not run again.
    assert evaluator.checks == 1 + 4
    assert all(by_id[f"r2c{i}"].status is Status.DUPLICATE for i in range(1, 8))

    # Feedback: round 2's prompt carries round 1's compile log and mismatch report, and the best.
    round2 = [r["body"]["messages"][-1]["content"] for r in llm.requests if r["key"][0] == 2]
    assert len(round2) == 7
    prompt = round2[0]
    assert 'identifier "flaot" is undefined' in prompt
    assert "mismatch (n=97)" in prompt
    assert "timeout" in prompt
    assert "Current best version (r1c5, 60.00 us)" in prompt
    assert "reinterpret_cast<const float4*>" in prompt
    # The features: hardware and spec sizes.
    assert "132 SMs" in prompt and "n=1048576" in prompt

    # The key was sent to the server, and nowhere else.
    assert all(a == f"Bearer {API_KEY}" for a in llm.auth)
    assert API_KEY not in caplog.text
    assert len(result.report_paths) == 2
    for p in result.report_paths:
        text = Path(p).read_text()
        assert API_KEY not in text
        assert "r1c5" in text
    md = Path(next(p for p in result.report_paths if p.endswith(".md"))).read_text()
    assert "+        float4 x = reinterpret_cast<const float4*>(a)[v];" in md  # the final diff
    assert "compile error" in md and "request failed" in md and "no code" in md
    assert "api_key" in json.dumps(result.settings) and API_KEY not in json.dumps(result.settings)


def test_key_is_not_in_reprs():
    s = LlmSettings(model="m", api_key=API_KEY)
    assert API_KEY not in repr(s) and API_KEY not in repr(LlmProposer(s).settings())
    assert API_KEY not in repr(Settings(llm_api_key=API_KEY))


def test_rate_limit_exhausted_is_a_failed_request(workspace):
    with ScriptedLLM({(1, i): "429-then-ok" for i in range(1, 3)}, default="x") as llm:
        llm.attempts = _AlwaysFirst()  # every attempt looks like the first: always 429
        from kernel_lsp.spec import load_specs

        path = str(workspace / "vadd.cu")
        spec = load_specs(str(workspace / "vadd.spec.py")).specs[0]
        evaluator = ContentEvaluator(path, spec, CompileOptions(arch="sm_90"), rules=RULES)
        settings = Settings(arch=("sm_90",), llm_base_url=llm.base_url, llm_model="m", llm_api_key=API_KEY)
        req = RunRequest(
            path=path,
            kernel="vadd",
            settings=settings,
            proposer="llm",
            rounds=1,
            candidates=2,
            llm_retries=2,
            llm_timeout_s=5,
            use_cache=False,
            workspace=str(workspace),
        )
        result = run(req, evaluator=evaluator)
    assert all(o.status is Status.REQUEST_FAILED for o in result.outcomes)
    assert all("HTTP 429 after 3 attempts" in o.message for o in result.outcomes)
    assert result.accepted is None and "2 request failed" in result.verdict


class _AlwaysFirst(dict):
    """An attempts counter that never gets past the first attempt (a server that is always busy)."""

    def __setitem__(self, key, value):
        super().__setitem__(key, 1)

    def get(self, key, default=None):
        return 0


def test_a_kernel_that_includes_a_file_is_refused_before_any_compiler_reads_it(workspace, tmp_path):
    """Device code an LLM wrote names a file to compile into the kernel (its bytes would reach
    the outputs, and from there the verdict and the next prompt): refused before compiling."""
    secret = tmp_path / "secret.txt"
    secret.write_text("1, 2, 3")
    reads = FAST.replace(
        'extern "C" __global__',
        f'__device__ const float stolen[] = {{\n#include "{secret}"\n}};\nextern "C" __global__',
    )
    with ScriptedLLM({(1, 1): fenced(reads)}, default="nothing") as llm:
        result, evaluator = _run(workspace, llm, rounds=1)
    first = next(o for o in result.outcomes if o.id == "r1c1")
    assert first.status is Status.UNSAFE and "not compiled (the fence)" in first.message, first.message
    assert "#include" in first.message and evaluator.checks == 1  # the baseline only: it never ran
