"""Shared-memory bank conflicts: wavefronts per warp request.

Rules (../shared/reference/gpu-models.md §3.1; NVIDIA developer-forum answers cited there, and
measured with Nsight Compute on an H200): 32 banks of 4 bytes, ``bank = (addr / 4) mod 32``;
lanes reading the same 32-bit word share it (broadcast). 32-bit requests form one phase of 32
lanes, 64-bit requests two half-warp phases, 128-bit requests four quarter-warp phases; a phase
costs as many wavefronts as the largest number of distinct words in one bank. When lane pairs
share addresses (lane n == n^1 or n == n^2) data is packed and phases merge pairwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiprof.errors import InputError

NUM_BANKS = 32
BANK_BYTES = 4
WARP_SIZE = 32
_PHASES = {4: 1, 8: 2, 16: 4}  # phases per full-warp request, by access size


@dataclass(frozen=True, kw_only=True)
class BankConflicts:
    """Shared-memory cost of one warp-wide shared load or store."""

    access_bytes: int
    """Bytes per lane (4, 8 or 16)."""
    wavefronts: int
    """Data-stage cycles the request takes (``l1tex__data_pipe_lsu_wavefronts_mem_shared``)."""
    ideal_wavefronts: int
    """Wavefronts without conflicts: 1, 2 or 4 for a full warp of 4-, 8- or 16-byte accesses."""
    conflicts: int
    """Wavefronts beyond the ideal (``l1tex__data_bank_conflicts_pipe_lsu_mem_shared``), >= 0."""
    ways: int
    """Largest number of distinct words one bank serves in one phase (N-way conflict)."""
    packed: bool
    """Lane pairs shared addresses, so phases merged pairwise."""


def _words(address: int, access_bytes: int) -> range:
    first = address // BANK_BYTES
    return range(first, first + access_bytes // BANK_BYTES)


def _phase_cost(addresses: Sequence[int | None], access_bytes: int) -> int:
    words = {w for a in addresses if a is not None for w in _words(a, access_bytes)}
    per_bank: dict[int, int] = {}
    for word in words:
        per_bank[word % NUM_BANKS] = per_bank.get(word % NUM_BANKS, 0) + 1
    return max(per_bank.values(), default=0)


def _is_packed(addresses: Sequence[int | None]) -> bool:
    def pairs(mask: int) -> bool:
        return all(addresses[n] == addresses[n ^ mask] for n in range(WARP_SIZE)
                   if addresses[n] is not None)
    return pairs(1) or pairs(2)


def bank_conflicts(lane_addresses: Sequence[int | None], access_bytes: int) -> BankConflicts:
    """Wavefronts, conflicts and ways of one warp request (32 byte addresses, None inactive)."""
    if access_bytes not in _PHASES:
        raise InputError(f"shared-memory access size must be 4, 8 or 16 bytes, not {access_bytes}")
    if len(lane_addresses) != WARP_SIZE:
        raise InputError(f"give {WARP_SIZE} lane addresses, not {len(lane_addresses)}")
    if all(a is None for a in lane_addresses):
        raise InputError("at least one lane must be active")
    for a in lane_addresses:
        if a is not None and (a < 0 or a % access_bytes):
            raise InputError(f"address {a} is negative or not aligned to {access_bytes} bytes")
    phases = _PHASES[access_bytes]
    packed = phases > 1 and _is_packed(lane_addresses)
    groups = phases // 2 if packed else phases
    size = WARP_SIZE // groups
    costs = [_phase_cost(lane_addresses[g * size:(g + 1) * size], access_bytes)
             for g in range(groups)]
    width = WARP_SIZE // phases
    active_phases = sum(1 for p in range(phases)
                        if any(a is not None for a in lane_addresses[p * width:(p + 1) * width]))
    wavefronts = sum(costs)
    return BankConflicts(access_bytes=access_bytes, wavefronts=wavefronts,
                         ideal_wavefronts=active_phases,
                         conflicts=max(0, wavefronts - active_phases), ways=max(costs),
                         packed=packed)


def strided_shared(stride_elems: int, elem_bytes: int = 4) -> BankConflicts:
    """Bank conflicts of ``T s[]; s[t * stride]`` for a full warp (``T`` of ``elem_bytes``)."""
    if stride_elems < 0:
        raise InputError(f"stride must be >= 0, not {stride_elems}")
    return bank_conflicts([t * stride_elems * elem_bytes for t in range(WARP_SIZE)], elem_bytes)
