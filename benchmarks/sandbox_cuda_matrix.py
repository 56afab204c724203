"""Which part of the sandbox stops cuInit: each restriction alone and together, in a fresh child,
then cuInit. Prints one line per case (the child's answer). Run on a GPU machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, sys
case = sys.argv[1]; folder = sys.argv[2]
from kernel_lsp.fence import sandbox as sb
out = {"case": case}
try:
    if "landlock" in case:
        extra = {"shm": ["/dev/shm"], "devdir": ["/dev"], "proc": ["/dev", "/proc", "/sys"], "sys": ["/sys"],
                 "procall": ["/proc"]}.get(case.split("-")[-1].split("+")[0], [])
        if extra:
            import landlockpy
            from landlockpy import AccessFS, Ruleset
            rights = (AccessFS.WRITE_FILE | AccessFS.REMOVE_DIR | AccessFS.REMOVE_FILE | AccessFS.MAKE_CHAR
                      | AccessFS.MAKE_DIR | AccessFS.MAKE_REG | AccessFS.MAKE_SOCK | AccessFS.MAKE_FIFO
                      | AccessFS.MAKE_BLOCK | AccessFS.MAKE_SYM | AccessFS.REFER | AccessFS.TRUNCATE)
            with Ruleset(handled_fs=rights) as r:
                r.allow_path(folder, rights)
                for p in extra:
                    r.allow_path(p, rights)
                for d in sb.writable_devices():
                    r.allow_path(d, AccessFS.WRITE_FILE | AccessFS.TRUNCATE)
                r.restrict()
        else:
            sb.restrict_writes(folder)
    if "seccomp" in case:
        sb.restrict_syscalls()
    if "env" in case:
        os.environ["TMPDIR"] = folder
    from cuda.bindings import driver
    err = driver.cuInit(0)[0]
    out["cuInit"] = str(err)
    if int(err) == 0:
        e, dev = driver.cuDeviceGet(0)
        e2, ctx = driver.cuDevicePrimaryCtxRetain(dev)
        out["ctx"] = str(e2)
except Exception as e:
    out["error"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""

from kernel_lsp.fence.sandbox import bwrap_command, find_bwrap  # noqa: E402

cases = [
    "none",
    "landlock",
    "landlock-shm",
    "landlock-devdir",
    "landlock-proc",
    "landlock-sys",
    "landlock-procall",
    "seccomp",
    "landlock+seccomp",
    "bwrap",
    "bwrap+seccomp",
    # compute-sanitizer over a confined process: around it (Landlock + seccomp in the child) and
    # inside bubblewrap with it (the proof gate's two ways for host code an LLM wrote).
    "sanitizer:landlock+seccomp",
    "sanitizer:bwrap+seccomp",
]
sanitizer = shutil.which("compute-sanitizer")
for case in cases:
    folder = tempfile.mkdtemp(prefix="klsp-box-")
    inner = case.split(":")[-1]
    cmd = [sys.executable, "-c", CHILD, inner.replace("bwrap", "").strip("+") or "none", folder]
    if case.startswith("sanitizer:"):
        if sanitizer is None:
            print(case, "no compute-sanitizer on PATH")
            continue
        cmd = [sanitizer, "--tool", "memcheck", *cmd]
    if "bwrap" in case:
        cmd = bwrap_command(find_bwrap() or "bwrap", folder, cmd)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, "TMPDIR": folder})
    answers = [line for line in p.stdout.splitlines() if line.startswith("{")]
    got = answers[-1] if answers else json.dumps({"rc": p.returncode, "stderr": p.stderr[-300:]})
    if case.startswith("sanitizer:"):  # and what the sanitizer said (its summary, or why it stopped)
        said = [line for line in (p.stdout + p.stderr).splitlines() if line.startswith("=========")]
        got += " | " + " / ".join(said[-2:])
    print(case, got, flush=True)
print("after: /dev/shm has", sorted(os.listdir("/dev/shm"))[:10])
