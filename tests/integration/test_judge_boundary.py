"""Hostile candidates against the judge's boundary (runner/judge.py), on the fake GPU: the
launcher runs for real (host loops over host memory), with no fence in front of it (these
libraries are built as the user's own code), as if an LLM's answer had slipped past every
static check. What decides correctness and speed lives in the judge's process; the candidate's
code runs in an accused process of its own, so patching Python, the clock or the verdict text
there changes nothing that is judged.

Each attack is also run in a plain (unjudged) session where it shows what it would win
in-process: that is why the boundary exists, and it proves each test can fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_lsp.compile import CompileOptions, cuda_include_dirs, find_toolchain
from kernel_lsp.fence.sandbox import in_process_available
from kernel_lsp.gpu import GpuSession, check_file
from kernel_lsp.model import TimingSettings

pytestmark = [
    pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing"),
    pytest.mark.skipif(
        in_process_available() is not None, reason=f"no sandbox here: {in_process_available()}"
    ),
]

# 30 samples a timing: the budget only bounds a slow candidate's (it ends sampling before
# min_samples: at 0.05 s, 27 samples on 2 loaded cores failed the count below).
FAST = TimingSettings(warmup_s=0.0, budget_s=2.0, min_samples=30, max_samples=30)
OPTIONS = CompileOptions(arch="sm_90", include_dirs=cuda_include_dirs())
SECRET = "KLSP-SECRET-7f3a9c"

SPEC = """from kernel_lsp.spec import Spec, In, Out, Scalar
SPEC = Spec(
    entry="scale",
    sizes=[{"n": 1000}, {"n": 20000}],
    args={"x": In("float32", shape="n"), "y": Out("float32", shape="n"), "n": Scalar("int32")},
    reference=lambda x: {"y": 2.0 * x},
)
"""

HEAD = """#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

// Python's C API, found at run time in whichever process loaded this library.
static void run_python(const char* code)
{
    typedef int (*ensure_t)(void);
    typedef void (*release_t)(int);
    typedef int (*run_t)(const char*);
    ensure_t ensure = (ensure_t)dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    release_t release = (release_t)dlsym(RTLD_DEFAULT, "PyGILState_Release");
    run_t run = (run_t)dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    if (!ensure || !release || !run) return;
    int state = ensure();
    run(code);
    release(state);
}
"""

# Wrong outputs (zeros), after patching the verifier (and the clock, in PATCHES_THE_JUDGE) of
# the process it runs in.
PATCHES_THE_VERIFIER = (
    HEAD
    + r"""
extern "C" void scale(const float* x, float* y, int n)
{
    run_python(
        "import sys, time\n"
        "for name, mod in list(sys.modules.items()):\n"
        "    if name.startswith('kernel_lsp'):\n"
        "        for attr in ('compare_output', 'constant_output'):\n"
        "            if hasattr(mod, attr): setattr(mod, attr, lambda *a, **k: None)\n"
        "import kernel_lsp.runner.verify as v\n"
        "v.CaseRunner.check_against = lambda *a, **k: None\n");
    for (int i = 0; i < n; ++i) y[i] = 0.0f;
}
"""
)

PATCHES_THE_JUDGE = PATCHES_THE_VERIFIER.replace(
    'check_against = lambda *a, **k: None\\n"',
    'check_against = lambda *a, **k: None\\n"\n        "time.perf_counter = lambda: 0.0\\n"',
)
assert "perf_counter" in PATCHES_THE_JUDGE

# Says "done" at once and writes the outputs a moment later, from a thread of its own.
ANSWERS_EARLY = (
    HEAD
    + r"""
