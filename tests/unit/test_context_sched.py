"""KERNEL_LSP_CTX_SCHED picks how a process waits for its GPU (runner/device.context_sched_flag):
a switch for measuring what the wait costs a judged run; unset or unknown, CUDA chooses."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernel_lsp.runner.device import context_sched_flag

FLAGS = SimpleNamespace(
    CUctx_flags=SimpleNamespace(
        CU_CTX_SCHED_SPIN=SimpleNamespace(value=1),
        CU_CTX_SCHED_YIELD=SimpleNamespace(value=2),
        CU_CTX_SCHED_BLOCKING_SYNC=SimpleNamespace(value=4),
    )
)


@pytest.mark.parametrize(
    ("value", "flag"), [("spin", 1), ("yield", 2), (" Blocking ", 4), ("", None), ("fast", None)]
)
def test_the_switch_names_a_wait_mode_or_leaves_cuda_to_choose(monkeypatch, value, flag):
    monkeypatch.setenv("KERNEL_LSP_CTX_SCHED", value)
    assert context_sched_flag(FLAGS) == flag


def test_unset_leaves_cuda_to_choose(monkeypatch):
    monkeypatch.delenv("KERNEL_LSP_CTX_SCHED", raising=False)
    assert context_sched_flag(FLAGS) is None
