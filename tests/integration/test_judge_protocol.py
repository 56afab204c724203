"""The judged timing protocol against candidates that schedule the original's exact work to look
faster (runner/judged_sets.py, runner/judge.HostClock), on the fake GPU: the launchers run for
real on the host, with no fence in front of them, as if past every static check.

- Inputs reach the accused only inside the timed request that times them: a candidate that
  does the work for each set as soon as it is handed the set's buffers (and answers from that
  when timed) gains nothing, where it did when every timing set's inputs sat in its buffers
  from the start.
- The two sides of an A/B map buffers of their own: a candidate that writes denormals into the
  inputs it is handed (the original's too, where they were the same buffers) slows only itself.
- The judge's stand-in, whose time is taken off each figure, runs in a process of its own: a
  candidate that patches its own process to be slow when the stand-in would run there makes
  itself no faster."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_judge_boundary import HEAD, OPTIONS, SPEC

from kernel_lsp.compile import find_toolchain
from kernel_lsp.fence.sandbox import in_process_available
from kernel_lsp.gpu import GpuSession, check_file
from kernel_lsp.runner.timing import TimingSettings

pytestmark = [
    pytest.mark.skipif(find_toolchain().problem is not None, reason="nvcc or g++ missing"),
    pytest.mark.skipif(
        in_process_available() is not None, reason=f"no sandbox here: {in_process_available()}"
    ),
]

TIMING = TimingSettings(warmup_s=0.0, budget_s=0.3, min_samples=15, max_samples=40)
# One size for verification and timing: 20000 elements, 40 multiply-adds each (about a
# millisecond a call on the host), far above what a request costs.
HEAVY_SPEC = SPEC.replace('[{"n": 1000}, {"n": 20000}]', '[{"n": 20000}]')

WORK = r"""
static void work(const float* x, float* y, int n)
{
    for (int i = 0; i < n; ++i) {
        float acc = 0.0f;
        for (int r = 0; r < 40; ++r) acc = acc * 0.5f + x[i];  // 2x, the long way
        y[i] = acc;
    }
}
"""
HONEST = (
    WORK
    + r"""
extern "C" void scale(const float* x, float* y, int n) { work(x, y, n); }
"""
)

# Does the original's exact work for every set it is bound to, as the binding arrives (its
# process's `bind`, patched from its first call), keyed by a fingerprint of the inputs then in
# the buffers; when timed, answers a set it finds there with a copy. The table lives in memory
# the environment points to (statics are put back before every call).
PRECOMPUTES = (
    HEAD
    + WORK
    + r"""
struct entry { float key[4]; int n; float* out; };
static entry* table()
{
    const char* kept = getenv("KLSP_TABLE");
    if (kept) return (entry*)strtoull(kept, 0, 16);
    entry* t = (entry*)calloc(256, sizeof(entry));
    char text[32];
    snprintf(text, sizeof text, "%llx", (unsigned long long)t);
    setenv("KLSP_TABLE", text, 1);
    run_python(
        "import os, sys\n"
        "a = sys.modules['__main__']\n"  // the accused runs as `python -m`
        "real = a.Accused.bind\n"
        "def bind(self, m):\n"
        "    r = real(self, m)\n"
        "    os.environ['KLSP_AHEAD'] = '1'\n"
        "    try:\n"
        "        for call in self.plans[int(m['binding'])]: call()\n"
        "    finally:\n"
        "        del os.environ['KLSP_AHEAD']\n"
        "    return r\n"
        "a.Accused.bind = bind\n");
    return t;
}
extern "C" void scale(const float* x, float* y, int n)
{
    entry* t = table();
    if (n >= 4) {
        for (int k = 0; k < 256 && t[k].out; ++k) {
            if (t[k].n == n && memcmp(t[k].key, x, sizeof t[k].key) == 0) {
                memcpy(y, t[k].out, n * sizeof(float));
                return;
            }
        }
    }
    work(x, y, n);
    if (!getenv("KLSP_AHEAD") || n < 4) return;  // only work done ahead is kept
    for (int k = 0; k < 256; ++k) {
        if (!t[k].out) {
            t[k].n = n;
            memcpy(t[k].key, x, sizeof t[k].key);
            t[k].out = (float*)malloc(n * sizeof(float));
            memcpy(t[k].out, y, n * sizeof(float));
            return;
        }
    }
}
"""
)

# The original's work on denormal inputs: 2x as slow, or far slower, on a host without
# flush-to-zero. The sabotage keeps a pristine copy of each input it is handed (keyed by where
# it is), computes its own outputs from that copy, and leaves denormals in the buffer: an
# original that ran on the same buffers next would find them there.
SABOTAGES = (
    WORK
    + r"""