struct job { const float* x; float* y; int n; };
static void* later(void* p)
{
    job* j = (job*)p;
    usleep(20000);
    for (int i = 0; i < j->n; ++i) j->y[i] = 2.0f * j->x[i];
    free(j);
    return 0;
}
extern "C" void scale(const float* x, float* y, int n)
{
    job* j = (job*)malloc(sizeof(job));
    j->x = x; j->y = y; j->n = n;
    pthread_t t;
    pthread_create(&t, 0, later, j);
    pthread_detach(t);
}
"""
)

# The kept answers of the cache candidates below: a table of input fingerprints and outputs, in
# memory found again through the environment (statics are put back before every call), and the
# honest work, made slow.
CACHE_STATE = r"""
struct entry { float key[4]; int n; int state; float* out; };  // state 1: seen once, 2: kept
struct kept { entry table[64]; int slow_left; };
static kept* kept_state()
{
    const char* where = getenv("KLSP_CACHE");
    kept* s = where ? (kept*)strtoull(where, 0, 16) : 0;
    if (!s) {
        s = (kept*)calloc(1, sizeof(kept));
        char text[32];
        snprintf(text, sizeof text, "%llx", (unsigned long long)s);
        setenv("KLSP_CACHE", text, 1);
    }
    return s;
}
static entry* find(kept* s, const float* x, int n)
{
    for (int k = 0; k < 64 && s->table[k].state; ++k)
        if (s->table[k].n == n && memcmp(s->table[k].key, x, sizeof s->table[k].key) == 0)
            return &s->table[k];
    return 0;
}
static entry* add(kept* s, const float* x, int n)
{
    for (int k = 0; k < 64; ++k)
        if (!s->table[k].state) {
            s->table[k].n = n;
            s->table[k].state = 1;
            memcpy(s->table[k].key, x, sizeof s->table[k].key);
            return &s->table[k];
        }
    return 0;
}
static void work(const float* x, float* y, int n)  // the honest work, made slow
{
    for (int i = 0; i < n; ++i) {
        volatile float acc = 0.0f;
        for (int r = 0; r < 40; ++r) acc += 2.0f * x[i] / 40.0f;
        y[i] = acc;
    }
}
static void keep(entry* e, const float* y, int n)
{
    if (!e) return;
    e->out = (float*)malloc(n * sizeof(float));
    memcpy(e->out, y, n * sizeof(float));
    e->state = 2;
}
"""

# Right, slow, and remembers its answers between calls, keyed by a fingerprint of the inputs.
CACHES = (
    HEAD
    + CACHE_STATE
    + r"""
extern "C" void scale(const float* x, float* y, int n)
{
    kept* s = kept_state();
    entry* e = n >= 4 ? find(s, x, n) : 0;
    if (e && e->state == 2) {
        memcpy(y, e->out, n * sizeof(float));
        return;
    }
    work(x, y, n);
    if (n >= 4) keep(add(s, x, n), y, n);
}
"""
)

# The same slow work, honest: no answer kept.
HONEST_SLOW = (
    HEAD + CACHE_STATE + 'extern "C" void scale(const float* x, float* y, int n) { work(x, y, n); }\n'
)

# Fails on purpose, with a secret where the verdict would quote an error: as the status it
# returns, and as the text of the fault its (patched) process reports.
LEAKS = (
    HEAD
    + r"""
