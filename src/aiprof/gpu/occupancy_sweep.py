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
    base = dict(block_size=block_size, registers_per_thread=registers_per_thread,
                shared_mem_per_block=shared_mem_per_block)
    key = {"block-size": "block_size", "registers": "registers_per_thread",
           "shared-mem": "shared_mem_per_block"}[parameter]
    points = tuple(occupancy(arch, **{**base, key: v}, carveout=carveout) for v in chosen)
    return OccupancySweep(parameter=parameter, values=chosen, points=points,
                          base=occupancy(arch, **base, carveout=carveout))
