"""The per-compute-capability table (data only).

Source of every row: ../shared/reference/gpu-models.md §1.2 (header constants: block limits,
register/shared-memory units, reserve, barrier pools), §1.3 (per-CC limits, from Nsight Compute
2025.3 ``ncu_occupancy.py`` ``get_gpu_data`` and the CUDA C++ Programming Guide
"Compute Capabilities" tables) and §1.4 (carveout sizes, ncu ``shared_mem_size_configs``).
"""

from __future__ import annotations

from aiprof.hardware.arch import KIB, ArchLimits

_SRC = "cuda_occupancy.h (CUDA 13.0); ncu 2025.3 ncu_occupancy.py; CUDA Programming Guide CC tables"

_CFG_70 = (0, 8, 16, 32, 64, 96)
_CFG_75 = (32, 64)
_CFG_80 = (0, 8, 16, 32, 64, 100, 132, 164)
_CFG_86 = (0, 8, 16, 32, 64, 100)
_CFG_90 = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)


def _pre_volta(cc: tuple[int, int], smem_kib: int, regs_per_block: int, sub: int) -> ArchLimits:
    # CC 5.x/6.x: 256 B smem unit, no reserve, SM always uses the full shared memory (§1.5 6.7).
    return ArchLimits(
        name=f"sm_{cc[0]}{cc[1]}", major=cc[0], minor=cc[1], max_threads_per_sm=2048,
        max_blocks_per_sm=32, max_regs_per_block=regs_per_block, num_sub_partitions=sub,
        smem_alloc_unit_bytes=256, smem_per_sm_bytes=smem_kib * KIB,
        smem_per_block_bytes=48 * KIB, smem_per_block_optin_bytes=48 * KIB, source=_SRC,
    )


def _modern(
    cc: tuple[int, int], *, threads: int, blocks: int, smem_kib: int, configs: tuple[int, ...],
    barrier_factor: int | None, notes: tuple[str, ...] = (),
) -> ArchLimits:
    # CC >= 8: 128 B smem unit, 1 KB reserve per block; opt-in = SM size - reserve (§1.3).
    return ArchLimits(
        name=f"sm_{cc[0]}{cc[1]}", major=cc[0], minor=cc[1], max_threads_per_sm=threads,
        max_blocks_per_sm=blocks, smem_alloc_unit_bytes=128, smem_per_sm_bytes=smem_kib * KIB,
        smem_per_block_bytes=48 * KIB, smem_per_block_optin_bytes=(smem_kib - 1) * KIB,
        reserved_smem_per_block_bytes=KIB, smem_configs_kib=configs,
        barrier_pool_per_sm=None if barrier_factor is None else blocks * barrier_factor,
        source=_SRC, notes=notes,
    )


def _volta(cc: tuple[int, int], *, threads: int, blocks: int, smem_kib: int,
           configs: tuple[int, ...]) -> ArchLimits:
    return ArchLimits(
        name=f"sm_{cc[0]}{cc[1]}", major=cc[0], minor=cc[1], max_threads_per_sm=threads,
        max_blocks_per_sm=blocks, smem_alloc_unit_bytes=256, smem_per_sm_bytes=smem_kib * KIB,
        smem_per_block_bytes=48 * KIB, smem_per_block_optin_bytes=smem_kib * KIB,
        smem_configs_kib=configs, source=_SRC,
    )


_ROWS = [
    _pre_volta((5, 0), 64, 65536, 4),
    # sm_52/53: ncu lists 32,768 regs per block (§1.3 note 1); header uses 4 sub-partitions.
    _pre_volta((5, 2), 96, 32768, 4),
    _pre_volta((5, 3), 64, 32768, 4),
    _pre_volta((6, 0), 64, 65536, 2),  # GP100: 2 sub-partitions in the header (§1.2)
    _pre_volta((6, 1), 96, 65536, 4),
    _pre_volta((6, 2), 64, 65536, 4),
    _volta((7, 0), threads=2048, blocks=32, smem_kib=96, configs=_CFG_70),
    _volta((7, 2), threads=2048, blocks=32, smem_kib=96, configs=_CFG_70),
    _volta((7, 5), threads=1024, blocks=16, smem_kib=64, configs=_CFG_75),
    _modern((8, 0), threads=2048, blocks=32, smem_kib=164, configs=_CFG_80, barrier_factor=None),
    _modern((8, 6), threads=1536, blocks=16, smem_kib=100, configs=_CFG_86, barrier_factor=None),
    _modern((8, 7), threads=1536, blocks=16, smem_kib=164, configs=_CFG_80, barrier_factor=None),
    _modern((8, 9), threads=1536, blocks=24, smem_kib=100, configs=_CFG_86, barrier_factor=None),
    _modern((9, 0), threads=2048, blocks=32, smem_kib=228, configs=_CFG_90, barrier_factor=2),
    _modern((10, 0), threads=2048, blocks=32, smem_kib=228, configs=_CFG_90, barrier_factor=2),
    _modern((10, 1), threads=1536, blocks=24, smem_kib=228, configs=_CFG_90, barrier_factor=1,
            notes=("CC 10.1 was renamed 11.0 in CUDA 13; opt-in smem per block unverified",)),
    _modern((10, 3), threads=2048, blocks=32, smem_kib=228, configs=_CFG_90, barrier_factor=2),
    _modern((11, 0), threads=1536, blocks=24, smem_kib=228, configs=_CFG_90, barrier_factor=1,
            notes=("opt-in smem per block unverified",)),
    _modern((12, 0), threads=1536, blocks=24, smem_kib=100, configs=_CFG_86, barrier_factor=1),
    _modern((12, 1), threads=1536, blocks=24, smem_kib=100, configs=_CFG_86, barrier_factor=1),
]

ARCHES: dict[tuple[int, int], ArchLimits] = {(a.major, a.minor): a for a in _ROWS}
"""Every supported compute capability, keyed by (major, minor)."""
