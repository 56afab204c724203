"""kernel-lsp on a large template-heavy project (benchmarks/template_corpus.py: generic kernels in
headers, many instance `.cu` files, CUB reductions, function-pointer template arguments, headers
that include each other, CMake's compile_commands.json with nvcc flags), before and after a
change, side by side with bare nvcc, in one run.

- save -> first findings and save -> resources, through the real server, for the slow file
  (register-tiled GEMMs, ~20 s of nvcc), a CUB reduction file and an instance file; each save
  changes a comment so that each is a real compile. "Resources" is when the server has nothing
  in flight any more (the full check published).
- `--check` of the whole project: wall time, peak RSS of the process tree, errors (the project is
  clean: every error is false), kernels named with a raw symbol or `<?>`; bare nvcc (`-cubin`
  with the database's flags, as many at once as --jobs) next to it.
- The server's resident memory (server + compile workers) at idle after it checked every file of
  the project, and after the idle workers ended.

    python benchmarks/large_project.py [--before /path/to/checkout] [--files 150] [--saves 3]
        [--jobs 2] [--skip check,server,memory]

`--before`: a checkout of the code to compare with (e.g. `git worktree add /tmp/before main`);
without it only the current code runs. Targets (issue 24): first findings <= 3 s on the ~20 s
file; no false error; every kernel named without a raw mangled string; server + workers <= 400 MB
at idle after a check of a 150-file project.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from template_corpus import Corpus, nvcc_arguments, write_corpus  # noqa: E402

from kernel_lsp.compile import find_toolchain  # noqa: E402
from kernel_lsp.procs import descendants  # noqa: E402

ARCH = "sm_90"


# --- process trees ------------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        return next(int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmRSS:")) / 1024
    except (OSError, StopIteration):
        return 0.0


def pss_mib(pid: int) -> float:
    """Proportional set size: each shared page (libpython, libLLVM, the C library) counted once
    across the processes that map it, split between them. Summed over a tree it is the tree's
    memory; summed RSS counts a shared page once per process."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        return next(int(ln.split()[1]) for ln in rollup.splitlines() if ln.startswith("Pss:")) / 1024
    except (OSError, StopIteration):
        return 0.0


def tree_rss_mib(pid: int, python_only: bool = False) -> float:
    """RSS of `pid` and its descendants; `python_only`: the server and its workers, not the
    compilers they run."""
    total = 0.0
    for p in descendants(pid):
        if python_only:
            try:
                exe = os.path.basename(os.readlink(f"/proc/{p}/exe"))
            except OSError:
                continue
            if not exe.startswith("python"):
                continue
        total += rss_mib(p)
    return total


class PeakSampler:
    """The peak RSS of a process tree, sampled every 0.1 s on a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss_mib(self.pid))
            self._stop.wait(0.1)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def run_sampled(cmd: list[str], env: dict | None = None, cwd: str | None = None) -> tuple[float, float, str]:
    """(wall s, peak tree RSS MiB, stdout) of one command."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd, text=True
    )
    with PeakSampler(proc.pid) as sampler:
        out, _ = proc.communicate()
    return time.perf_counter() - start, sampler.peak, out


# --- bare nvcc ----------------------------------------------------------------------------------


def bare_command(corpus: Corpus, unit: Path, out: str) -> list[str]:
    """The database's command, as nvcc builds the device side: -cubin for our arch."""
    nvcc = find_toolchain().nvcc
    assert nvcc
    args = nvcc_arguments(corpus.root, unit)
    keep = [a for a in args[1:] if not a.startswith("--generate-code") and a not in ("-c",)]
    keep = keep[: keep.index("-o")]
    return [nvcc, "-cubin", f"-arch={ARCH}", "-Xptxas", "-v", *keep, "-o", out]


def bare_nvcc_once(corpus: Corpus, unit: Path) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        subprocess.run(bare_command(corpus, unit, f"{tmp}/x.cubin"), capture_output=True, check=False)
        return time.perf_counter() - start


