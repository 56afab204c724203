"""A laptop without a GPU using a GPU host through Ray, simulated on one machine.

Starts a Ray head over this machine's GPUs (`ray start --head --block`, its own process group),
then runs kernel-lsp as the laptop would: child processes that see no GPU
(`CUDA_VISIBLE_DEVICES=` empty) and join the head at its address (`--backend ray
--ray-address HOST:PORT`; kernel-lsp runs Ray in a bridge process, so a lost head cannot end
the client): `check` of a few samples, `bench` of one, one optimize round (tuner, 8 points), and
prints the device and host each result names. Then the failures: the head's GPUs all held (a
second client while the first holds them), and the head stopped under a client mid-run (its
answer says the connection was lost, the client exits by itself). Stops the head at the end.

Without a GPU it runs on fake GPUs (the runner's no-GPU mode, fake compiles in the clients):
the same processes and messages, no GPU figures.

    python benchmarks/remote_gpu.py [--files samples/vector_add,samples/dot] [--fake] [--port 6390]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

FILES = "samples/vector_add,samples/dot,samples/softmax"
TUNED = "samples/vector_add/vector_add_fp32.cu", "vector_add"


def first_cu(path: str) -> str:
    """A file for `bench` (it takes a file): the first .cu of a folder."""
    if os.path.isdir(path):
        return str(sorted(Path(path).glob("*.cu"))[0])
    return path


def fake_client(argv: list[str]) -> list[str]:
    """A client's arguments less a leading `--fake`, which selects fake GPUs (and fake compiles)
    in this process: its backends tell the Ray actors so themselves."""
    if argv[:1] != ["--fake"]:
        return argv
    from scaling import use_fake_gpus

    sys.path.insert(0, str(REPO / "tests" / "integration"))
    use_fake_gpus()
    return argv[1:]


def client_main(argv: list[str]) -> int:
    """A client: kernel-lsp's CLI in this process (`--fake` first: fake GPUs, fake compiles)."""
    argv = fake_client(argv)
    from kernel_lsp.cli.main import main

    return main(argv)


def head_env() -> dict[str, str]:
    return dict(os.environ, RAY_DISABLE_USAGE_STATS="1")


def start_head(port: int, gpus: int, fake: bool) -> subprocess.Popen:
    cmd = [sys.executable, "-c", "from ray.scripts.scripts import main; main()", "start", "--head",
           f"--port={port}", f"--num-gpus={gpus}", "--include-dashboard=false", "--disable-usage-stats",
           "--block"]  # fmt: skip
    log = open(Path(tempfile.gettempdir()) / f"kernel-lsp-ray-head-{port}.log", "w")  # noqa: SIM115
    head = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=head_env(), start_new_session=True)
    deadline = time.monotonic() + 90
    import socket

    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            time.sleep(3)  # the GCS answers before the raylet has registered the GPUs
            return head
        except OSError:
            if head.poll() is not None:
                raise SystemExit(f"the Ray head did not start (see {log.name})") from None
            time.sleep(0.5)
    raise SystemExit(f"the Ray head did not answer at :{port} in 90 s (see {log.name})")


def stop_head(head: subprocess.Popen, port: int, wait_s: float = 60) -> float:
    """SIGTERM to the head's process group (`ray start --block` stops its GCS and raylet);
    returns the seconds until they are gone."""
    start = time.monotonic()
    try:
        os.killpg(head.pid, signal.SIGTERM)
        head.wait(timeout=wait_s)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)
    # `ray start` leaves the head's address behind for `ray.init()` to find; a stopped head's
    # would make the next local cluster (a test's, kernel-lsp's own) try to join it.
    current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    with contextlib.suppress(OSError):
        if current.read_text().strip().endswith(f":{port}"):
            current.unlink()
    return time.monotonic() - start


