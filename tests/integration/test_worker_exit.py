"""A worker told to end twice at once ends: the kernel's parent-death SIGTERM and the pool's own
can land together, the second inside the first one's handler (procs.end_process_group). A
worker that waited for itself there stayed alive forever, holding the server's stdout: the
editor, and CI's test client, waited for the server's end forever."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    from kernel_lsp import procs

    procs.become_worker(die_with_thread=False)

    class Groups(set):
        fired = False

        def __iter__(self):
            # The second SIGTERM lands while the first one's handler reads the tool groups.
            if not Groups.fired:
                Groups.fired = True
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
            return super().__iter__()

    procs._groups = Groups(procs._groups)
    print("ready", flush=True)
    time.sleep(60)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the worker's signals are Linux's")
def test_a_second_sigterm_inside_the_first_ones_handler_still_ends_the_worker():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.poll() is not None, "the worker waited for itself and never ended"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