extern "C" int scale(const float* x, float* y, int n)
{
    run_python(
        "import sys, kernel_lsp.runner.accused as k\n"  // the accused runs as __main__
        "for a in (k, sys.modules['__main__']):\n"
        "    a.fault_reply = lambda e: {'status': 'fault', 'code': 'cudaError'"
        " + '@SECRET@', 'sticky': False, 'entry_status': 0x7f3a9c}\n");
    for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];
    return 0x7f3a9c;
}
"""
).replace("@SECRET@", SECRET.replace("-", ""))

HONEST = r"""
extern "C" void scale(const float* x, float* y, int n)
{
    for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];
}
"""


@pytest.fixture(scope="module")
def judged():
    with GpuSession(fake=True, timing=FAST, sandboxed=True) as session:
        assert session.available, session.reason
        yield session


@pytest.fixture
def plain():
    """A fresh one per test: an attack that succeeds patches this worker for good."""
    with GpuSession(fake=True, timing=FAST) as session:
        yield session


def check(session: GpuSession, tmp_path: Path, source: str):
    (tmp_path / "scale.cu").write_text(source)
    (tmp_path / "scale.spec.py").write_text(SPEC)
    (result,) = check_file(session, str(tmp_path / "scale.cu"), compile_options=OPTIONS)
    return result


def words(result) -> str:
    return " ".join([result.message, *(p.message for p in result.problems)])


def test_an_honest_launcher_gets_the_same_verdict_judged_and_plain(judged, plain, tmp_path):
    a, b = check(judged, tmp_path, HONEST), check(plain, tmp_path, HONEST)
    assert a.ok and b.ok, (words(a), words(b))
    assert [c["case"] for c in a.cases] == [c["case"] for c in b.cases]
    (timing,) = a.timings
    assert timing.measurement.n >= 30 and timing.measurement.median_s > 0


def test_patching_the_verifier_and_the_clock_in_its_process_changes_nothing(judged, plain, tmp_path):
    fooled = check(plain, tmp_path, PATCHES_THE_VERIFIER)
    assert fooled.ok, "in-process, the patch should have fooled the verifier: " + words(fooled)
    result = check(judged, tmp_path, PATCHES_THE_JUDGE)
    assert not result.ok
    assert result.problems[0].kind == "mismatch" and "constant" in words(result), words(result)


def test_answering_before_the_work_is_done_fails(judged, tmp_path):
    result = check(judged, tmp_path, ANSWERS_EARLY)
    assert not result.ok
    assert result.problems[0].kind == "mismatch" and "poison" in words(result), words(result)


def test_a_result_kept_between_timed_runs_is_suspicious(judged, plain, tmp_path):
    fooled = check(plain, tmp_path, CACHES)
    assert fooled.ok, "in-process, the cache should have gone unnoticed: " + words(fooled)
    result = check(judged, tmp_path, CACHES)
    assert not result.ok and result.problems[0].kind == "suspicious", words(result)
    assert "already seen" in words(result)


def test_the_verdict_never_quotes_what_the_candidate_says(judged, tmp_path):
    result = check(judged, tmp_path, LEAKS)
    assert not result.ok
    text = words(result)
    assert SECRET.replace("-", "") not in text and str(0x7F3A9C) not in text, text
    assert "non-zero status" in text or "failed in the candidate's process" in text, text


# Once its GPU is open, the accused has no socket (the driver's start needed one) and no memory
# its limit does not count (the driver's start needed shared anonymous maps): right answers only
# if every attempt failed.
REACHES_OUT = r"""
#include <cstring>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