def bare_nvcc_project(corpus: Corpus, jobs: int) -> tuple[float, float, int]:
    """(wall s, peak RSS MiB of all nvcc trees at once, files with errors)."""
    peak = 0.0
    running: dict[int, subprocess.Popen] = {}
    failed = 0
    lock = threading.Lock()
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            with lock:
                pids = list(running)
            peak = max(peak, sum(tree_rss_mib(p) for p in pids))
            stop.wait(0.1)

    def one(unit: Path) -> int:
        with tempfile.TemporaryDirectory() as tmp:
            proc = subprocess.Popen(
                bare_command(corpus, unit, f"{tmp}/x.cubin"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            with lock:
                running[proc.pid] = proc
            code = proc.wait()
            with lock:
                running.pop(proc.pid, None)
            return code

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        codes = list(pool.map(one, corpus.units))
    wall = time.perf_counter() - start
    stop.set()
    sampler.join()
    failed = sum(1 for c in codes if c != 0)
    return wall, peak, failed


# --- kernel-lsp --check -------------------------------------------------------------------------


def env_for(code_root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(code_root)
    env["KERNEL_LSP_NVCC_TIMEOUT_S"] = "600"
    return env


def check_project(code_root: Path, corpus: Corpus, jobs: int) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "kernel_lsp",
        "--check",
        "--no-gpu",
        "--format",
        "json",
        "-j",
        str(jobs),
        "--compile-commands",
        str(corpus.database),
        str(corpus.root / "src"),
        str(corpus.root / "include"),
    ]
    wall, peak, out = run_sampled(cmd, env_for(code_root), cwd=str(corpus.root))
    try:
        data = json.loads(out)
    except json.JSONDecodeError:
        return {"wall": wall, "peak": peak, "errors": "n/a", "raw_names": "n/a", "kernels": 0}
    files = data.get("files", [])
    errors = sum(1 for f in files for d in f.get("diagnostics", []) if d.get("severity") == "error")
    kernels = [k for f in files for k in f.get("kernels", [])]
    raw = [k["name"] for k in kernels if "_Z" in k["name"] or "<?>" in k["name"]]
    no_line = sum(1 for k in kernels if not k.get("line"))
    return {
        "wall": wall,
        "peak": peak,
        "errors": errors,
        "raw_names": len(raw),
        "kernels": len(kernels),
        "no_line": no_line,
        "error_samples": [
            f"{os.path.relpath(d.get('path', f.get('path')), corpus.root)}:{d.get('line')}: {d.get('message')[:90]}"
            for f in files
            for d in f.get("diagnostics", [])
            if d.get("severity") == "error"
        ][:3],
    }


# --- the server ---------------------------------------------------------------------------------


class Server:
    def __init__(
        self,
        code_root: Path,
        corpus: Corpus,
        startup_checks: bool = False,
        idle_s: int | None = 300,
        clangd: bool = False,
    ) -> None:
        self.code_root = code_root
        self.corpus = corpus
        self.startup_checks = startup_checks
        self.idle_s = idle_s
        self.clangd = clangd
        self.client = LanguageClient("kernel-lsp-large-bench", "1")
        self.published: dict[str, list[tuple[int | None, float]]] = {}
        self.arrived = asyncio.Event()

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_publish(params: types.PublishDiagnosticsParams) -> None:
            self.published.setdefault(params.uri, []).append((params.version, time.perf_counter()))
            self.arrived.set()

        @self.client.feature("kernelLsp/status")
        def on_status(params) -> None:
            pass

        @self.client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
        def on_refresh(params) -> None:
            return None

    async def start(self) -> None:
        env = env_for(self.code_root)
        # Started in the project's folder: `python -m` puts the working folder first on the
        # path, and the benchmark's own checkout must not shadow the code under test.
        await self.client.start_io(
            sys.executable, "-m", "kernel_lsp", "--log-level", "WARNING", env=env, cwd=str(self.corpus.root)
        )
        await self.client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(),
                root_uri=self.corpus.root.as_uri(),
                initialization_options={
                    "arch": [ARCH],
                    "gpu": {"enabled": False},
                    # None: the server's default.
                    **({} if self.idle_s is None else {"workerIdleSeconds": self.idle_s}),
                    "startupCheckFiles": 100000 if self.startup_checks else 0,
                    "compileCommands": str(self.corpus.database),
                    # kernel-lsp's own work only, unless the whole tree is measured.
                    "clangd": {"enabled": self.clangd},
                },
            )
        )
        self.client.initialized(types.InitializedParams())

    @property
    def pid(self) -> int:
        return self.client._server.pid  # type: ignore[union-attr]

    async def stats(self, method: str = "kernelLsp/stats") -> dict:
        result = await self.client.protocol.send_request_async(method, None)
        return result if isinstance(result, dict) else result._asdict()

    async def idle(self, timeout: float = 1800) -> None:
        """Until nothing is in flight or queued."""
        deadline = time.monotonic() + timeout
        quiet = 0
        while time.monotonic() < deadline:
            s = await self.stats()
            w = await self.stats("kernelLsp/watchStats")
            quiet = quiet + 1 if s["inFlight"] == 0 and w["queued"] == 0 else 0
            if quiet >= 5:
                return
            await asyncio.sleep(0.2)
        raise TimeoutError("the server never went idle")

    async def save_timings(self, path: Path, saves: int) -> tuple[list[float], list[float]]:
        """[(save -> first publish)], [(save -> nothing in flight)] over `saves` saves."""
        uri = path.as_uri()
        base = path.read_text()
        version = 1
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="cuda", version=version, text=base)
            )
        )
        await self.idle()
        first, full = [], []
        for _ in range(saves):
            version += 1
            text = base + f"// save {version}\n"
            path.write_text(text)
            self.published[uri] = []
            t0 = time.perf_counter()
            self.client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(version=version, uri=uri),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
                )
            )
            self.client.text_document_did_save(
                types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
            )
            while not any(v == version for v, _ in self.published.get(uri, [])):
                self.arrived.clear()
                await asyncio.wait_for(self.arrived.wait(), 600)
            first.append(next(t for v, t in self.published[uri] if v == version) - t0)
            await asyncio.sleep(0.05)
            while (await self.stats())["inFlight"]:
                await asyncio.sleep(0.02)
            full.append(time.perf_counter() - t0)
        path.write_text(base)
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        return first, full

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 30)
            self.client.exit(None)
        finally:
            await self.client.stop()


