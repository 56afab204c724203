"""A teardown that hangs after its test failed ends the run, with every thread's stack, instead
of holding CI until its own deadline. pytest-timeout (pyproject's `timeout`) bounds setup, call
and teardown, but stops its timer as soon as a call fails (its pytest_exception_interact hook),
so a fixture's teardown that then waits forever (a server that never exits) had no bound: CI
spent its 90 minutes on one."""

from __future__ import annotations

import faulthandler
import os
import sys
import threading

import pytest

TEARDOWN_LIMIT_S = 300.0


class HangGuard:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item):
        done = threading.Event()

        def watch() -> None:
            if done.wait(TEARDOWN_LIMIT_S):
                return
            capture = item.config.pluginmanager.getplugin("capturemanager")
            if capture is not None:
                capture.suspend_global_capture(in_=True)
            sys.stderr.write(
                f"\n{item.nodeid}: teardown still running after {TEARDOWN_LIMIT_S:.0f} s; stacks:\n"
            )
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            sys.stderr.flush()
            os._exit(3)

        watcher = threading.Thread(target=watch, name="hang-guard", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            done.set()
