"""Theoretical occupancy against values computed by hand from the arch tables (CUDA C++
Programming Guide, "Compute Capabilities"; the allocation rules of CUDA's occupancy calculator)."""

from __future__ import annotations

import pytest

from kernel_lsp.archs import arch_number, limits_for, occupancy


def test_255_registers_at_1024_threads_cannot_launch():
    # 255 regs x 32 = 8160 -> 8192 per warp; 65536 / 8192 = 8 warps < 32 warps of one block.
    occ = occupancy("sm_90", 1024, 255, 0)
    assert occ is not None
    assert occ.active_blocks_per_sm == 0 and occ.fraction == 0.0
    assert occ.limiter == "registers"


def test_64_registers_at_256_threads_on_sm90_is_half():
    # 64 x 32 = 2048 regs per warp -> 32 warps fit -> 4 blocks of 8 warps -> 32/64.
    occ = occupancy("sm_90", 256, 64, 0)
    assert (occ.active_blocks_per_sm, occ.active_warps_per_sm, occ.max_warps_per_sm) == (4, 32, 64)
    assert occ.fraction == pytest.approx(0.5)
    assert occ.limiter == "registers"


def test_32_registers_at_256_threads_is_full():
    occ = occupancy("sm_90", 256, 32, 0)
    assert occ.fraction == 1.0 and occ.active_blocks_per_sm == 8


def test_register_allocation_rounds_per_warp():
    # 37 regs x 32 = 1184 -> 1280; 65536 / 1280 = 51 warps -> 48 (groups of 4) -> 12 blocks of 4 warps.
    occ = occupancy("sm_90", 128, 37, 0)
    assert (occ.active_blocks_per_sm, occ.active_warps_per_sm) == (12, 48)
    assert occ.fraction == pytest.approx(0.75)


def test_shared_memory_limits_blocks():
    # 48 KiB static + 1 KiB reserved = 50176 B per block; 228 KiB / 50176 = 4 blocks x 4 warps = 16/64.
    occ = occupancy("sm_90", 128, 16, 48 * 1024)
    assert occ.limiter == "shared memory"
    assert (occ.active_blocks_per_sm, occ.active_warps_per_sm) == (4, 16)
    assert occ.fraction == pytest.approx(0.25)


def test_dynamic_shared_memory_counts_too():
    # 16 KiB static + 32 KiB dynamic is the same 48 KiB as above.
    assert occupancy("sm_90", 128, 16, 16 * 1024, 32 * 1024) == occupancy("sm_90", 128, 16, 48 * 1024)


def test_shared_memory_over_the_block_limit_cannot_launch():
    assert occupancy("sm_90", 128, 16, 228 * 1024) is None
    assert occupancy("sm_86", 128, 16, 100 * 1024) is None  # 99 KiB per block on sm_86
    assert occupancy("sm_86", 128, 16, 99 * 1024) is not None


def test_block_count_limit_on_small_blocks():
    # 32 threads = 1 warp per block; sm_90 allows 32 blocks -> 32/64 warps.
    occ = occupancy("sm_90", 32, 8, 0)
    assert occ.limiter == "blocks" and occ.active_blocks_per_sm == 32
    assert occ.fraction == pytest.approx(0.5)
    # sm_86: 16 blocks of 2 warps -> 32 of 48 warps.
    occ = occupancy("sm_86", 64, 8, 0)
    assert (occ.limiter, occ.active_warps_per_sm, occ.max_warps_per_sm) == ("blocks", 32, 48)


def test_warp_limit_and_partial_warps():
    # 1000 threads round up to 32 warps: 2 blocks would need 64 warps; sm_86 has 48 -> 1 block.
    occ = occupancy("sm_86", 1000, 16, 0)
    assert (occ.active_blocks_per_sm, occ.active_warps_per_sm, occ.limiter) == (1, 32, "warps")


def test_sm75_limits():
    # Turing: 32 warps, 64 KiB shared, no reserved shared memory, 256-byte shared granularity.
    occ = occupancy("sm_75", 256, 32, 0)
    assert occ.max_warps_per_sm == 32 and occ.fraction == 1.0
    occ = occupancy("sm_75", 256, 32, 20 * 1024)
    assert (occ.active_blocks_per_sm, occ.limiter) == (3, "shared memory")


@pytest.mark.parametrize("block", [0, -32, 1025, 4096])
def test_impossible_block_sizes(block):
    assert occupancy("sm_90", block, 32, 0) is None


def test_unknown_arch_has_no_occupancy():
    assert occupancy("sm_xx", 256, 32, 0) is None
    assert occupancy("gfx90a", 256, 32, 0) is None
    assert arch_number("sm_90a") == 90 and arch_number("compute_100f") == 100
    # A newer arch than the table knows falls back to the nearest older one.
    assert limits_for("sm_95") == limits_for("sm_90")


def test_zero_registers_means_not_limited_by_registers():
    occ = occupancy("sm_90", 256, 0, 0)
    assert occ.fraction == 1.0
