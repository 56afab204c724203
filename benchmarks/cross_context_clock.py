"""How much of a judged figure is the judge's own, when the judge times another process's kernels
on the GPU's clock instead of its wall clock (issue 44).

The judge (this process) and a child (the accused's stand-in, plain kernel-lsp code) share one GPU.
They order their streams through flags in a buffer both map (VMM, POSIX fd): the judge writes
`go`, the child's stream waits for it (cuStreamWaitValue32), runs, writes `done`; the judge's
stream waits for `done`. The judge's own CUDA events bracket the wait, so the figure is GPU
time between two of the judge's events: no socket, no Python, on the clock. Printed side by side
with the in-process figure (`bench`'s: CUDA events around each launch, cold L2) for the same
kernel and sizes:

- `per-run`: a switch of contexts each way per run, the L2 flushed by the judge before each
  (bench's own protocol, one run per bracket);
- `batch B`: B runs on B distinct buffer sets between one pair of flags (the figure over B),
  without and with the judge's flush run in the child before each launch.

    python3 benchmarks/cross_context_clock.py [--rounds 60]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kernel_lsp.runner.accused import receive, send

KERNELS = r"""
extern "C" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        c[i] = a[i] + b[i];
}
extern "C" __global__ void null_kernel() {}
// One read every 64 KiB of three buffers: their pages' translations loaded, a few L2 lines.
extern "C" __global__ void touch(const float* a, const float* b, const float* c, unsigned long long nbytes,
                                 float* sink)
{
    const unsigned long long i = (unsigned long long)(blockIdx.x * blockDim.x + threadIdx.x) * 16384ull;
    if (i * 4 < nbytes) {
        const float v = ((volatile const float*)a)[i] + ((volatile const float*)b)[i] + ((volatile const float*)c)[i];
        if (v == 12345.678f) *sink = v;
    }
}
extern "C" __global__ void stamp(unsigned long long* out)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    *out = t;
}
// An accused that does not let its stream wait: a kernel that polls `go` itself, stamps, writes
// `done` from the GPU and ends (or keeps spinning for `linger_ns` more).
extern "C" __global__ void spin_go(volatile unsigned int* flags, unsigned int seq,
                                   unsigned long long* out, unsigned long long linger_ns)
{
    while ((int)(flags[0] - seq) < 0) {}
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    out[0] = t;
    __threadfence_system();
    flags[64] = seq;
    __threadfence_system();
    unsigned long long now = t;
    while (now - t < linger_ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
}
"""
SIZES = [0, 1 << 18, 1 << 20, 1 << 22, 1 << 24]  # 0: the null kernel
FLAG_GO, FLAG_DONE = 0, 256  # byte offsets in the flag buffer
FLAG_GO2, FLAG_READY = 512, 768  # `--post-switch`'s primed mode: a first turn, then the run


def compiled(arch: str) -> bytes:
    from kernel_lsp.compile import CompileOptions, compile_source

    result = compile_source(KERNELS, "cross_context_probe.cu", CompileOptions(arch=arch))
    if not result.ok or not result.cubin:
        raise SystemExit(f"probe kernels do not compile: {result.log[:2000]}")
    return bytes(result.cubin)


def launch_args(n: int, ptrs: tuple[int, int, int]) -> tuple[tuple[int, int, int], list[np.ndarray]]:
    if n == 0:
        return (1, 1, 1), []
    grid = min(132 * 16, (n + 255) // 256)
    return (grid, 1, 1), [np.array([p], np.uint64) for p in ptrs] + [np.array([n], np.int32)]


def wait_value(dev, addr: int, value: int) -> None:
    d = dev.d
    dev._ck(
        d.cuStreamWaitValue32(
            dev.stream, addr, value, d.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ.value
        )
    )


def write_value(dev, addr: int, value: int) -> None:
    d = dev.d
    dev._ck(
        d.cuStreamWriteValue32(
            dev.stream, addr, value, d.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_DEFAULT.value
        )
    )


# --- the child (the accused's stand-in) ---------------------------------------------------------


def child(fd: int) -> int:
    from kernel_lsp.runner.device import CudaDevice

    sock = socket.socket(fileno=fd)
    dev = CudaDevice(0)
    funcs: dict[str, object] = {}
    mapped: dict[int, int] = {}
    while True:
        msg, fds = receive(sock)
        op = msg["op"]
        if op == "setup":
            module = dev.load(bytes.fromhex(msg["image"]))
            funcs = {n: dev.function(module, n) for n in ("vadd", "null_kernel", "stamp", "spin_go", "touch")}
            dev.load_helpers(bytes.fromhex(msg["helpers"]))
            send(sock, {"ok": True})
        elif op == "map":
            for ident, size, f in zip(msg["ids"], msg["sizes"], fds, strict=True):
                mapped[ident] = dev.import_shared(f, size)
                os.close(f)
            send(sock, {"ok": True})
        elif op == "unmap":
            for ident in msg["ids"]:
                dev.free(mapped.pop(ident))
            send(sock, {"ok": True})
        elif op == "run":
            flags = mapped[msg["flags"]]
            n = msg["n"]
            fn = funcs["vadd" if n else "null_kernel"]
            sets = [tuple(mapped[i] for i in s) for s in msg["sets"]]
            if msg["mode"] == "per-run":
                for k, s in enumerate(sets):
                    seq = msg["seq"] + k
                    wait_value(dev, flags + FLAG_GO, seq)
                    grid, args = launch_args(n, s)
                    dev.launch(fn, grid, (256, 1, 1), 0, args)
                    write_value(dev, flags + FLAG_DONE, seq)
            else:
                wait_value(dev, flags + FLAG_GO, msg["seq"])
                for s in sets:
                    if msg["flush"]:
                        dev.flush_l2()
                    grid, args = launch_args(n, s)
                    dev.launch(fn, grid, (256, 1, 1), 0, args)
                write_value(dev, flags + FLAG_DONE, msg["seq"])
            send(sock, {"ok": True})
            dev.sync()
        elif op == "post":
            post_switch_child(dev, funcs, mapped, msg)
            send(sock, {"ok": True})
            dev.sync()
        elif op == "switch":
            flags, stamps, seq = mapped[msg["flags"]], mapped[msg["stamps"]], msg["seq"]
            u64 = np.uint64
            if msg["variant"] == "honest":
                wait_value(dev, flags + FLAG_GO, seq)
                dev.launch(funcs["stamp"], (1, 1, 1), (1, 1, 1), 0, [np.array([stamps + 8], u64)])
                dev.launch(funcs["null_kernel"], (1, 1, 1), (1, 1, 1), 0, [])
                dev.launch(funcs["stamp"], (1, 1, 1), (1, 1, 1), 0, [np.array([stamps + 16], u64)])
                write_value(dev, flags + FLAG_DONE, seq)
            elif msg["variant"].startswith("spin"):
                linger = int(msg["variant"].split("-")[1]) * 1000 if "-" in msg["variant"] else 0
                args = [
                    np.array([flags], u64),
                    np.array([seq], np.uint32),
                    np.array([stamps + 8], u64),
                    np.array([linger], u64),
                ]
                dev.launch(funcs["spin_go"], (1, 1, 1), (1, 1, 1), 0, args)
            elif msg["variant"] == "early-done":
                write_value(dev, flags + FLAG_DONE, seq)
                dev.launch(funcs["stamp"], (1, 1, 1), (1, 1, 1), 0, [np.array([stamps + 8], u64)])
            send(sock, {"ok": True})
            dev.sync()
        elif op == "exit":
            send(sock, {"ok": True})
            return 0


def touch_args(s: tuple[int, int, int], nbytes: int) -> tuple[tuple[int, int, int], list[np.ndarray]]:
    u64 = np.uint64
    chunks = max(1, -(-nbytes // 65536))
    args = [np.array([p], u64) for p in s] + [np.array([nbytes], u64), np.array([s[2]], u64)]
    return ((chunks + 255) // 256, 1, 1), args


def post_switch_child(dev, funcs: dict, mapped: dict[int, int], msg: dict) -> None:
    """`--post-switch`: each set's run as the mode says, queued behind the judge's flags."""
    flags, stamps = mapped[msg["flags"]], mapped[msg["stamps"]]
    n, mode = msg["n"], msg["mode"]
    fn = funcs["vadd" if n else "null_kernel"]
    u64 = np.uint64
    for k, ids in enumerate(msg["sets"]):
        s = tuple(mapped[i] for i in ids)
        seq = msg["seq"] + k
        grid, args = launch_args(n, s)
        tgrid, targs = touch_args(s, 4 * n)
        if mode == "primed":
            wait_value(dev, flags + FLAG_GO2, seq)
            if n:
                dev.launch(funcs["touch"], tgrid, (256, 1, 1), 0, targs)
            else:
                dev.launch(funcs["null_kernel"], (1, 1, 1), (1, 1, 1), 0, [])
            write_value(dev, flags + FLAG_READY, seq)
        wait_value(dev, flags + FLAG_GO, seq)
        stamped = mode.startswith("stamped")
        if stamped:
            if mode == "stamped" and n:
                dev.launch(funcs["touch"], tgrid, (256, 1, 1), 0, targs)
            dev.launch(funcs["stamp"], (1, 1, 1), (1, 1, 1), 0, [np.array([stamps + 32 * k], u64)])
        dev.launch(fn, grid, (256, 1, 1), 0, args)
        if stamped:
            dev.launch(funcs["stamp"], (1, 1, 1), (1, 1, 1), 0, [np.array([stamps + 32 * k + 8], u64)])
        if mode == "stamped-flush":  # the L2 emptied of the run's dirty lines in this context
            dev.flush_l2()
            dev.launch(funcs["stamp"], (1, 1, 1), (1, 1, 1), 0, [np.array([stamps + 32 * k + 16], u64)])
        if mode.startswith("synced"):
            dev.sync()  # a launcher's own cudaStreamSynchronize: `done` queued after the host wakes
            spin_host(host_gap(mode))  # what a launcher's caller does before `done` (the accused: us)
        write_value(dev, flags + FLAG_DONE, seq)


def host_gap(mode: str) -> float:
    """`synced-N`: N us of host work between the sync's return and `done` (or the end event)."""
    return int(mode.split("-", 1)[1]) * 1e-6 if "-" in mode else 0.0


def spin_host(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


# --- the judge ----------------------------------------------------------------------------------


class Judge:
    def __init__(self) -> None:
        from kernel_lsp.runner.device import CudaDevice

        self.dev = CudaDevice(0)
        info = self.dev.info()
        self.name, self.arch = info["name"], info["arch"]
        self.image = compiled(self.arch)
        module = self.dev.load(self.image)
        self.funcs = {n: self.dev.function(module, n) for n in ("vadd", "null_kernel", "stamp")}
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", str(theirs.fileno())], pass_fds=[theirs.fileno()]
        )
        theirs.close()
        self.sock = ours
        self.next_id = 0
        self.ids: dict[int, int] = {}
        helpers = self.dev.helpers_image() or b""
        self.ask({"op": "setup", "image": self.image.hex(), "helpers": helpers.hex()})
        self.flags = self.share([self.dev.alloc_shared(4096)])[0]
        self.dev.fill(self.flags, 0, 4096)
        self.seq = 0
        self.events = [self.dev._ck(self.dev.d.cuEventCreate(0)) for _ in range(4096)]

    def ask(self, msg: dict, fds: list[int] | None = None) -> dict:
        send(self.sock, msg, fds)
        reply, _ = receive(self.sock)
        return reply

    def share(self, ptrs: list[int]) -> list[int]:
        for start in range(0, len(ptrs), 48):  # at most MAX_FDS descriptors a message
            self._share(ptrs[start : start + 48])
        return ptrs

    def _share(self, ptrs: list[int]) -> None:
        fds, sizes, ids = [], [], []
        for p in ptrs:
            fd, size = self.dev.export(p)
            fds.append(fd)
            sizes.append(size)
            self.next_id += 1
            ids.append(self.next_id)
            self.ids[p] = self.next_id
        self.ask({"op": "map", "ids": ids, "sizes": sizes}, fds)
        for fd in fds:
            os.close(fd)

    def elapsed(self, a: int, b: int) -> float:
        return float(self.dev._ck(self.dev.d.cuEventElapsedTime(self.events[a], self.events[b]))) * 1e-3

    def record(self, k: int) -> None:
        self.dev._ck(self.dev.d.cuEventRecord(self.events[k], self.dev.stream))

    def bench(
        self, n: int, s: tuple[int, int, int], rounds: int, synced: bool = False, gap: float = 0.0
    ) -> list[float]:
        """bench's figure: CUDA events around each launch, cold L2; `synced`: a launcher that
        syncs its stream before it returns (then `gap` s of host work)."""
        fn = self.funcs["vadd" if n else "null_kernel"]
        grid, args = launch_args(n, s)

        def run() -> None:
            self.dev.launch(fn, grid, (256, 1, 1), 0, args)
            if synced:
                self.dev.sync()
                spin_host(gap)

        self.dev.time_rounds([run], 5, cold_l2=True)
        return self.dev.time_rounds([run], rounds, cold_l2=True)[0]

    def flush_alone(self, rounds: int) -> list[float]:
        self.dev.time_rounds([self.dev.flush_l2], 5, cold_l2=False)
        return self.dev.time_rounds([self.dev.flush_l2], rounds, cold_l2=False)[0]

    def switch(self, variant: str, stamps: int) -> tuple[float, float, float, float]:
        """One bracket around an accused that runs nothing: (bracket, go -> accused, accused's
        work, accused -> judge), from the judge's events and the shared %globaltimer."""
        self.seq += 1
        self.dev.fill(stamps, 0, 64)
        self.dev.head_start(0.002)
        u64 = np.uint64
        self.dev.launch(self.funcs["stamp"], (1, 1, 1), (1, 1, 1), 0, [np.array([stamps], u64)])
        self.record(0)
        write_value(self.dev, self.flags + FLAG_GO, self.seq)
        wait_value(self.dev, self.flags + FLAG_DONE, self.seq)
        self.record(1)
        self.dev.launch(self.funcs["stamp"], (1, 1, 1), (1, 1, 1), 0, [np.array([stamps + 24], u64)])
        self.ask(
            {
                "op": "switch",
                "variant": variant,
                "seq": self.seq,
                "flags": self.ids[self.flags],
                "stamps": self.ids[stamps],
            }
        )
        self.dev.sync()
        a, b, c, d = (int(x) for x in self.dev.download(stamps, 32).view(np.uint64))
        c = c or b
        return self.elapsed(0, 1), (b - a) * 1e-9, (c - b) * 1e-9, (d - c) * 1e-9

    def per_run(self, n: int, sets: list[tuple[int, int, int]]) -> list[float]:
        """One bracket per run: the judge flushes, writes go, waits for done."""
        self.dev.head_start(0.002 + 60e-6 * len(sets))
        base = self.seq + 1
        for k in range(len(sets)):
            self.dev.flush_l2()
            self.record(2 * k)
            write_value(self.dev, self.flags + FLAG_GO, base + k)
            wait_value(self.dev, self.flags + FLAG_DONE, base + k)
            self.record(2 * k + 1)
        self.ask(
            {
                "op": "run",
                "mode": "per-run",
                "n": n,
                "seq": base,
                "flags": self.ids[self.flags],
                "sets": [[self.ids[p] for p in s] for s in sets],
            }
        )
        self.seq = base + len(sets) - 1
        self.dev.sync()
        return [self.elapsed(2 * k, 2 * k + 1) for k in range(len(sets))]

    def post(
        self, n: int, sets: list[tuple[int, int, int]], mode: str, stamps: int
    ) -> tuple[list[float], list[tuple[float, float]]]:
        """`--post-switch`: one bracket per run, `go` before the flush (the judge's protocol);
        (brackets, the accused's own stamps' span where the mode stamps)."""
        self.dev.head_start(0.002 + 80e-6 * len(sets))
        base = self.seq + 1
        for k in range(len(sets)):
            if mode == "primed":  # a turn of the accused's first (its touch), then the timed turn
                write_value(self.dev, self.flags + FLAG_GO2, base + k)
                wait_value(self.dev, self.flags + FLAG_READY, base + k)
            write_value(self.dev, self.flags + FLAG_GO, base + k)
            self.dev.flush_l2()
            self.record(2 * k)
            wait_value(self.dev, self.flags + FLAG_DONE, base + k)
            self.record(2 * k + 1)
        self.ask(
            {
                "op": "post",
                "mode": mode,
                "n": n,
                "seq": base,
                "flags": self.ids[self.flags],
                "stamps": self.ids[stamps],
                "sets": [[self.ids[p] for p in s] for s in sets],
            }
        )
        self.seq = base + len(sets) - 1
        self.dev.sync()
        spans: list[tuple[float, float]] = []
        if mode.startswith("stamped"):
            got = self.dev.download(stamps, 32 * len(sets)).view(np.uint64)
            for k in range(len(sets)):
                s1, s2, s3 = (int(got[4 * k + i]) for i in range(3))
                spans.append(((s2 - s1) * 1e-9, (s3 - s2) * 1e-9 if s3 else 0.0))
        return [self.elapsed(2 * k, 2 * k + 1) for k in range(len(sets))], spans

    def batch(self, n: int, sets: list[tuple[int, int, int]], flush_in_child: bool) -> float:
        """B runs between one pair of flags: the bracket's time over B."""
        self.seq += 1
        self.dev.head_start(0.002 + 60e-6 * len(sets))
        self.dev.flush_l2()
        self.record(0)
        write_value(self.dev, self.flags + FLAG_GO, self.seq)
        wait_value(self.dev, self.flags + FLAG_DONE, self.seq)
        self.record(1)
        self.ask(
            {
                "op": "run",
                "mode": "batch",
                "flush": flush_in_child,
                "n": n,
                "seq": self.seq,
                "flags": self.ids[self.flags],
                "sets": [[self.ids[p] for p in s] for s in sets],
            }
        )
        self.dev.sync()
        return self.elapsed(0, 1) / len(sets)


def med(xs: list[float]) -> float:
    return statistics.median(xs) * 1e6


def spread(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=10) if len(xs) >= 10 else [min(xs), max(xs)]
    return f"[{q[0] * 1e6:.1f}, {q[-1] * 1e6:.1f}]"


POST_MODES = ("per-run", "primed", "stamped-cold", "stamped", "stamped-flush", "synced")


def post_switch_table(judge: Judge, rounds: int, modes: list[str]) -> None:
    """What a run pays for running after a switch, per mode (us, medians of `rounds`):
    `excess`, the mode's bracket less its own null run's (n = 0) less bench's figure for the
    same kernel. `primed`: the accused touched the set's pages in a turn of its own before the
    timed one; `stamped[-cold]`: the accused's own %globaltimer stamps around the kernel (after a
    touch, or not): `span`, less bench; `stamped-flush`: then the L2 flushed in the accused's
    context and stamped again (`flush`: that flush less its null run's, the write-back of what
    the run left dirty), and `out`, what the bracket holds beyond the stamps less the null run's
    (the switch back, beyond a null run's); `synced`: the host syncs before queueing `done` (a
    launcher's own sync), against bench of the same; `synced-N`: then N us of host work before
    `done` (the accused's Python after a launcher returns), against bench of the same. A judged
    run of gelu whose launcher syncs paid 15-20 us for it, bench 3-4 us: if the GPU switches away
    from a context idle while its host works, and back, the excess jumps past some N.
    `--modes per-run,synced,synced-5,synced-10,synced-20,synced-40` (per-run first: the synced
    modes are read against its null run too)."""
    stamps = judge.share([judge.dev.alloc_shared(1 << 16)])[0]
    print(f"# {judge.name}: us per run, median [p10, p90] of {rounds}")
    print("| floats | bench | bench synced | " + " | ".join(modes) + " |")
    print("|" + "---|" * (3 + len(modes)))
    nulls: dict[str, tuple[float, float, float]] = {}
    for n in SIZES:
        nbytes = max(4, 4 * n)
        sets = [tuple(judge.dev.alloc_shared(nbytes) for _ in range(3)) for _ in range(8)]
        judge.share([p for s in sets for p in s])
        for s in sets:
            for p in s[:2]:
                judge.dev.fill(p, 0x3F, nbytes)
        bench = judge.bench(n, sets[0], rounds)
        synced = judge.bench(n, sets[0], rounds, synced=True)
        cols = [f"{n}", f"{med(bench):.2f} {spread(bench)}", f"{med(synced):.2f} {spread(synced)}"]
        for mode in modes:
            judge.post(n, sets, mode, stamps)  # warm-up
            got: list[float] = []
            spans: list[tuple[float, float]] = []
            while len(got) < rounds:
                b, sp = judge.post(n, sets, mode, stamps)
                got.extend(b)
                spans.extend(sp)
            span = med([x[0] for x in spans]) if spans else 0.0
            flush = med([x[1] for x in spans]) if spans else 0.0
            if n == 0:
                nulls[mode] = (med(got), span, flush)
            null_bracket, null_span, null_flush = nulls[mode]
            ref = med(bench)
            if mode.startswith("synced"):
                ref = med(judge.bench(n, sets[0], rounds, synced=True, gap=host_gap(mode)))
            text = f"excess {med(got) - null_bracket - ref:+.2f} (bracket {med(got):.1f} {spread(got)})"
            if spans:
                text += f"; span - bench {span - med(bench):+.2f}"
            if mode.startswith("synced") and "per-run" in nulls:
                # Its own null run pays any switch away while its host works, too: against a
                # plain null run (no sync, no host work), that switch shows.
                text += f"; against per-run's null {med(got) - nulls['per-run'][0] - ref:+.2f}"
            if mode == "stamped-flush":
                out = (med(got) - null_bracket) - (span + flush - null_span - null_flush)
                text += f"; flush {flush - null_flush:+.2f}; out {out:+.2f}"
            cols.append(text)
        print("| " + " | ".join(cols) + " |", flush=True)
        judge.ask({"op": "unmap", "ids": [judge.ids[p] for s in sets for p in s]})
        for s in sets:
            for p in s:
                judge.dev.free(p)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--child", type=int, default=-1)
    ap.add_argument("--switches", action="store_true", help="only the switch latencies, per accused variant")
    ap.add_argument(
        "--post-switch", action="store_true", help="what a run pays after a switch, and what removes it"
    )
    ap.add_argument("--modes", default=",".join(POST_MODES), help="--post-switch's modes")
    a = ap.parse_args()
    if a.child >= 0:
        return child(a.child)
    judge = Judge()
    if a.switches:
        stamps = judge.share([judge.dev.alloc_shared(4096)])[0]
        print(
            f"# {judge.name}: one bracket around an accused that runs nothing; us, median [p10, p90] of {a.rounds}"
        )
        print(
            "| accused | bracket (judge's events) | judge's go -> accused runs | accused's own | accused -> judge's next |"
        )
        print("|---|---|---|---|---|")
        for variant in ("honest", "spin", "spin-500", "spin-3000", "early-done", "honest"):
            rows = [judge.switch(variant, stamps) for _ in range(a.rounds + 3)][3:]
            cols = [[r[k] for r in rows] for k in range(4)]
            print(
                f"| {variant} | " + " | ".join(f"{med(c):.1f} {spread(c)}" for c in cols) + " |", flush=True
            )
        judge.ask({"op": "exit"})
        return 0
    if a.post_switch:
        post_switch_table(judge, a.rounds, a.modes.split(","))
        judge.ask({"op": "exit"})
        return 0
    batches = [int(b) for b in a.batches.split(",")]
    print(f"# {judge.name} ({judge.arch}); {a.rounds} samples each; us per run (median [p10, p90])\n")
    flush = judge.flush_alone(a.rounds)
    print(f"judge's L2 flush alone: {med(flush):.1f} us {spread(flush)}\n")
    print(
        "| size (floats) | bench | per-run bracket | per-run - bench | "
        + " | ".join(f"batch {b}" for b in batches)
        + " | "
        + " | ".join(f"batch {b} + child flush - flush" for b in batches)
        + " |"
    )
    print("|" + "---|" * (4 + 2 * len(batches)))
    for n in SIZES:
        nbytes = max(4, 4 * n)
        most = max([*batches, 8])
        sets = [tuple(judge.dev.alloc_shared(nbytes) for _ in range(3)) for _ in range(most)]
        judge.share([p for s in sets for p in s])
        for s in sets:
            for p in s[:2]:
                judge.dev.fill(p, 0x3F, nbytes)
        bench = judge.bench(n, sets[0], a.rounds)
        per = []
        judge.per_run(n, sets[:8])  # warm-up
        while len(per) < a.rounds:
            per.extend(judge.per_run(n, sets[:8]))
        cols = [
            f"{n}",
            f"{med(bench):.2f} {spread(bench)}",
            f"{med(per):.2f} {spread(per)}",
            f"{med(per) - med(bench):+.2f}",
        ]
        for flush_child in (False, True):
            for b in batches:
                judge.batch(n, sets[:b], flush_child)
                got = [judge.batch(n, sets[:b], flush_child) for _ in range(max(10, a.rounds // b))]
                if flush_child:
                    got = [g - statistics.median(flush) for g in got]
                cols.append(f"{med(got):.2f} {spread(got)}")
        print("| " + " | ".join(cols) + " |", flush=True)
        judge.ask({"op": "unmap", "ids": [judge.ids[p] for s in sets for p in s]})
        for s in sets:
            for p in s:
                judge.dev.free(p)
    judge.ask({"op": "exit"})
    judge.proc.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