async def server_saves(code_root: Path, corpus: Corpus, files: list[Path], saves: int) -> dict[str, tuple]:
    server = Server(code_root, corpus)
    await server.start()
    out = {}
    try:
        for path in files:
            out[str(path)] = await server.save_timings(path, saves)
    finally:
        await server.stop()
    return out


async def server_memory(code_root: Path, corpus: Corpus) -> dict:
    """Every file of the project checked at start-up; then RSS at idle and after the workers end."""
    server = Server(code_root, corpus, startup_checks=True, idle_s=20)
    await server.start()
    try:
        start = time.perf_counter()
        with PeakSampler(server.pid) as sampler:
            await asyncio.sleep(2)
            await server.idle()
        checked = (await server.stats())["checkedFiles"]
        wall = time.perf_counter() - start
        await asyncio.sleep(2)
        idle = tree_rss_mib(server.pid, python_only=True)
        server_alone = rss_mib(server.pid)
        workers = len(descendants(server.pid)) - 1
        deadline = time.monotonic() + 120
        while (await server.stats())["workersRunning"] and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        await asyncio.sleep(1)
        ended = tree_rss_mib(server.pid, python_only=True)
    finally:
        await server.stop()
    return {
        "checked": checked,
        "wall": wall,
        "peak": sampler.peak,
        "idle": idle,
        "server": server_alone,
        "processes": workers,
        "ended": ended,
    }


# --- the whole tree beside clangd alone (issue 33) ---------------------------------------------


def tree_parts_mib(pid: int, measure=rss_mib) -> dict[str, float]:
    """Memory (`measure`: RSS or PSS) of a server's tree by part: the server, its compile workers
    (Python children), clangd, and the compilers running now."""
    parts = {"server": 0.0, "workers": 0.0, "clangd": 0.0, "compilers": 0.0}
    for p in descendants(pid):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{p}/exe"))
        except OSError:
            continue
        part = (
            "server"
            if p == pid
            else "clangd"
            if exe.startswith("clangd")
            else "workers"
            if exe.startswith("python")
            else "compilers"
        )
        parts[part] += measure(p)
    return parts


async def open_and_parse(client: LanguageClient, paths: list[Path]) -> None:
    """Open `paths` as an editor does and wait until clangd has parsed each (documentSymbol)."""
    for path in paths:
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=path.as_uri(), language_id="cuda", version=1, text=path.read_text()
                )
            )
        )
    for path in paths:
        await asyncio.wait_for(
            client.text_document_document_symbol_async(
                types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=path.as_uri()))
            ),
            300,
        )


