"""Theoretical occupancy for every kernel of a trace, from its launch arguments (issue item 8).

Inputs are columns (one row per kernel) as a Kineto trace records them: grid and block dimensions,
registers per thread and shared memory per block. Each distinct launch configuration is evaluated
once with the exact model of ``aiprof.gpu.occupancy`` and broadcast back to its rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from aiprof.errors import InputError
from aiprof.gpu.occupancy import LIMITERS, occupancy
from aiprof.hardware import ArchLimits, GpuSpec, lookup

UNKNOWN = "unknown"
"""Limiter of rows without usable launch arguments (block size 0, AMD device, bad values)."""
LIMITER_NAMES = (*LIMITERS, UNKNOWN)
"""What ``KernelOccupancy.limiter_code`` indexes."""


@dataclass(frozen=True, kw_only=True)
class KernelOccupancy:
    """Per-kernel theoretical occupancy (arrays aligned with the input rows).

    A trace has a handful of launch configurations (block size, registers, shared memory) for
    millions of kernels: each configuration's result is stored once (``config_*``) and each
    kernel holds the index of its configuration (``config``, 4 bytes a kernel, where the three
    per-kernel results took 13); ``active_blocks_per_sm``, ``occupancy`` and ``limiter_code``
    give them per kernel when asked."""

    supported: bool
    """False when the device has no occupancy model (e.g. AMD): every row is unknown."""
    num_sms: int | None
    """SM count used for the grid flag (None: unknown, flag is False everywhere)."""
    num_blocks: NDArray[np.integer[Any]]
    """Blocks per launch (grid x * y * z), in the input's integer type (int64 for x, y, z)."""
    config: NDArray[np.int32]
    """Each kernel's launch configuration: an index into the ``config_*`` arrays."""
    config_active_blocks_per_sm: NDArray[np.int32]
    """Resident blocks per SM of each configuration (-1: unknown)."""
    config_occupancy: NDArray[np.float64]
    """Theoretical occupancy of each configuration, 0 to 1 (NaN: unknown)."""
    config_limiter_code: NDArray[np.int8]
    """Binding limit of each configuration, an index into ``LIMITER_NAMES``."""
    grid_below_sm_count: NDArray[np.bool_]
    """True where the launch has fewer blocks than the GPU has SMs (some SMs idle)."""

    @property
    def active_blocks_per_sm(self) -> NDArray[np.int32]:
        """Resident blocks per SM per kernel (-1: unknown)."""
        return np.asarray(self.config_active_blocks_per_sm[self.config])

    @property
    def occupancy(self) -> NDArray[np.float64]:
        """Theoretical occupancy per kernel, 0 to 1 (NaN: unknown)."""
        return np.asarray(self.config_occupancy[self.config])

    @property
    def limiter_code(self) -> NDArray[np.int8]:
        """Binding limit per kernel as an index into ``LIMITER_NAMES`` (one byte a kernel, where
        the names themselves take 64)."""
        return np.asarray(self.config_limiter_code[self.config])

    @property
    def waves(self) -> NDArray[np.float64]:
        """Blocks / (resident blocks per SM * SMs): full-GPU waves of the launch (NaN: unknown).
        Computed when asked: no pass of the diagnosis reads it, and a trace's copy of it is
        8 bytes a kernel."""
        active = self.active_blocks_per_sm.astype(np.int64)
        capacity = np.where(active > 0, active * (self.num_sms or 0), 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            waves: NDArray[np.float64] = np.where(
                capacity > 0, self.num_blocks / np.maximum(capacity, 1), np.nan)
        return waves

    @property
    def limiter(self) -> NDArray[np.str_]:
        """Binding limit per kernel (see ``aiprof.gpu.occupancy.LIMITERS``) or ``unknown``."""
        return np.asarray(np.array(LIMITER_NAMES)[self.limiter_code])


def _integers(values: ArrayLike) -> NDArray[np.integer[Any]]:
    """``values`` as integers, in their own integer type when they have one (a trace's int32
    columns are not copied to int64)."""
    array = np.asarray(values)
    if np.issubdtype(array.dtype, np.integer):
        return array
    return np.asarray(values, dtype=np.int64)


def _column(values: ArrayLike, n: int, what: str) -> NDArray[np.integer[Any]]:
    array = _integers(values).reshape(-1) if np.ndim(values) else None
    if array is None:
        return np.full(n, int(values), dtype=np.int64)  # type: ignore[arg-type]
    if array.shape[0] != n:
        raise InputError(f"{what} has {array.shape[0]} rows, expected {n}")
    return array


def _dims(values: ArrayLike, what: str) -> NDArray[np.integer[Any]]:
    array = _integers(values)
    if array.ndim == 1:
        return array
    if array.ndim == 2 and array.shape[1] in (1, 2, 3):
        product: np.ndarray = np.prod(array.astype(np.int64), axis=1)
        return product
    raise InputError(f"{what} must be one value per kernel or an (n, 3) array of x, y, z")


def kernel_occupancy(
    grid: ArrayLike,
    block: ArrayLike,
    registers_per_thread: ArrayLike,
    shared_mem_bytes: ArrayLike,
    spec: str | GpuSpec | ArchLimits,
) -> KernelOccupancy:
    """Occupancy, limiter and small-grid flag for each kernel row.

    ``grid`` and ``block`` are either totals per kernel or (n, 3) arrays of x, y, z.
    """
    gpu = lookup(spec) if not isinstance(spec, ArchLimits) else GpuSpec(name=spec.name, arch=spec)
    blocks = _dims(grid, "grid")
    threads = _dims(block, "block")
    n = threads.shape[0]
    if blocks.shape[0] != n:
        raise InputError(f"grid has {blocks.shape[0]} rows but block has {n}")
    regs = _column(registers_per_thread, n, "registers_per_thread")
    smem = _column(shared_mem_bytes, n, "shared_mem_bytes")
    config = np.zeros(n, dtype=np.int32)
    found = _configs(threads, regs, smem) if gpu.occupancy_supported and n else []
    active = np.full(len(found) + 1, -1, dtype=np.int32)  # the last: rows of no configuration
    occ = np.full(len(found) + 1, np.nan)
    code = np.full(len(found) + 1, LIMITER_NAMES.index(UNKNOWN), dtype=np.int8)
    config[:] = len(found)
    for index, ((t, r, s), rows) in enumerate(found):
        assert gpu.arch is not None
        config[rows] = index
        try:
            result = occupancy(gpu.arch, t, r, s)
        except InputError:
            continue
        active[index], occ[index], code[index] = (result.active_blocks_per_sm, result.occupancy,
                                                  LIMITER_NAMES.index(result.limiter))
    small = (blocks < gpu.num_sms) if gpu.num_sms else np.zeros(n, dtype=bool)
    return KernelOccupancy(supported=gpu.occupancy_supported, num_sms=gpu.num_sms,
                           num_blocks=blocks, config=config, config_active_blocks_per_sm=active,
                           config_occupancy=occ, config_limiter_code=code,
                           grid_below_sm_count=small)


def _configs(*columns: NDArray[np.integer[Any]]
             ) -> list[tuple[tuple[int, ...], NDArray[np.intp]]]:
    """Each distinct row of ``columns`` (in sorted order) and the rows holding it: a lexsort,
    without the (n, 3) copies ``np.unique(axis=0)`` makes."""
    order = np.lexsort(columns[::-1])
    new = np.zeros(len(order), dtype=bool)
    new[:1] = True
    for column in columns:  # one sorted copy at a time
        ordered = column[order]
        new[1:] |= ordered[1:] != ordered[:-1]
        del ordered
    starts = np.flatnonzero(new)
    del new
    firsts = [column[order[starts]].tolist() for column in columns]
    bounds = np.append(starts, len(order)).tolist()
    return [(tuple(int(first[i]) for first in firsts), order[bounds[i]:bounds[i + 1]])
            for i in range(len(starts))]
