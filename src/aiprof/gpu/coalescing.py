"""Global-memory coalescing: sectors per warp request and efficiency.

Model (../shared/reference/gpu-models.md §2.1, from the Nsight Compute Profiling Guide memory
model and measured on an H200): on sm_70+ a warp's global load or store is one request; it fetches
every distinct aligned 32-byte sector covered by the active lanes' byte ranges. Efficiency
(``gld_efficiency``) = distinct bytes needed / (32 * sectors). The legacy model the chapter uses
(Fermi/Kepler L1) counts 128-byte transactions instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiprof.errors import InputError

SECTOR_BYTES = 32  # sm_70+ L1/L2 sector (Nsight Compute Profiling Guide, "Memory Tables")
LEGACY_LINE_BYTES = 128  # Fermi/Kepler L1 transaction (CUDA C Programming Guide <= 9, G.4.2)
WARP_SIZE = 32
ACCESS_SIZES = (1, 2, 4, 8, 16)


@dataclass(frozen=True, kw_only=True)
class Coalescing:
    """Cost of one warp-wide global memory instruction."""

    access_bytes: int
    """Bytes each lane loads or stores (1, 2, 4, 8 or 16)."""
    num_active_lanes: int
    """Lanes that take part (not None)."""
    sectors_per_request: int
    """Distinct 32-byte sectors the request touches (``gld_transactions_per_request``)."""
    ideal_sectors_per_request: int
    """Sectors the same useful bytes would need if contiguous and aligned."""
    bytes_useful: int
    """Distinct bytes the active lanes need."""
    bytes_fetched: int
    """32 * sectors."""
    efficiency: float
    """bytes_useful / bytes_fetched, in (0, 1] (``gld_efficiency`` / 100)."""
    legacy_transactions: int
    """Distinct 128-byte lines: the chapter's (pre-sm_70) transaction count."""
    legacy_efficiency: float
    """bytes_useful / (128 * legacy_transactions)."""


def _check(addresses: Sequence[int | None], access_bytes: int) -> list[int]:
    if access_bytes not in ACCESS_SIZES:
        raise InputError(f"access size must be one of {ACCESS_SIZES} bytes, not {access_bytes}")
    if len(addresses) != WARP_SIZE:
        raise InputError(f"give {WARP_SIZE} lane addresses (None for an inactive lane), "
                         f"not {len(addresses)}")
    active = [int(a) for a in addresses if a is not None]
    if not active:
        raise InputError("at least one lane must be active")
    for address in active:
        if address < 0 or address % access_bytes:
            raise InputError(f"address {address} is negative or not aligned to {access_bytes} "
                             "bytes (CUDA requires naturally aligned accesses)")
    return active


def coalescing(lane_addresses: Sequence[int | None], access_bytes: int) -> Coalescing:
    """Sectors, efficiency and fetched bytes for one warp request (32 byte addresses)."""
    active = _check(lane_addresses, access_bytes)
    useful = {a + i for a in active for i in range(access_bytes)}
    sectors = {b // SECTOR_BYTES for b in useful}
    lines = {b // LEGACY_LINE_BYTES for b in useful}
    return Coalescing(
        access_bytes=access_bytes, num_active_lanes=len(active),
        sectors_per_request=len(sectors),
        ideal_sectors_per_request=-(-len(useful) // SECTOR_BYTES),
        bytes_useful=len(useful), bytes_fetched=SECTOR_BYTES * len(sectors),
        efficiency=len(useful) / (SECTOR_BYTES * len(sectors)),
        legacy_transactions=len(lines),
        legacy_efficiency=len(useful) / (LEGACY_LINE_BYTES * len(lines)),
    )


def strided_addresses(stride_elems: int, elem_bytes: int = 4, offset_elems: int = 0,
                      vector_width: int = 1) -> list[int | None]:
    """Lane addresses of ``T* p; p[t * stride + offset]`` where T is ``vector_width`` elements.

    ``offset_elems`` counts scalar elements (``float i[t+1]`` is offset 1).
    """
    if stride_elems < 0 or offset_elems < 0 or vector_width < 1 or elem_bytes < 1:
        raise InputError("stride and offset must be >= 0, element size and vector width >= 1")
    unit = elem_bytes * vector_width
    return [t * stride_elems * unit + offset_elems * elem_bytes for t in range(WARP_SIZE)]


def strided(stride_elems: int, elem_bytes: int = 4, offset_elems: int = 0,
            vector_width: int = 1) -> Coalescing:
    """Coalescing of the strided pattern ``p[t * stride + offset]`` (see ``strided_addresses``)."""
    addresses = strided_addresses(stride_elems, elem_bytes, offset_elems, vector_width)
    unit = elem_bytes * vector_width
    if offset_elems * elem_bytes % unit:
        raise InputError(f"offset of {offset_elems} elements misaligns {unit}-byte vector accesses")
    return coalescing(addresses, unit)
