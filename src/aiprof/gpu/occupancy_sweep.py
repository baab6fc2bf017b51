"""What-if sweeps of occupancy over one launch parameter, like Nsight Compute's occupancy graphs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from aiprof.errors import InputError
from aiprof.gpu.occupancy import Occupancy, occupancy, resolve_arch
from aiprof.hardware import ArchLimits, GpuSpec

SweepParameter = Literal["block-size", "registers", "shared-mem"]


@dataclass(frozen=True, kw_only=True)
class OccupancySweep:
    """Occupancy as one parameter varies, the others held at the base launch."""

    parameter: str
    """``block-size``, ``registers`` or ``shared-mem``."""
    values: tuple[int, ...]
    """The swept values (threads, registers per thread, or bytes)."""
    points: tuple[Occupancy, ...]
    """One result per value."""
    base: Occupancy
    """The result at the base launch configuration."""


def default_values(arch: ArchLimits, parameter: SweepParameter) -> tuple[int, ...]:
    """The grid Nsight Compute's graphs use: every warp size step, every register, 1 KB steps."""
    if parameter == "block-size":
        return tuple(range(arch.warp_size, arch.max_threads_per_block + 1, arch.warp_size))
    if parameter == "registers":
        return tuple(range(0, arch.max_regs_per_thread + 1))
    step = 1024
    return tuple(range(0, arch.smem_per_block_optin_bytes + 1, step))


def sweep(
    spec: str | GpuSpec | ArchLimits,
    parameter: SweepParameter,
    *,
    block_size: int,
    registers_per_thread: int,
    shared_mem_per_block: int,
    carveout: int | None = None,
    values: Sequence[int] | None = None,
) -> OccupancySweep:
    """Occupancy over ``values`` of ``parameter`` (default: the full legal range)."""
    arch = resolve_arch(spec)
    if parameter not in ("block-size", "registers", "shared-mem"):
        raise InputError(f"sweep parameter must be block-size, registers or shared-mem, "
                         f"not {parameter!r}")
    chosen = tuple(values) if values is not None else default_values(arch, parameter)
    base = (block_size, registers_per_thread, shared_mem_per_block)
    position = ("block-size", "registers", "shared-mem").index(parameter)

    def at(value: int) -> Occupancy:
        args = list(base)
        args[position] = value
        return occupancy(arch, args[0], args[1], args[2], carveout=carveout)

    return OccupancySweep(parameter=parameter, values=chosen, points=tuple(at(v) for v in chosen),
                          base=occupancy(arch, *base, carveout=carveout))


@dataclass(frozen=True, kw_only=True)
class BestBlockSize:
    """The block size the CUDA runtime's ``cudaOccupancyMaxPotentialBlockSize`` would choose."""

    block_size: int
    """Threads per block with the most resident threads per SM (ties: the larger block)."""
    occupancy: Occupancy
    """Occupancy at that block size."""
    min_grid_size: int | None
    """Blocks needed to fill every SM once (None when the SM count is unknown)."""


def best_block_size(
    spec: str | GpuSpec | ArchLimits,
    *,
    registers_per_thread: int,
    shared_mem_per_block: int,
    carveout: int | None = None,
    num_sms: int | None = None,
) -> BestBlockSize:
    """Search as ``cudaOccMaxPotentialOccupancyBlockSize`` does (ref §1.5, "Related entry points").

    Block sizes from the maximum down in warp steps; the first maximum of blocks x block size is
    kept; the search stops once a size reaches the SM's thread limit.
    """
    arch = resolve_arch(spec)
    best: Occupancy | None = None
    start = -(-arch.max_threads_per_block // arch.warp_size) * arch.warp_size
    for size in range(start, 0, -arch.warp_size):
        point = occupancy(arch, size, registers_per_thread, shared_mem_per_block,
                          carveout=carveout)
        if best is None or point.active_blocks_per_sm * size > best.active_blocks_per_sm * \
                best.block_size:
            best = point
        if best.active_blocks_per_sm * best.block_size >= arch.max_threads_per_sm:
            break
    assert best is not None
    if isinstance(spec, GpuSpec) and num_sms is None:
        num_sms = spec.num_sms
    grid = best.active_blocks_per_sm * num_sms if num_sms else None
    return BestBlockSize(block_size=best.block_size, occupancy=best, min_grid_size=grid)