async def tree_memory(code_root: Path, corpus: Corpus, opened: list[Path], settle_s: float) -> dict:
    """Every file checked at start-up with clangd on and `opened` open in the editor: peak, idle
    (`settle_s` after the check) and, where the workers end sooner, after they ended."""
    # The server's own default for workerIdleSeconds: the tree as a user gets it.
    server = Server(code_root, corpus, startup_checks=True, idle_s=None, clangd=True)
    await server.start()
    try:
        with PeakSampler(server.pid) as sampler:
            await asyncio.sleep(2)
            await open_and_parse(server.client, opened)
            await server.idle()
            await asyncio.sleep(settle_s)
            idle = tree_parts_mib(server.pid)
            idle_pss = tree_parts_mib(server.pid, pss_mib)
        checked = (await server.stats())["checkedFiles"]
    finally:
        await server.stop()
    return {"checked": checked, "peak": sampler.peak, "idle": idle, "idle_pss": idle_pss}


async def clangd_alone(corpus: Corpus, opened: list[Path], settle_s: float) -> dict:
    """clangd as an editor runs it on the project (its own defaults), the same files open."""
    from kernel_lsp.server.clangd.binary import find_clangd

    binary, problem = find_clangd()
    if binary is None:
        return {"problem": problem}
    client = LanguageClient("clangd-alone-bench", "1")
    await client.start_io(
        binary.path, f"--compile-commands-dir={corpus.database.parent}", "--log=error", cwd=str(corpus.root)
    )
    try:
        pid = client._server.pid  # type: ignore[union-attr]
        await client.initialize_async(
            types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=corpus.root.as_uri())
        )
        client.initialized(types.InitializedParams())
        with PeakSampler(pid) as sampler:
            await open_and_parse(client, opened)
            await asyncio.sleep(settle_s)
            idle = tree_rss_mib(pid)
            idle_pss = pss_mib(pid)
        await asyncio.wait_for(client.shutdown_async(None), 30)
        client.exit(None)
    finally:
        await client.stop()
    return {"peak": sampler.peak, "idle": idle, "idle_pss": idle_pss, "binary": binary.path}


def initialize_ms(code_root: Path) -> str:
    """The median `initialize` latency of 5 starts (benchmarks/startup.py), answer saved."""
    import startup

    root = tempfile.mkdtemp(prefix="kernel-lsp-startup-")
    extra = {"XDG_CACHE_HOME": os.path.join(root, "cache")}
    saved_repo = startup.REPO
    try:
        startup.REPO = code_root
        first = startup.one_start(root, True, **extra)
        later = [startup.one_start(root, True, **extra) for _ in range(5)]
    finally:
        startup.REPO = saved_repo
    return f"{statistics.median(later) * 1e3:.0f} (first {first * 1e3:.0f})"


# --- the report ---------------------------------------------------------------------------------


