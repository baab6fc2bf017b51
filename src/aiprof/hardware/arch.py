"""Per-compute-capability SM limits used by the occupancy model.

Every value comes from ../shared/reference/gpu-models.md §1.2-1.4, which cites the CUDA Toolkit's
``cuda_occupancy.h`` (CUDA 13.0), Nsight Compute 2025.3 ``extras/python/ncu_occupancy.py`` and the
CUDA C++ Programming Guide "Compute Capabilities" tables. The table itself is in ``arch_table.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KIB = 1024


@dataclass(frozen=True, kw_only=True)
class ArchLimits:
    """Per-SM resource limits of one compute capability (or of a user-defined SM).

    A user-defined SM, such as the textbook's idealized one, is built with this class directly:
    ``ArchLimits(name="textbook", max_threads_per_sm=2048, max_blocks_per_sm=16, ...)``.
    """

    name: str
    """``sm_90`` for a real architecture, any label for a user-defined SM."""
    major: int = 0
    """Compute capability major (0 for a user-defined SM)."""
    minor: int = 0
    """Compute capability minor."""
    warp_size: int = 32
    """Threads per warp (32 on every NVIDIA GPU)."""
    max_threads_per_block: int = 1024
    """``maxThreadsPerBlock``."""
    max_threads_per_sm: int = 2048
    """``maxThreadsPerMultiProcessor``."""
    max_blocks_per_sm: int = 32
    """Resident blocks per SM (header ``maxBlocksPerMultiprocessor``)."""
    regs_per_sm: int = 65536
    """``regsPerMultiprocessor``."""
    max_regs_per_block: int = 65536
    """``regsPerBlock``."""
    max_regs_per_thread: int = 255
    """Largest register count ptxas assigns (255 on CC 3-12)."""
    reg_alloc_unit: int = 256
    """Registers are allocated per warp in units of this many (256 on CC 3-12)."""
    num_sub_partitions: int = 4
    """Warp schedulers per SM; the register file is split between them (header value)."""
    smem_alloc_unit_bytes: int = 256
    """Shared memory is allocated per block in units of this many bytes (128 on CC >= 8)."""
    smem_per_sm_bytes: int = 48 * KIB
    """``sharedMemPerMultiprocessor``: the largest shared-memory carveout."""
    smem_per_block_bytes: int = 48 * KIB
    """``sharedMemPerBlock``: per-block limit without opt-in."""
    smem_per_block_optin_bytes: int = 48 * KIB
    """``sharedMemPerBlockOptin``: per-block limit after ``cudaFuncSetAttribute``."""
    reserved_smem_per_block_bytes: int = 0
    """``reservedSharedMemPerBlock``: the driver's per-block reserve (1 KB on CC >= 8)."""
    smem_configs_kib: tuple[int, ...] = ()
    """Supported carveout sizes in KiB (§1.4); empty: the SM always uses ``smem_per_sm_bytes``."""
    barrier_pool_per_sm: int | None = None
    """Block-barrier pool used by the header on CC >= 9 (None: not modelled)."""
    source: str = "user-defined"
    """Where the values come from."""
    notes: tuple[str, ...] = field(default=())
    """Caveats (unverified values, legacy differences)."""

    @property
    def max_warps_per_sm(self) -> int:
        """Resident warps per SM (threads per SM / warp size)."""
        return self.max_threads_per_sm // self.warp_size

    @property
    def compute_capability(self) -> str:
        """``"9.0"`` style string, or the name for a user-defined SM."""
        return f"{self.major}.{self.minor}" if self.major else self.name


# The chapter's idealized SM (section 33.1 occupancy example): 2048 threads, 16 blocks,
# 65,536 registers, 48 KB shared memory; Kepler-era rules, no reserve, no carveout choice.
TEXTBOOK_SM = ArchLimits(
    name="textbook",
    max_threads_per_sm=2048,
    max_blocks_per_sm=16,
    regs_per_sm=65536,
    smem_per_sm_bytes=48 * KIB,
    source="chapter 33.1 idealized SM (../shared/reference/gpu-models.md §1.9)",
)
