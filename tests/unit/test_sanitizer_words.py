"""What the proof gate's findings put in the next prompt: kernel-lsp's words for the finding and
its line, never the tool's text, which the launch under it can steer (runner/sanitizer.py)."""

from __future__ import annotations

from kernel_lsp.runner.sanitizer import NOTHING_RAN, parse_findings

REPORT = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at add(const float *, const float *, float *, unsigned long)+0x1b0 in probe.cu:42
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f0000000000 is out of bounds
=========
========= Race reported between Write access at add(...)+0x90 in probe.cu:51
=========     and Read access at add(...)+0xc0 in probe.cu:53 [248 hazards]
=========
========= Uninitialized __shared__ memory read of size 4 bytes
=========     at k()+0x10 in probe.cu:7
=========
========= Barrier error detected. Divergent thread(s) in warp
=========     at k()+0x20 in probe.cu:9
=========
========= Invalid __global__ write of size 4 bytes sk-live-SECRET-TOKEN-from-the-home-folder
=========     at k()+0x30 in probe.cu:11
=========
========= ERROR SUMMARY: 5 errors
"""


def test_each_finding_is_worded_from_a_fixed_list_at_its_line():
    found = parse_findings("memcheck", REPORT)
    assert [f.summary() for f in found] == [
        "line 42: memcheck: invalid global write",
        "line 51: memcheck: race on shared memory",
        "line 7: memcheck: read of uninitialized shared memory",
        "line 9: memcheck: barrier in divergent code",
        "line 11: memcheck: invalid global write",
    ]
    # The user's report keeps the tool's words; the prompt's summary carries none of them.
    assert "SECRET" in found[-1].describe() and "SECRET" not in found[-1].summary()


def test_a_launch_that_never_reached_cuda_is_no_finding():
    assert parse_findings("memcheck", f"========= COMPUTE-SANITIZER\n========= Error: {NOTHING_RAN}\n") == []