def client(args: list[str], address: str, fake: bool, timeout: float) -> tuple[int, str, float]:
    """A no-GPU client's run of `kernel-lsp ARGS` through the head at `address`."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env.pop("RAY_ADDRESS", None)
    cmd = [sys.executable, __file__, "--client", *(["--fake"] if fake else []), *args]
    cmd += ["--backend", "ray", "--ray-address", address]
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        return done.returncode, done.stdout + done.stderr, time.monotonic() - start
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + f"\n(timed out after {timeout:.0f} s)", time.monotonic() - start


def fake_files(work: Path) -> list[str]:
    from scaling import FAKE_SOURCE, FAKE_SPEC

    paths = []
    for i in range(3):
        (work / f"k{i}.cu").write_text(FAKE_SOURCE + ("// fake: slow\n" if i else ""))
        (work / f"k{i}.spec.py").write_text(FAKE_SPEC)
        paths.append(str(work / f"k{i}.cu"))
    return paths


def devices_named(text: str) -> list[str]:
    """The GPUs (host and index, as `check -v` labels them) and devices a CLI output names."""
    labels = re.findall(r"kernel-lsp: ((?:\S+ )?GPU \d+): ", text)
    summary = [x.strip() for x in text.splitlines() if "verified on" in x][:1]
    if not labels:
        return summary
    return [f"{len(labels)} kernels on " + ", ".join(sorted(set(labels))), *summary]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--client"]:
        return client_main(argv[1:])
    if argv[:1] == ["--client-hold"]:
        return hold_main(fake_client(argv[1:])[0])
    if argv[:1] == ["--client-loop"]:
        rest = fake_client(argv[1:])
        return loop_main(rest[0], rest[1:])
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--files", default=FILES, help="samples to check (comma-separated)")
    p.add_argument("--fake", action="store_true")
    p.add_argument("--port", type=int, default=6390)
    p.add_argument("--timeout", type=float, default=75, help="seconds per client run")
    p.add_argument("--skip-failures", action="store_true", help="only the happy path")
    args = p.parse_args(argv)
    from kernel_lsp.evaluation.pool import visible_gpu_count

    gpus = visible_gpu_count()
    fake = args.fake or gpus == 0
    gpus = gpus if not fake else 2
    address = f"127.0.0.1:{args.port}"
    work = Path(tempfile.mkdtemp(prefix="kernel-lsp-remote-"))
    if fake:
        files = fake_files(work)
        tuned, kernel = files[0], "vadd"
    else:
        files = [str(REPO / f) for f in args.files.split(",")]
        tuned, kernel = str(REPO / TUNED[0]), TUNED[1]
    print(
        f"# head: {gpus} {'FAKE ' if fake else ''}GPU(s) at {address}; clients: CUDA_VISIBLE_DEVICES= (no GPU)",
        flush=True,
    )
    t0 = time.monotonic()
    # A `timeout` around this script stops the head too (SIGTERM runs the `finally` below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    head = start_head(args.port, gpus, fake)
    print(f"# head up in {time.monotonic() - t0:.1f} s", flush=True)
    failures = 0
    try:
        steps = [
            ("check", ["check", "-v", "--gpus", "all", *files]),
            ("bench", ["bench", first_cu(files[0]), "--json"]),
            (
                "optimize",
                [
                    "optimize",
                    tuned,
                    "--kernel",
                    kernel,
                    "--proposer",
                    "tune",
                    "--rounds",
                    "1",
                    "--candidates",
                    "8",
                    "--no-cache",
                    "--gpus",
                    "all",
                    "--json",
                    "--workspace",
                    str(work),
                ],
            ),
        ]
        for name, cmd in steps:
            code, out, seconds = client(cmd, address, fake, args.timeout)
            named = devices_named(out)
            if name in ("bench", "optimize"):
                named = sorted(set(re.findall(r'"(?:device|host)": "([^"]+)"', out)))[:4]
            ok = code in (0, 1) and named
            failures += not ok
            print(
                f"{name:9s} exit {code}  {seconds:6.1f} s  names: {'; '.join(named)[:220] or '-'}", flush=True
            )
            if not ok:
                print("   " + "\n   ".join(out.strip().splitlines()[-8:]), flush=True)
        if not args.skip_failures:
            failures += failure_cases(args, address, fake, files, gpus)
            failures += lost_connection(address, fake, files, head, args.port)
    finally:
        took = stop_head(head, args.port)
        print(f"# head stopped ({took:.1f} s); total {time.monotonic() - t0:.0f} s", flush=True)
    return 1 if failures else 0


def hold_main(address: str) -> int:
    """A client that takes every GPU of the cluster and keeps it (until killed)."""
    from kernel_lsp.evaluation.choose import open_backends

    backends = open_backends("ray", "all", address=address, log=lambda line: print(line, flush=True))
    print(f"holding {sum(1 for b in backends if b.available)} GPU(s)", flush=True)
    time.sleep(600)
    return 0


def loop_main(address: str, files: list[str]) -> int:
    """A client (an editor's server, say) that checks the files again and again through Ray:
    when the head goes, a round says it lost the connection, and the process goes on; the
    round after it is answered in seconds. One line a round."""
    import contextlib
    import io

    from kernel_lsp.cli.main import main

    lost_at = None
    for n in range(1, 100):
        out = io.StringIO()
        start = time.monotonic()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(["check", *files, "--backend", "ray", "--ray-address", address])
        text = out.getvalue()
        said = [x.strip() for x in text.splitlines() if "lost the connection" in x or "no Ray cluster" in x]
        print(
            f"round {n}: exit {code} in {time.monotonic() - start:.1f} s: {(said or ['ok'])[0][:200]}",
            flush=True,
        )
        if said and lost_at is None:
            lost_at = n
        elif lost_at is not None:
            return 0
    return 1


def failure_cases(args: argparse.Namespace, address: str, fake: bool, files: list[str], gpus: int) -> int:
    """Every GPU of the head held by another client: this one is told so, in seconds."""
    env = dict(
        os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    )
    holder = subprocess.Popen(
        [sys.executable, __file__, "--client-hold", *(["--fake"] if fake else []), address],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    held = ""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not held.startswith("holding"):
        held = holder.stdout.readline() if holder.stdout else ""
    code, out, seconds = client(["check", files[1]], address, fake, 90)
    said = "held by other" in out
    line = next((x for x in out.splitlines() if "held" in x), out.strip()[-160:])
    print(f"no-free-GPU  exit {code}  {seconds:5.1f} s  ({held.strip()}) {line.strip()[:170]}", flush=True)
    os.killpg(holder.pid, signal.SIGKILL)
    holder.wait()
    return 0 if said else 1


def lost_connection(address: str, fake: bool, files: list[str], head: subprocess.Popen, port: int) -> int:
    """The head stopped under a client mid-run: the client's answer says the connection was
    lost, it goes on (no hang, no exit), and its next request is answered in seconds."""
    env = dict(
        os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    )
    victim = subprocess.Popen(
        [sys.executable, __file__, "--client-loop", *(["--fake"] if fake else []), address, *files],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    first = victim.stdout.readline() if victim.stdout else ""  # one round done: it is mid-run now
    stopped = time.monotonic()
    stop_head(head, port)
    print(
        f"lost-head    head stopped {time.monotonic() - stopped:.1f} s after the client's {first.strip()}",
        flush=True,
    )
    try:
        out, _ = victim.communicate(timeout=180)
        code: Any = victim.returncode
    except subprocess.TimeoutExpired:
        victim.kill()
        out, code = "", "HUNG"
    for line in out.splitlines():
        print(f"   {line}", flush=True)
    print(
        f"lost-head    client exit {code}, {time.monotonic() - stopped:.0f} s after the head stopped",
        flush=True,
    )
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
