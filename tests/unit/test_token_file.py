"""`kernel-lsp serve --tcp --token-file F` reads F through the engine's regular-file reader: on the
open file, before a byte is read, it must be a regular file (a FIFO is refused at once, not waited
on), not a link, the user's own, readable by the user alone."""

from __future__ import annotations

import os
import threading

import pytest

from kernel_lsp.server.tcp import TcpSetupError, load_token

TOKEN = "a-token-of-sufficient-length-0123456789"


def _load(path) -> tuple[str, bool] | BaseException:
    """load_token's answer, or what it raised; AssertionError when it does not answer in 10 s."""
    answer: list = []

    def run() -> None:
        try:
            answer.append(load_token(str(path)))
        except BaseException as e:
            answer.append(e)

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    reader.join(10)
    assert answer, "load_token blocked on the file"  # before: open(2) waited for a FIFO's writer
    return answer[0]


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "token"
    os.mkfifo(fifo, 0o600)
    e = _load(fifo)
    assert isinstance(e, TcpSetupError)
    assert str(e) == f"--token-file {fifo} is a FIFO (named pipe), not a regular file"


def test_a_link_others_can_read_and_a_good_file(tmp_path):
    good = tmp_path / "token"
    good.write_text(TOKEN + "\n")
    good.chmod(0o600)
    assert _load(good) == (TOKEN, False)
    link = tmp_path / "link"
    link.symlink_to(good)
    e = _load(link)
    assert isinstance(e, TcpSetupError) and "cannot read it" in str(e)  # not followed
    good.chmod(0o644)
    e = _load(good)
    assert isinstance(e, TcpSetupError) and "can be read by other users" in str(e)


def test_a_folder_is_refused(tmp_path):
    e = _load(tmp_path)
    assert isinstance(e, TcpSetupError) and str(e).endswith("is a folder, not a regular file")


@pytest.mark.skipif(
    not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to own a file as another user"
)
def test_another_users_file_is_refused(tmp_path):
    other = tmp_path / "token"
    other.write_text(TOKEN + "\n")
    other.chmod(0o600)
    os.chown(other, 12345, 12345)
    e = _load(other)
    assert isinstance(e, TcpSetupError) and "belongs to another user" in str(e)
