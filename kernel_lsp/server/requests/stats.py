"""`kernelLsp/stats`: a small custom request with the analysis' counters, for tests and
benchmarks (how many checks reached NVRTC, what is in flight). Answers at once, never waits."""

from __future__ import annotations

import os

STATS_REQUEST = "kernelLsp/stats"


def register(server) -> None:
    @server.feature(STATS_REQUEST)
    def stats(ls, params=None) -> dict:
        a = ls.analysis
        return {
            "compiles": a.compiles,
            "inFlight": len(a._running),
            "checkedFiles": len(a.results),
            "pid": os.getpid(),
            "workersRunning": a.workers_running,
            "idleStops": a.idle_stops,
            "firstLooks": a.first_looks,
            "cancels": a.cancels,
            "clangd": ls.clangd.stats(),
        }