#include <cstdlib>
#include <cstring>
#include <cstdio>
struct kept { const float* where; float* copy; };
extern "C" void scale(const float* x, float* y, int n)
{
    const char* env = getenv("KLSP_KEPT");
    kept* table = env ? (kept*)strtoull(env, 0, 16) : 0;
    if (!table) {
        table = (kept*)calloc(4096, sizeof(kept));
        char text[32];
        snprintf(text, sizeof text, "%llx", (unsigned long long)table);
        setenv("KLSP_KEPT", text, 1);
    }
    int k = 0;
    while (k < 4095 && table[k].where && table[k].where != x) ++k;
    bool denormal = n > 0 && x[0] != 0.0f && x[0] > -1e-37f && x[0] < 1e-37f;
    if (!table[k].where || !denormal) {  // new inputs here: keep them
        table[k].where = x;
        free(table[k].copy);
        table[k].copy = (float*)malloc(n * sizeof(float));
        memcpy(table[k].copy, x, n * sizeof(float));
    }
    work(table[k].copy, y, n);
    float* writable = (float*)x;
    for (int i = 0; i < n; ++i) writable[i] = 1e-40f;  // denormal
}
"""
)

# Makes its process slow whenever the request is not its own timed batch: where the judge's
# stand-in ran in the candidate's process, its time (taken off the figure) would grow.
SLOWS_THE_STAND_IN = (
    HEAD
    + WORK
    + r"""
extern "C" void scale(const float* x, float* y, int n)
{
    if (!getenv("KLSP_PATCHED")) {
        setenv("KLSP_PATCHED", "1", 1);
        run_python(
            "import sys, time\n"
            "a = sys.modules['__main__']\n"
            "real = a.Accused.run\n"
            "def run(self, m):\n"
            "    if m.get('stand_in'): time.sleep(0.01)\n"
            "    return real(self, m)\n"
            "a.Accused.run = run\n");
    }
    work(x, y, n);
}
"""
)


def _files(tmp_path: Path, source: str) -> tuple[str, str]:
    (tmp_path / "scale.cu").write_text(source)
    (tmp_path / "scale.spec.py").write_text(HEAVY_SPEC)
    return str(tmp_path / "scale.cu"), str(tmp_path / "scale.spec.py")


def _median(session: GpuSession, tmp_path: Path, source: str) -> float:
    path, _spec = _files(tmp_path, source)
    (result,) = check_file(session, path, compile_options=OPTIONS)
    assert result.ok, result.message
    return result.timings[-1].measurement.median_s


@pytest.fixture(scope="module")
def judged():
    with GpuSession(fake=True, timing=TIMING, sandboxed=True) as session:
        assert session.available, session.reason
        yield session


def test_work_done_on_inputs_as_they_are_handed_over_gains_nothing(judged, tmp_path):
    honest = _median(judged, tmp_path, HONEST)
    ahead = _median(judged, tmp_path, PRECOMPUTES)
    print(f"judged: honest {honest * 1e6:.0f} us, work done as the sets arrive {ahead * 1e6:.0f} us")
    assert ahead >= 0.3 * honest, (ahead, honest)  # a copy instead: a twentieth of it


def test_a_candidate_that_slows_the_stand_in_where_it_would_run_gains_nothing(judged, tmp_path):
    honest = _median(judged, tmp_path, HONEST)
    slows = _median(judged, tmp_path, SLOWS_THE_STAND_IN)
    print(f"judged: honest {honest * 1e6:.0f} us, slows the stand-in {slows * 1e6:.0f} us")
    assert slows >= 0.3 * honest, (slows, honest)


def test_a_candidate_that_writes_denormals_into_its_inputs_slows_only_itself(judged, tmp_path):
    path, spec = _files(tmp_path, HONEST)
    base = judged.build_library(HONEST, path, OPTIONS)
    candidate = judged.build_library(SABOTAGES, path, OPTIONS)  # as the user's own: past the fence
    ab = judged.compare(HONEST, SABOTAGES, path, "scale", base, spec, candidate)
    print(f"judged A/B, sabotage against the original: {ab.speedup:.3f} [{ab.ci_low:.3f}, {ab.ci_high:.3f}]")
    assert ab.error is None, ab
    assert ab.ci_low <= 1.02, ab  # not offered
