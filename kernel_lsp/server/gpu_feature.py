"""GPU verification and timing in the editor: after a file compiles cleanly and has a spec, its
kernels are verified and timed on the GPU (in the GPU worker process, driven from one background
thread so the event loop never waits), and the figures feed hover, code lenses and diagnostics."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ..api.gpu import GPU_OFF_IN_EDITOR, KernelCheck, OpenGpu, no_gpu_message
from ..api.sources import spec_path_for
from ..workspace import gpu_label, gpu_name

if TYPE_CHECKING:
    from ..workspace import GpuPool

log = logging.getLogger(__name__)


class GpuFeature:
    def __init__(self, server) -> None:
        self.server = server
        self.session: OpenGpu | None = None  # the first GPU's (device name, the optimizer)
        self.pool: GpuPool | None = None  # one session per GPU of gpu.devices
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernel-lsp-gpu")
        self.results: dict[str, list[KernelCheck]] = {}
        self._verified: dict[str, str] = {}
        self._running: set[str] = set()
        self._again: set[str] = set()
        self._tasks: dict[str, asyncio.Future] = {}  # keeps running tasks referenced

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        settings = self.server.settings
        if not settings.gpu_enabled:
            self.server.gpu_down(no_gpu_message(GPU_OFF_IN_EDITOR))
            return
        loop = asyncio.get_running_loop()
        try:
            sessions, reason = await loop.run_in_executor(
                self._thread, functools.partial(self.server.engine.open_gpus, None, log.info)
            )
        except Exception as e:  # Ray asked for and not there: compile checks go on without a GPU
            sessions, reason = [], str(e)
        if not sessions:
            self.server.gpu_down(no_gpu_message(reason))
            log.info("GPU checks off: %s", reason)
            self.server.send_status(None)
            return
        # One thread per GPU: files are verified in parallel, each file wholly on one GPU.
        self.pool = self.server.engine.gpu_pool(sessions)
        self._thread.shutdown(wait=False)
        self._thread = ThreadPoolExecutor(max_workers=len(sessions), thread_name_prefix="kernel-lsp-gpu")
        session = sessions[0]
        self.session = session
        self.server.gpu_up(self, gpu_name(session.device, session.host))
        log.info(
            "GPU checks on %s",
            ", ".join(f"{gpu_label(s)} ({s.device.name if s.device else '?'})" for s in sessions),
        )
        self.server.send_status(None)
        # Files checked before the GPU answered get verified now.
        for path, check in list(self.server.analysis.results.items()):
            self.after_check(path, check, None)

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.close()
        self.pool = None
        self.session = None
        self.server.gpu_down()

    # --- scheduling ---------------------------------------------------------------------------

    def after_check(self, path: str, check, snap) -> None:
        if self.session is None or not path.endswith(".cu") or check.errors or not check.checked:
            return
        if not self.server.may_run_spec(path):  # verification runs the spec: only on the user's action
            return
        if not os.path.exists(spec_path_for(path)) and self.server.snapshot(spec_path_for(path)).text is None:
            return
        if path in self._running:
            self._again.add(path)
            return
        self._running.add(path)
        self._tasks[path] = asyncio.ensure_future(self._verify(path))

    async def _verify(self, path: str) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                self._again.discard(path)
                snap = self.server.snapshot(path)
                spec_text = self.server.snapshot(spec_path_for(path)).text
                text = snap.text
                if text is None:
                    try:
                        text = self.server.engine.file_text(path)
                    except (OSError, UnicodeDecodeError):
                        return
                try:
                    disk_spec = self.server.engine.file_text(spec_path_for(path))
                except (OSError, UnicodeDecodeError):
                    disk_spec = ""
                engine = self.server.engine
                key = hashlib.sha256(
                    repr((text, spec_text or disk_spec, engine.settings_for(path))).encode()
                ).hexdigest()
                if self._verified.get(path) == key:
                    return
                pool = self.pool
                if pool is None:
                    return
                self.server.send_status("checking", f"verifying {os.path.basename(path)} on the GPU")
                session, verification = await loop.run_in_executor(
                    self._thread, pool.run, functools.partial(self._verify_on, engine, path, text, spec_text)
                )
                checks = verification.checks
                now = self.server.snapshot(path)
                if now.version != snap.version:
                    continue  # the document moved on while the GPU worked: verify the new text
                self._verified[path] = key
                self.results[path] = checks
                diags = [d for k in checks for d in k.diagnostics]
                self.server.analysis.set_findings(f"gpu:{path}", diags)
                self._refresh_lenses()
                if self.server.settings.achieved_occupancy and any(k.ok and k.timings for k in checks):
                    # After the verdict is published; the editor never waits on the profile.
                    self.server.send_status("checking", f"profiling {os.path.basename(path)} (ncu)")
                    await loop.run_in_executor(self._thread, engine.profile, session, verification)
                    self._refresh_lenses()
                if path not in self._again:
                    return
        except Exception:
            log.exception("GPU verification of %s failed", path)
        finally:
            self._running.discard(path)
            self.server.send_status(None)

    @staticmethod
    def _verify_on(engine, path: str, text: str, spec_text: str | None, session: OpenGpu):
        """The whole file on one GPU: compiled once for its exact arch, then every spec'd kernel
        verified and timed on that artifact."""
        return session, engine.verify(session, path, text, spec_text)

    def _refresh_lenses(self) -> None:
        caps = self.server.client_capabilities.workspace
        if caps and caps.code_lens and caps.code_lens.refresh_support:
            self.server.workspace_code_lens_refresh(None)