extern "C" void scale(const float* x, float* y, int n)
{
    int escaped = 0;
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s >= 0) {
        sockaddr_un where = {};
        where.sun_family = AF_UNIX;
        strncpy(where.sun_path, "@PATH@", sizeof where.sun_path - 1);
        escaped |= connect(s, (sockaddr*)&where, sizeof where) == 0;
        close(s);
        escaped |= 2;
    }
    void* big = mmap(0, 1ul << 30, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (big != MAP_FAILED) { munmap(big, 1ul << 30); escaped |= 4; }
    for (int i = 0; i < n; ++i) y[i] = escaped ? (float)escaped : 2.0f * x[i];
}
"""


def test_after_its_gpu_opened_the_accused_has_no_socket_nor_uncounted_memory(judged, plain, tmp_path):
    import socket

    path = str(tmp_path / "listener.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    listener.setblocking(False)
    source = REACHES_OUT.replace("@PATH@", path)

    def connections() -> int:
        count = 0
        while True:
            try:
                listener.accept()[0].close()
            except BlockingIOError:
                return count
            count += 1

    try:
        escaped = check(plain, tmp_path, source)
        assert not escaped.ok and connections() >= 1, "in a plain worker the socket and the map work"
        result = check(judged, tmp_path, source)
        assert result.ok, words(result)
        assert connections() == 0
    finally:
        listener.close()


# Dies as it loads: a constructor that kills its own process (run before any call).
DIES_LOADING = r"""
#include <cstdlib>
__attribute__((constructor)) static void die() { abort(); }
extern "C" void scale(const float* x, float* y, int n)
{
    for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];
}
"""


def test_a_candidate_whose_process_dies_as_it_loads_is_a_crash_and_the_judge_answers_on(judged, tmp_path):
    result = check(judged, tmp_path, DIES_LOADING)
    assert not result.ok and result.problems[0].kind == "crash", words(result)
    assert "ended while loading it" in words(result)
    assert check(judged, tmp_path, HONEST).ok


# Never returns: its host code spins, as a kernel that never ends would keep the call waiting.
HANGS = r"""
extern "C" void scale(const float* x, float* y, int n)
{
    for (volatile int spin = 1; spin;) {}
}
"""


def test_a_candidate_that_hangs_is_refused_after_its_second_try_and_the_judge_answers_on(tmp_path):
    """A request that outlives its timeout goes once more to a fresh worker (a GPU stalled by
    another process's fault is no hang): a candidate that hangs hangs there too, is refused, and
    the judge's next verdict is its own."""
    with GpuSession(fake=True, timing=FAST, sandboxed=True, launch_timeout_s=1.5) as judge:
        result = check(judge, tmp_path, HANGS)
        assert not result.ok and result.problems[0].kind == "timeout", words(result)
        assert result.message.endswith(", twice"), result.message
        assert check(judge, tmp_path, HONEST).ok


def test_a_small_status_is_quoted_and_a_large_one_is_not(judged, tmp_path):
    small = HONEST.replace('extern "C" void', 'extern "C" int').replace(
        "2.0f * x[i];\n}", "2.0f * x[i];\n    return 7;\n}"
    )
    result = check(judged, tmp_path, small)
    assert not result.ok and "`scale` returned 7" in words(result), words(result)
    large = small.replace("return 7;", "return 0x7f3a9c;")
    result = check(judged, tmp_path, large)
    assert "returned a non-zero status" in words(result) and str(0x7F3A9C) not in words(result), words(result)


def test_the_optimizers_judge_twin_is_a_judge_with_the_users_settings(plain, tmp_path):
    """The optimizer judges code an LLM wrote in `sandboxed_session()`, a twin of the user's
    session (LocalBackend.like): a judge on the same GPU, with the same launch timeout and timing,
    so a candidate that patches its process's verifier and clock is caught there too."""
    twin = plain.sandboxed_session()
    assert twin is not None and twin is not plain
    try:
        mine, theirs = plain.backend, twin.backend
        assert theirs.sandboxed and not mine.sandboxed
        same = ("device_index", "launch_timeout_s", "timing", "fake", "start_timeout_s", "use_device_cache")
        assert [getattr(theirs, k) for k in same] == [getattr(mine, k) for k in same]
        result = check(twin, tmp_path, PATCHES_THE_JUDGE)
    finally:
        twin.close()
    assert not result.ok
    assert result.problems[0].kind == "mismatch" and "constant" in words(result), words(result)


# Right while it is verified, then wrong: its count of calls on the large case (the one timed) is
# thread-local (host statics are put back before every call; thread-local storage is not in the
# library's image; a file of its folder kept it before the sandbox refused every write), and past
# the calls its verification makes it writes a wrong result, at the same cost (a run that skipped
# its work would be far faster on inputs it has seen than on new ones, and the judge says so
# first: "suspicious"), hoping the timed runs are not all checked. Verification calls it on that
# case exactly this often: 2 runs (verify_case's `runs`) x 2 calls (a run and its race check), all
# in the one accused process of the request. (It quit after its 24th call of any size: under load
# the timing, bounded by its budget, made a sizing batch, a warm-up batch and one measured batch
# of 3 sets, 9 calls after the verification's, never reaching the 24th; found correct, rightly,
# it failed the test under load and passed alone.)
LARGE_N = 1 << 21
LARGE_VERIFICATION_CALLS = 2 * 2
QUITS_WHEN_TIMED = r"""
extern "C" void scale(const float* x, float* y, int n)
{
    static __thread long calls = 0;
    if (n == LARGE_N && calls++ >= VERIFICATION_CALLS) {
        for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i] + 1.0f;
        return;
    }
    for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];
}
""".replace("LARGE_N", str(LARGE_N)).replace("VERIFICATION_CALLS", str(LARGE_VERIFICATION_CALLS))
LARGE_SPEC = SPEC.replace('[{"n": 1000}, {"n": 20000}]', f'[{{"n": 1000}}, {{"n": {LARGE_N}}}]')


def test_a_candidate_that_stops_working_once_timed_is_caught_on_a_large_case(judged, tmp_path):
    """The checked sets' references of a large case (8 MiB buffers) are made side by side in
    threads (runner/isolation.TimedSets._references): a candidate that passes verification and
    then goes wrong is still caught by the timed outputs."""
    assert f'{{"n": {LARGE_N}}}' in LARGE_SPEC
    (tmp_path / "scale.cu").write_text(QUITS_WHEN_TIMED)
    (tmp_path / "scale.spec.py").write_text(LARGE_SPEC)
    (result,) = check_file(judged, str(tmp_path / "scale.cu"), compile_options=OPTIONS)
    assert not result.ok, words(result)
    assert result.problems[0].kind == "timing_mismatch", words(result)
    assert "outputs of the timed launches are wrong" in words(result)


def rewrites_its_gated_run(*python: str) -> str:
    """A launcher, right in verification, whose first call rewrites its process's gated run
    (runner/accused.Accused._run_gated) with `python`'s lines (which define `gated(self,
    bindings, gate)`; `real` is the method it replaces), as a candidate past the fence could."""
    lines = [
        "import os, sys, time",
        "a = sys.modules['__main__']",  # the accused runs as `python -m`
        "real = getattr(a, 'real_gated', a.Accused._run_gated)",
        "a.real_gated = real",
        *python,
        "a.Accused._run_gated = gated",
    ]
    code = "\n".join(f'            "{line}\\n"' for line in lines)
    return (
        HEAD
        + f"""
extern "C" void scale(const float* x, float* y, int n)
{{
    static int patched = 0;
    if (!patched++)
        run_python(
{code});
    for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];
}}
"""
    )


# The gated run (runner/judge.Gate): the accused queues its run behind the judge's `go` and
# writes `done` after it. This candidate writes `done` before its work (the judge's bracket would
# end early).
GATE_DONE_EARLY = rewrites_its_gated_run(
    "def gated(self, bindings, gate):",
    "    flags = self.buffers[int(gate['flags'])]",
    "    self.device.gate_write(flags + int(gate['done']), int(gate['seq']))",
    "    return real(self, bindings, gate)",
)


def test_a_candidate_that_ends_its_own_gate_early_gains_nothing(judged, plain, tmp_path):
    """Honest in verification, it writes `done` before its work in every gated run: the outputs
    the judge copies right after `done` are its poison (refused), or, where the judge's process
    was held up long enough for the work to finish, that delay is in the figure. (Opening its own
    `go` early gains a head start on the fake GPU's host, which runs both processes at once; on a
    GPU, where a context runs only while the judge's waits, it gains nothing:
    tests/gpu/test_judge_gpu.py.)"""
    honest = check(judged, tmp_path, HONEST)
    result = check(judged, tmp_path, GATE_DONE_EARLY)
    assert honest.ok, words(honest)
    if result.ok:
        h, c = honest.timings[-1].measurement.median_s, result.timings[-1].measurement.median_s
        assert c >= 0.5 * h, (c, h)
    else:
        assert result.problems[0].kind in ("timing_mismatch", "suspicious"), words(result)
    assert check(plain, tmp_path, GATE_DONE_EARLY).ok  # no gate in-process


# Its gated run first calls the launcher itself, before the judge's `go` (as a candidate whose
# stream does not wait for it would run): that call sums the inputs it finds. The real call, inside
# the gate, gets its output wrong if that sum was this run's inputs: what it computed early would
# have been right, and outside the judge's bracket.
SEES_INPUTS_BEFORE_GO = rewrites_its_gated_run(
    "def gated(self, bindings, gate):",
    "    os.environ['KLSP_EARLY'] = '1'",
    "    [call() for b in bindings for call in self.plans[b]]",
    "    del os.environ['KLSP_EARLY']",
    "    return real(self, bindings, gate)",
).replace(
    "    for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];\n}",
    # (The sum kept in its environment: the judge puts the library's globals back before each run.)
    """    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += x[i];
    for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];
    char text[64];
    snprintf(text, sizeof text, "%.17g", sum);
    if (getenv("KLSP_EARLY")) {
        setenv("KLSP_EARLY_SUM", text, 1);
        return;
    }
    const char* early = getenv("KLSP_EARLY_SUM");
    if (sum != 0.0 && early && strcmp(early, text) == 0) y[0] += 1.0f;
    unsetenv("KLSP_EARLY_SUM");
}""",
)


def test_a_set_s_inputs_are_in_its_buffers_only_inside_the_judge_s_preparation_and_run(judged, tmp_path):
    """Work an accused does before the judge's `go` finds no inputs, even on a set it ran
    before (runner/isolation.TimedSets.scrub_set): the judge empties a set's inputs after each
    gated run. (On a GPU, what it does between the judge's writing the inputs and the start
    mark costs it a switch of contexts, counted to its run: judge.GpuClock.)"""
    assert "KLSP_EARLY" in SEES_INPUTS_BEFORE_GO and "y[0] += 1.0f" in SEES_INPUTS_BEFORE_GO
    result = check(judged, tmp_path, SEES_INPUTS_BEFORE_GO)
    assert result.ok, words(result)


# Honest in verification; in its timed (gated) runs it says "queued" and then hangs, or ends its
# process, before its run: the judge's own stream must not stay waiting on a flag never raised.
def gate_fault(fault: str, before_queued: bool = False) -> str:
    said = "    self.say({'status': 'queued'})"
    lines = [f"    {fault}", said] if before_queued else [said, f"    {fault}"]
    return rewrites_its_gated_run("def gated(self, bindings, gate):", *lines)


@pytest.mark.parametrize(
    ("fault", "kind", "before_queued"),
    [("time.sleep(3600)", "timeout", False), ("os._exit(9)", "crash", False), ("os._exit(9)", "crash", True)],
    ids=["hangs", "dies", "dies-before-queued"],
)
def test_a_candidate_that_hangs_or_dies_inside_its_gate_is_refused_and_the_judge_answers_on(
    tmp_path, fault, kind, before_queued
):
    with GpuSession(fake=True, timing=FAST, sandboxed=True, launch_timeout_s=1.5) as judge:
        result = check(judge, tmp_path, gate_fault(fault, before_queued))
        assert not result.ok and result.problems[0].kind == kind, words(result)
        assert check(judge, tmp_path, HONEST).ok  # the judge's stream and the worker went on


def test_a_candidate_runs_on_no_gpu_when_one_of_them_has_no_sandbox():
    """Code an LLM wrote runs only in sandboxed sessions, on every GPU of the run: where one GPU's
    backend has no sandboxed twin (a Ray actor), the candidate runs nowhere, not on the GPUs that
    have one, and the user's own code still runs on the plain sessions."""
    from types import SimpleNamespace

    from kernel_lsp.model import CompileOptions
    from kernel_lsp.optimizer.evaluator import GpuEvaluator

    ran: list[str] = []

    class Session:
        available, reason, device = True, "", None

        def __init__(self, name: str, boxed: bool) -> None:
            self.name, self.boxed = name, boxed

        def sandboxed_session(self):
            ran.append(f"{self.name} twin asked")
            return Session(f"{self.name}-judged", False) if self.boxed else None

        def close(self) -> None:
            pass

    spec = SimpleNamespace(is_entry=False, kernel="k", name="k", kernels=["k"])
    local, remote = Session("local", boxed=True), Session("ray", boxed=False)
    evaluator = GpuEvaluator(local, "/w/k.cu", spec, CompileOptions(), more_sessions=[remote])
    result = evaluator.check("__global__ void k() { /* the LLM's */ }", "__global__ void k() {}")
    assert not result.ok and result.problems[0].startswith("sandbox: "), result.problems
    assert evaluator.judged_sessions == []  # no judged pool was opened, on any GPU
    assert evaluator._sessions(trusted=True) is evaluator.pool  # the user's code: the plain GPUs
    assert ran == ["local twin asked", "ray twin asked"]


# Remembers its answers between calls by a fingerprint of the inputs (as CACHES), and hides the
# cache from the judge's probe (runner/judge.seen_inputs_faster), which sets each run on new
# inputs against the runs on seen inputs around it: on the 4 calls after each run on inputs new
# to it, it does the slow honest work again, so the runs just after a new one are slow as well.
# Most of its runs still copy a kept answer.

CACHES_AND_SLOWS_AFTER_NEW = (
    HEAD
    + CACHE_STATE
    + r"""
extern "C" void scale(const float* x, float* y, int n)
{
    kept* s = kept_state();
    entry* e = n >= 4 ? find(s, x, n) : 0;
    if (e && e->state == 2) {
        if (s->slow_left > 0) {
            --s->slow_left;
            work(x, y, n);
        } else {
            memcpy(y, e->out, n * sizeof(float));
        }
        return;
    }
    work(x, y, n);
    if (n >= 4) keep(add(s, x, n), y, n);
    s->slow_left = 4;
}
"""
)


# Honest while verified (its count of calls per size is thread-local, as QUITS_WHEN_TIMED's);
# once timed, it skips the work on inputs it sees for the first time (their outputs stay the
# judge's poison), does it on the second sight and keeps the answer, and copies it after that.
# Each set's outputs are right after its last run, the only ones the judge checked; its runs on
# new inputs are as fast as its cached ones, so the probe sees no gap.
SKIPS_NEW_INPUTS_ONCE_TIMED = (
    HEAD
    + CACHE_STATE
    + r"""
extern "C" void scale(const float* x, float* y, int n)
{
    static __thread int sizes[8];
    static __thread long calls[8];
    int slot = 0;
    while (slot < 7 && sizes[slot] && sizes[slot] != n) ++slot;
    sizes[slot] = n;
    if (calls[slot]++ < VERIFICATION_CALLS || n < 4) {
        work(x, y, n);
        return;
    }
    kept* s = kept_state();
    entry* e = find(s, x, n);
    if (!e) {
        add(s, x, n);
        return;
    }
    if (e->state == 1) {
        work(x, y, n);
        keep(e, y, n);
        return;
    }
    memcpy(y, e->out, n * sizeof(float));
}
""".replace("VERIFICATION_CALLS", str(LARGE_VERIFICATION_CALLS))
)


@pytest.fixture(scope="module", params=["landlock", "bwrap"])
def judged_long(request, tmp_path_factory):
    """120 samples a timing: 6 or 7 runs on new inputs, and a cache that slows the 4 runs after
    each still copies its kept answer in most runs (in 30, the slowed runs were the median). In
    each sandbox the accused can run in."""
    from kernel_lsp.fence.sandbox import bwrap_available

    if request.param == "bwrap" and bwrap_available(str(tmp_path_factory.mktemp("bwrap"))):
        pytest.skip(bwrap_available(str(tmp_path_factory.mktemp("bwrap"))))
    timing = TimingSettings(warmup_s=0.0, budget_s=4.0, min_samples=120, max_samples=120)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNEL_LSP_SANDBOX", request.param)
        with GpuSession(fake=True, timing=timing, sandboxed=True) as session:
            assert session.available, session.reason
            yield session, request.param


@pytest.mark.parametrize(
    ("source", "kind"),
    [(CACHES_AND_SLOWS_AFTER_NEW, "suspicious"), (SKIPS_NEW_INPUTS_ONCE_TIMED, "timing_mismatch")],
    ids=["slows-after-new", "skips-new"],
)
def test_a_result_kept_between_timed_runs_is_caught_however_it_hides(
    judged_long, plain, tmp_path, source, kind
):
    """Both keep answers and mostly copy them: in-process they pass at several times the honest
    work's speed; judged, each is refused: the runs it slows after new inputs do not hide the
    kept answers from the probe (runner/judge.seen_inputs_faster), and the outputs of each first
    run on a set are checked (runner/isolation.TimedSets.keep_first_outputs)."""
    honest = check(plain, tmp_path, HONEST_SLOW)
    fooled = check(plain, tmp_path, source)
    assert honest.ok and fooled.ok, (words(honest), words(fooled))
    gain = honest.timings[-1].measurement.median_s / fooled.timings[-1].measurement.median_s
    assert gain > 2, f"in-process the cache should pay: {gain:.2f}x"
    judged, mechanism = judged_long
    result = check(judged, tmp_path, source)
    assert judged.backend.sandbox["files"].startswith("bwrap") is (mechanism == "bwrap")
    assert not result.ok, f"judged, its figure was {result.timings[-1].measurement.median_s * 1e6:.0f} us"
    assert result.problems[0].kind == kind, words(result)
    if kind == "timing_mismatch":
        assert "its first timed launch on it" in words(result), words(result)
    else:
        assert "already seen" in words(result), words(result)
    assert check(judged, tmp_path, HONEST_SLOW).ok  # the same work, honest, is not refused


# Its work in a child process: the one place the fake GPU's judged clock, the CPU time of the
# accused's own processes (judge.AccusedProcess.cpu_seconds), would not see it. The child writes
# the shared output buffer; where fork is refused it writes nothing, and the outputs hold poison.
WORKS_IN_A_CHILD = r"""
#include <sys/wait.h>
#include <unistd.h>
extern "C" void scale(const float* x, float* y, int n)
{
    pid_t child = fork();
    if (child == 0) {
        for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];
        _exit(0);
    }
    if (child > 0) waitpid(child, nullptr, 0);
}
"""


@pytest.mark.parametrize("mechanism", ["landlock", "bwrap"])
def test_work_handed_to_a_child_process_is_refused_where_the_clock_is_cpu_time(
    mechanism, tmp_path, monkeypatch
):
    """The fake GPU's judge counts the CPU time of the accused's processes, which cannot fork: a
    child that did the work would be off that clock (its time never counted). The judge's buffers
    are shared maps, which a forked child would write for its parent; judged, in either sandbox,
    fork is refused and the outputs hold the judge's poison."""
    from kernel_lsp.fence.sandbox import bwrap_available

    if mechanism == "bwrap" and (why := bwrap_available(str(tmp_path))):
        pytest.skip(why)
    monkeypatch.setenv("KERNEL_LSP_SANDBOX", mechanism)
    with GpuSession(fake=True, timing=FAST, sandboxed=True) as judge:
        result = check(judge, tmp_path, WORKS_IN_A_CHILD)
    assert not result.ok and result.problems[0].kind == "mismatch", words(result)
