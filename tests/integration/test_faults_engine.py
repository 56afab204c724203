"""The engine's guards against bad input and faults (issue 23): files read only when regular and
under a limit, compiles under a deadline and a memory limit that are never cached when cut short,
workers that end with their parent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from fault_inputs import KERNEL, alive, sleep_in_phase, wait_gone

from kernel_lsp.compile import CompileOptions, compile_source
from kernel_lsp.compile import compile_commands as cc
from kernel_lsp.compile.cache import CompileCache
from kernel_lsp.compile.jobs import JobFailed, WorkerPool, run_jobs
from kernel_lsp.files import FileProblem, read_regular, read_source
from kernel_lsp.model import CompileResult, not_checked_in_time

REPO = Path(__file__).resolve().parents[2]


def test_a_fifo_is_never_opened_for_reading_and_a_device_never_read(tmp_path):
    os.mkfifo(tmp_path / "p.cu")
    done = threading.Event()
    outcome: list = []

    def read() -> None:
        try:
            read_regular(str(tmp_path / "p.cu"), 1 << 20)
        except FileProblem as e:
            outcome.append(str(e))
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(5), "open() of a FIFO blocked"  # before: blocked until a writer came
    assert outcome == [f"{tmp_path / 'p.cu'} is a FIFO (named pipe), not a regular file"]
    with pytest.raises(FileProblem, match="a character device"):
        read_regular("/dev/zero", 1 << 20)
    text, problem = read_source("/dev/zero")
    assert text is None and problem is not None and "character device" in problem.message


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path):
    sparse = tmp_path / "big.cuh"
    with open(sparse, "wb") as f:
        f.truncate(2 * 2**30)
    with pytest.raises(FileProblem) as e:
        read_regular(str(sparse), 64 * 2**20)
    assert e.value.size == 2 * 2**30 and "2.0 GiB, over the 64.0 MiB limit" in str(e.value)
    # As a header, it is an error at its #include: no compiler reads 2 GiB of zeros.
    main = tmp_path / "f.cu"
    main.write_text('#include "big.cuh"\n' + KERNEL)
    r = compile_source(main.read_text(), str(main), CompileOptions(arch="sm_90"))
    assert not r.ok and r.diagnostics[0].line == 1 and "over the 64.0 MiB limit" in r.diagnostics[0].message


def test_results_cut_short_are_never_cached():
    cache = CompileCache()
    cut = CompileResult("k.cu", "sm_90", False, [not_checked_in_time("k.cu", 3, "checkTimeoutSeconds")])
    cache.put("key", cut)
    assert cache.get("key") is None
    oom = CompileResult("k.cu", "sm_90", False, [], log="LLVM ERROR: out of memory")
    cache.put("key", oom)
    assert cache.get("key") is None
    fine = CompileResult("k.cu", "sm_90", True)
    cache.put("key", fine)
    assert cache.get("key") is fine


def test_a_job_over_its_memory_limit_is_out_of_memory_and_the_worker_goes_on():
    results = run_jobs(bytearray, [(2**30,), (16,)], workers=1, timeout_s=60, memory_bytes=256 * 2**20)
    assert isinstance(results[0], JobFailed) and results[0].out_of_memory, results[0]
    assert "limit 256 MiB" in results[0].detail
    assert results[1] == bytearray(16)


def test_a_timeout_says_what_the_job_was_doing():
    pool = WorkerPool(1, "spawn")
    try:
        failed = pool.submit(sleep_in_phase, ("spec", 600), 3).result(60)
        assert failed == JobFailed("timeout", "", "spec", 3)
        assert pool.submit(os.getpid, (), 30).result(60) > 0  # a fresh worker took over
    finally:
        pool.close()


def test_a_response_file_that_is_a_fifo_makes_its_entry_unusable_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "flags.rsp")
    entries = [{"directory": str(tmp_path), "file": "k.cu", "command": "nvcc @flags.rsp -c k.cu"}]
    (tmp_path / "compile_commands.json").write_text(json.dumps(entries))
    start = time.monotonic()
    lookup = cc.flags_for(str(tmp_path / "k.cu"), str(tmp_path))
    assert time.monotonic() - start < 5
    assert lookup.flags is None and lookup.problem is not None
    assert "names the response file" in lookup.problem and "FIFO" in lookup.problem


def test_a_database_is_read_entry_by_entry_and_its_errors_keep_their_place(tmp_path):
    good = {"directory": str(tmp_path), "file": "k.cu", "command": "nvcc -DX=1 -c k.cu"}
    path = tmp_path / "compile_commands.json"
    path.write_text("[\n" + json.dumps(good) + ",\n" + json.dumps(good) + "\n  {}]")
    db = cc.load_database(str(path))
    assert db.problem == f"{path} is not valid JSON: Expecting ',' delimiter at line 4 column 3"
    path.write_text(json.dumps([good] * 3))
    assert cc.load_database(str(path)).entries[str(tmp_path / "k.cu")].defines == ("X=1",)
    path.write_text(json.dumps({"not": "a list"}))
    assert "must hold a JSON list of entries, not a dict" in (cc.load_database(str(path)).problem or "")


GPU_WORKER_PARENT = textwrap.dedent(
    """\
    import sys, time
    from kernel_lsp.evaluation.worker_process import WorkerProcess
    w = WorkerProcess(0, fake=True)
    print(w.proc.pid, flush=True)
    time.sleep(600)
    """
)


def test_the_gpu_worker_ends_with_the_process_that_started_it(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(GPU_WORKER_PARENT)
    parent = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        time.sleep(1.0)  # its start-up (imports) done
        assert alive(worker)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert wait_gone({worker}, 5.0) == set()  # before: it ran on
    finally:
        if parent.poll() is None:
            parent.kill()


def test_entries_share_their_flags_only_when_only_their_file_and_outputs_differ(tmp_path):
    entries = [
        {
            "directory": str(tmp_path),
            "file": f"{n}.cu",
            "command": f"nvcc -DSAME -o {n}.o -MF {n}.d -c {tmp_path}/{n}.cu",
        }
        for n in ("a", "b")
    ]
    entries.append({"directory": str(tmp_path), "file": "c.cu", "command": "nvcc -DOTHER -o c.o -c c.cu"})
    entries.append(
        {
            "directory": str(tmp_path),
            "file": "d.cu",
            "arguments": ["nvcc", "-DSAME", "-o", "d.o", "-c", "d.cu"],
        }
    )
    path = tmp_path / "compile_commands.json"
    path.write_text(json.dumps(entries))
    db = cc.load_database(str(path))
    a, b, c, d = (db.flags(str(tmp_path / f"{n}.cu")) for n in "abcd")
    assert a is not None and b is not None and c is not None and d is not None
    assert (a.defines, b.defines, c.defines, d.defines) == (("SAME",), ("SAME",), ("OTHER",), ("SAME",))
    assert (a.file, b.file, c.file) == tuple(str(tmp_path / f"{n}.cu") for n in "abc")
    assert db.entries[a.file] is db.entries[b.file]  # parsed once
    assert len(db.distinct_flags()) == 3


def test_closing_waits_for_the_idle_workers_together_not_one_after_another(monkeypatch):
    # The server's exit waits on this: idle workers that do not leave at once (still starting,
    # under load) each cost their wait and then the kill's, one after another.
    import kernel_lsp.compile.jobs as jobs

    pool = WorkerPool(3, "spawn")
    waits: list[float] = []
    real_wait = jobs._Worker.wait_or_kill
    monkeypatch.setattr(jobs._Worker, "ask_to_leave", lambda self: None)  # none leaves by itself
    monkeypatch.setattr(jobs._Worker, "wait_or_kill", lambda self, t: waits.append(t) or real_wait(self, t))
    try:
        done = [pool.submit(sleep_in_phase, ("x", 0.5), 30) for _ in range(3)]
        assert all(f.result(60) is None for f in done)  # three workers, now idle
    finally:
        pool.close()
    assert len(waits) == 3
    assert sum(waits) <= jobs.IDLE_LEAVE_S + 0.5, waits  # one shared deadline, not 3 x 2 s
