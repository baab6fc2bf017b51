"""Theoretical occupancy, computed exactly as ``cudaOccupancyMaxActiveBlocksPerMultiprocessor``.

The algorithm is ../shared/reference/gpu-models.md §1.5 (a re-implementation of the logic of the
CUDA Toolkit's ``cuda_occupancy.h``; validated there against the runtime API on an H200 in
58,464 of 58,464 configurations). Step numbers in comments refer to that section.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiprof.errors import InputError, UnsupportedDeviceError
from aiprof.hardware import ArchLimits, GpuSpec, lookup

LIMITERS = ("warps", "registers", "shared_memory", "blocks", "barriers")
"""Limiter names; when several limits tie, ``limiter`` is the first of these that binds."""


@dataclass(frozen=True, kw_only=True)
class Occupancy:
    """Theoretical occupancy of one kernel launch configuration on one SM."""

    arch: str
    """Architecture the result is for (``sm_90`` or a user-defined SM's name)."""
    block_size: int
    """Threads per block."""
    registers_per_thread: int
    """Registers per thread."""
    shared_mem_per_block_bytes: int
    """Static + dynamic shared memory requested per block."""
    warps_per_block: int
    """⌈block size / warp size⌉."""
    registers_per_warp: int
    """Registers allocated per warp after rounding to the allocation unit."""
    allocated_shared_mem_per_block_bytes: int
    """Shared memory allocated per block: request + driver reserve, rounded to the unit."""
    shared_mem_config_bytes: int
    """SM shared-memory size (carveout) the model uses."""
    blocks_limit_registers: int | None
    """Blocks per SM the register file allows (None: unlimited, 0 registers)."""
    blocks_limit_shared_mem: int | None
    """Blocks per SM shared memory allows (None: unlimited, no shared memory)."""
    blocks_limit_warps: int
    """Blocks per SM the warp (thread) limit allows."""
    blocks_limit_blocks: int
    """Resident-block limit of the SM."""
    blocks_limit_barriers: int | None
    """Blocks per SM the barrier pool allows (None: not modelled for this architecture)."""
    active_blocks_per_sm: int
    """Resident blocks per SM: what the CUDA occupancy API returns."""
    active_warps_per_sm: int
    """Resident warps per SM."""
    max_warps_per_sm: int
    """Warps an SM can hold."""
    occupancy: float
    """Active warps / max warps, 0 to 1."""
    limiter: str
    """The binding limit: warps, registers, shared_memory, blocks or barriers."""
    limiters: tuple[str, ...]
    """Every limit equal to the result (ties)."""


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(x: int, unit: int) -> int:
    return _ceil_div(x, unit) * unit


def resolve_arch(spec: str | GpuSpec | ArchLimits) -> ArchLimits:
    """The SM limits of ``spec`` (``"sm_90"``, a product name, a ``GpuSpec`` or ``ArchLimits``)."""
    if isinstance(spec, ArchLimits):
        return spec
    resolved = lookup(spec)
    if resolved.arch is None or not resolved.occupancy_supported:
        raise UnsupportedDeviceError(
            f"occupancy is not modelled for {resolved.name!r} ({resolved.vendor}): the NVIDIA "
            "occupancy rules do not apply to it")
    return resolved.arch


def _check(arch: ArchLimits, block_size: int, regs: int, smem: int, carveout: int | None) -> None:
    if block_size <= 0 or block_size > arch.max_threads_per_block:
        raise InputError(f"block size must be 1..{arch.max_threads_per_block} threads, "
                         f"not {block_size}")
    if regs < 0 or regs > arch.max_regs_per_thread:
        raise InputError(f"registers per thread must be 0..{arch.max_regs_per_thread}, not {regs}")
    if smem < 0:
        raise InputError(f"shared memory per block must be >= 0 bytes, not {smem}")
    if carveout is not None and not (carveout == -1 or 0 <= carveout <= 100):
        raise InputError(f"carveout must be -1 (default) or a percentage 0..100, not {carveout}")


def _register_limit(arch: ArchLimits, regs: int, warps: int) -> tuple[int | None, int]:
    """Step 3: registers are allocated per warp, and the SM's file is split per sub-partition."""
    per_warp = _round_up(regs * arch.warp_size, arch.reg_alloc_unit)
    if regs == 0:
        return None, 0
    assumed = per_warp * _round_up(warps, arch.num_sub_partitions)
    if arch.max_regs_per_block < assumed or arch.max_regs_per_block < per_warp * warps:
        return 0, per_warp
    per_sub = (arch.regs_per_sm // arch.num_sub_partitions) // per_warp
    return per_sub * arch.num_sub_partitions // warps, per_warp


def _align_to_config(arch: ArchLimits, size: int) -> int:
    """Smallest supported carveout (§1.4) that is >= ``size``."""
    return next((kib * 1024 for kib in arch.smem_configs_kib if kib * 1024 >= size),
                arch.smem_per_sm_bytes)


def _sm_smem_size(arch: ArchLimits, per_block: int, carveout: int | None) -> int:
    """Steps 6.4-6.5: the SM shared-memory size the carveout preference leads to."""
    if not arch.smem_configs_kib:
        return arch.smem_per_sm_bytes
    if carveout is None or carveout == -1:
        preferred = arch.smem_per_sm_bytes
    else:
        preferred = carveout * arch.smem_per_sm_bytes // 100
    preferred = _align_to_config(arch, preferred)
    return preferred if preferred >= per_block else _align_to_config(arch, per_block)


def _smem_limit(arch: ArchLimits, smem: int, carveout: int | None, opt_in: bool
                ) -> tuple[int | None, int, int]:
    """Step 6: returns (block limit, allocated bytes per block, SM config bytes)."""
    per_block = _round_up(smem + arch.reserved_smem_per_block_bytes, arch.smem_alloc_unit_bytes)
    block_cap = arch.smem_per_block_optin_bytes if opt_in else arch.smem_per_block_bytes
    block_cap += arch.reserved_smem_per_block_bytes
    config = _sm_smem_size(arch, per_block, carveout)
    if per_block > block_cap:
        return 0, per_block, config
    if per_block == 0:
        return None, per_block, config
    return config // per_block, per_block, config


def occupancy(
    spec: str | GpuSpec | ArchLimits,
    block_size: int,
    registers_per_thread: int,
    shared_mem_per_block: int,
    *,
    carveout: int | None = None,
    opt_in: bool = True,
    num_block_barriers: int = 1,
) -> Occupancy:
    """Theoretical occupancy of a launch; equals ``cudaOccupancyMaxActiveBlocksPerMultiprocessor``.

    ``shared_mem_per_block`` is static + dynamic bytes (without the driver's reserve, which is
    added here). ``carveout`` is ``cudaFuncAttributePreferredSharedMemoryCarveout`` (None or -1:
    default). ``opt_in``: the kernel raised its dynamic shared-memory limit to the maximum
    (``cudaFuncAttributeMaxDynamicSharedMemorySize``); otherwise blocks over 48 KB cannot launch.
    """
    arch = resolve_arch(spec)
    _check(arch, block_size, registers_per_thread, shared_mem_per_block, carveout)
    warps = _ceil_div(block_size, arch.warp_size)
    regs_limit, regs_per_warp = _register_limit(arch, registers_per_thread, warps)
    smem_limit, smem_alloc, config = _smem_limit(arch, shared_mem_per_block, carveout, opt_in)
    warps_limit = arch.max_warps_per_sm // warps
    limits: dict[str, int | None] = {
        "warps": warps_limit, "registers": regs_limit, "shared_memory": smem_limit,
        "blocks": arch.max_blocks_per_sm, "barriers": None,
    }
    if arch.barrier_pool_per_sm is not None and num_block_barriers > 0:  # step 9, CC >= 9
        limits["barriers"] = arch.barrier_pool_per_sm // num_block_barriers
    blocks = min(v for v in limits.values() if v is not None)
    tied = tuple(name for name in LIMITERS if limits[name] == blocks)
    return Occupancy(
        arch=arch.name, block_size=block_size, registers_per_thread=registers_per_thread,
        shared_mem_per_block_bytes=shared_mem_per_block, warps_per_block=warps,
        registers_per_warp=regs_per_warp, allocated_shared_mem_per_block_bytes=smem_alloc,
        shared_mem_config_bytes=config, blocks_limit_registers=regs_limit,
        blocks_limit_shared_mem=smem_limit, blocks_limit_warps=warps_limit,
        blocks_limit_blocks=arch.max_blocks_per_sm, blocks_limit_barriers=limits["barriers"],
        active_blocks_per_sm=blocks, active_warps_per_sm=blocks * warps,
        max_warps_per_sm=arch.max_warps_per_sm,
        occupancy=blocks * warps / arch.max_warps_per_sm, limiter=tied[0], limiters=tied,
    )
