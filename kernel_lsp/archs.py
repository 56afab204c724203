"""Per-architecture limits for occupancy, as CUDA's occupancy calculator uses them
(CUDA C++ Programming Guide, "Compute Capabilities" table). No GPU needed."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .model import Occupancy


@dataclass(frozen=True)
class ArchLimits:
    max_threads_per_block: int = 1024
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    register_alloc_unit: int = 256  # registers, allocated per warp
    shared_per_sm: int = 228 * 1024
    max_shared_per_block: int = 227 * 1024
    shared_alloc_unit: int = 128
    reserved_shared_per_block: int = 1024  # the runtime reserves 1 KB per block since sm_80
    warp_alloc_granularity: int = 4


ARCH_LIMITS: dict[int, ArchLimits] = {
    75: ArchLimits(
        max_warps_per_sm=32,
        max_blocks_per_sm=16,
        shared_per_sm=64 * 1024,
        max_shared_per_block=64 * 1024,
        shared_alloc_unit=256,
        reserved_shared_per_block=0,
    ),
    80: ArchLimits(shared_per_sm=164 * 1024, max_shared_per_block=163 * 1024),
    86: ArchLimits(
        max_warps_per_sm=48,
        max_blocks_per_sm=16,
        shared_per_sm=100 * 1024,
        max_shared_per_block=99 * 1024,
    ),
    87: ArchLimits(
        max_warps_per_sm=48,
        max_blocks_per_sm=16,
        shared_per_sm=164 * 1024,
        max_shared_per_block=163 * 1024,
    ),
    89: ArchLimits(
        max_warps_per_sm=48,
        max_blocks_per_sm=24,
        shared_per_sm=100 * 1024,
        max_shared_per_block=99 * 1024,
    ),
    90: ArchLimits(),
    100: ArchLimits(),
    103: ArchLimits(),
    110: ArchLimits(max_warps_per_sm=48, max_blocks_per_sm=24),
    120: ArchLimits(
        max_warps_per_sm=48,
        max_blocks_per_sm=24,
        shared_per_sm=100 * 1024,
        max_shared_per_block=99 * 1024,
    ),
    121: ArchLimits(
        max_warps_per_sm=48,
        max_blocks_per_sm=24,
        shared_per_sm=100 * 1024,
        max_shared_per_block=99 * 1024,
    ),
}

_ARCH = re.compile(r"^(?:sm|compute)_(\d+)[af]?$")


def arch_number(arch: str) -> int | None:
    m = _ARCH.match(arch.strip())
    return int(m.group(1)) if m else None


def limits_for(arch: str) -> ArchLimits | None:
    n = arch_number(arch)
    if n is None:
        return None
    if n in ARCH_LIMITS:
        return ARCH_LIMITS[n]
    older = [a for a in ARCH_LIMITS if a <= n]
    return ARCH_LIMITS[max(older)] if older else None


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(
    arch: str, block_size: int, registers: int, static_shared: int, dynamic_shared: int = 0
) -> Occupancy | None:
    """Theoretical occupancy of a kernel at `block_size` threads, or None when the arch is
    unknown or the block cannot launch at all."""
    lim = limits_for(arch)
    if lim is None or block_size <= 0 or block_size > lim.max_threads_per_block:
        return None
    warps_per_block = math.ceil(block_size / 32)
    by_warps = lim.max_warps_per_sm // warps_per_block
    by_blocks = lim.max_blocks_per_sm
    if registers > 0:
        regs_per_warp = _round_up(registers * 32, lim.register_alloc_unit)
        warps_by_regs = lim.registers_per_sm // regs_per_warp
        # Warps are allocated to blocks in groups of warp_alloc_granularity.
        warps_by_regs = warps_by_regs // lim.warp_alloc_granularity * lim.warp_alloc_granularity
        by_regs = warps_by_regs // warps_per_block
    else:
        by_regs = by_blocks
    shared = static_shared + dynamic_shared
    if shared > lim.max_shared_per_block:
        return None
    if shared > 0:
        per_block = _round_up(shared + lim.reserved_shared_per_block, lim.shared_alloc_unit)
        by_smem = lim.shared_per_sm // per_block
    else:
        by_smem = by_blocks
    limits = {
        "warps": by_warps,
        "blocks": by_blocks,
        "registers": by_regs,
        "shared memory": by_smem,
    }
    limiter = min(limits, key=lambda k: limits[k])
    blocks = max(0, limits[limiter])
    return Occupancy(
        block_size=block_size,
        active_blocks_per_sm=blocks,
        active_warps_per_sm=blocks * warps_per_block,
        max_warps_per_sm=lim.max_warps_per_sm,
        limiter=limiter,
    )