def med(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", help="a checkout of the code to compare with")
    parser.add_argument("--files", type=int, default=150)
    parser.add_argument("--heavy", type=int, default=108)
    parser.add_argument("--saves", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--skip", default="", help="comma-separated: saves,check,memory,tree,initialize")
    parser.add_argument("--open", type=int, default=1, help="files open in the editor for `tree`")
    parser.add_argument("--settle", type=float, default=30.0, help="idle: seconds after the check")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    sides = [("after", REPO)] + ([("before", Path(args.before).resolve())] if args.before else [])
    sides.reverse()

    with tempfile.TemporaryDirectory(prefix="kernel-lsp-large-") as tmp:
        corpus = write_corpus(Path(tmp) / "project", args.files, args.heavy)
        assert corpus.heavy is not None
        samples = [
            corpus.heavy,
            corpus.root / "src" / "reduce" / "reduce_float.cu",
            corpus.root / "src" / "inst" / "inst_000.cu",
        ]
        samples = [s for s in samples if s.exists()]
        print(
            f"corpus: {len(corpus.files)} files ({len(corpus.units)} .cu, {len(corpus.headers)} headers), load {os.getloadavg()[0]:.1f}\n"
        )

        if "saves" not in skip:
            # Bare nvcc before and after the servers: the machine's load drifts during a run.
            bare = {str(s): [bare_nvcc_once(corpus, s) for _ in range(args.saves)] for s in samples}
            timings = {
                name: asyncio.run(server_saves(root, corpus, samples, args.saves)) for name, root in sides
            }
            for s in samples:
                bare[str(s)] += [bare_nvcc_once(corpus, s) for _ in range(args.saves)]
            print(f"save -> first findings / save -> resources (median of {args.saves} saves, s)\n")
            header = "| file | bare nvcc -cubin |" + "".join(
                f" {n}: first findings | {n}: resources |" for n, _ in sides
            )
            print(header)
            print("|---" * (2 + 2 * len(sides)) + "|")
            for s in samples:
                row = f"| {s.relative_to(corpus.root)} | {med(bare[str(s)])} |"
                for name, _ in sides:
                    first, full = timings[name][str(s)]
                    row += f" {med(first)} | {med(full)} |"
                print(row)
            print()

        if "check" not in skip:
            print(f"--check of the whole project (-j {args.jobs})\n")
            print(
                "| | wall s | peak RSS MiB | errors (all false) | kernels | raw or `<?>` names | kernels without a line |"
            )
            print("|---|---|---|---|---|---|---|")
            # Bare nvcc first and last: the machine's load drifts during a run.
            rows = [("bare nvcc -cubin (first)", bare_nvcc_project(corpus, args.jobs))]
            checks = [(name, check_project(root, corpus, args.jobs)) for name, root in sides]
            rows.append(("bare nvcc -cubin (last)", bare_nvcc_project(corpus, args.jobs)))
            for label, (wall, peak, failed) in rows:
                print(f"| {label}, {args.jobs} at once | {wall:.1f} | {peak:.0f} | {failed} files | | | |")
            for name, r in checks:
                print(
                    f"| kernel-lsp {name} | {r['wall']:.1f} | {r['peak']:.0f} | {r['errors']} | {r['kernels']} "
                    f"| {r['raw_names']} | {r.get('no_line', 'n/a')} |"
                )
                for sample in r.get("error_samples", []):
                    print(f"|   e.g. {sample} | | | | | | |")
            print()

        if "memory" not in skip:
            print("server + compile workers (python processes), every file checked at start-up\n")
            print(
                "| | files checked | check wall s | peak tree RSS MiB | idle RSS MiB (server alone) | processes | after the idle workers ended MiB |"
            )
            print("|---|---|---|---|---|---|---|")
            for name, root in sides:
                m = asyncio.run(server_memory(root, corpus))
                print(
                    f"| {name} | {m['checked']} | {m['wall']:.0f} | {m['peak']:.0f} | {m['idle']:.0f} ({m['server']:.0f}) "
                    f"| {m['processes']} | {m['ended']:.0f} |"
                )
            print()

        if "tree" not in skip:
            opened = (samples[1:2] + [u for u in corpus.units if "inst" in u.parts])[: args.open]
            print(
                f"the whole tree (server + compile workers + clangd), every file checked at start-up, "
                f"{len(opened)} files open; idle {args.settle:.0f} s after the check; "
                "clangd alone on the same files\n"
            )
            print(
                "Idle memory, MiB: PSS (each shared page counted once, split between the processes "
                "that map it: the tree's own memory, which the target of issue 33 is judged on) "
                "/ RSS (a shared page counted in every process that maps it). Peak: RSS.\n"
            )
            print(
                "| | files checked | peak RSS | idle PSS / RSS | server | workers | clangd | compilers | initialize ms |"
            )
            print("|---|---|---|---|---|---|---|---|---|")

            def both(pss: float, rss: float) -> str:
                return f"{pss:.0f} / {rss:.0f}"

            for name, root in sides:
                m = asyncio.run(tree_memory(root, corpus, opened, args.settle))
                i, q = m["idle"], m["idle_pss"]
                print(f"  ({name}: {m})", flush=True)
                print(
                    f"| kernel-lsp {name} | {m['checked']} | {m['peak']:.0f} | {both(sum(q.values()), sum(i.values()))} "
                    + "".join(f"| {both(q[k], i[k])} " for k in ("server", "workers", "clangd", "compilers"))
                    + ("| n/a |" if "initialize" in skip else f"| {initialize_ms(root)} |")
                )
            c = asyncio.run(clangd_alone(corpus, opened, args.settle))
            if "problem" in c:
                print(f"| clangd alone | {c['problem']} |")
            else:
                print(
                    f"| clangd alone ({c['binary']}) | | {c['peak']:.0f} | {both(c['idle_pss'], c['idle'])} | | | | | |"
                )
            print()


if __name__ == "__main__":
    main()
