"""A replay of PyTorch's CUDA caching allocator: which allocations of a sequence need a new
segment (a ``cudaMalloc``) and which ``empty_cache()`` gives back (a ``cudaFree`` each).

The model follows ``c10/cuda/CUDACachingAllocator.cpp`` (``DeviceCachingAllocator``):

- a request is rounded up to a multiple of 512 bytes (``round_size``, ``kMinBlockSize``);
- requests of at most 1 MiB (``kSmallSize``) are served from the small pool, the others from
  the large pool; a pool never serves the other's requests;
- a request takes the smallest free block of its pool at least as large (``get_free_block``:
  ``pool.blocks.lower_bound`` over blocks ordered by stream, size, address), the lowest
  address among equal sizes;
- a block larger than the request is split, the rest staying free, when the rest is at least
  512 bytes (small pool) or more than 1 MiB (large pool) (``should_split``);
- with no free block large enough, one new segment is allocated (``alloc_block``: one
  ``cudaMalloc``) of 2 MiB for a small request (``kSmallBuffer``), 20 MiB for a request under
  10 MiB (``kLargeBuffer``, ``kMinLargeAlloc``), else the request rounded up to 2 MiB
  (``kRoundLarge``) (``get_allocation_size``);
- a freed block merges with its free neighbours of the same segment (``free_block``,
  ``try_merge_blocks``);
- ``empty_cache()`` releases every segment that is one free block (``release_cached_blocks``,
  ``release_blocks``: one ``cudaFree`` each); segments holding a live block stay.

Not modelled: streams (the ``[memory]`` events do not say which stream a block belongs to; a
single-stream step is one pool per size class), ``max_split_size_mb``,
``roundup_power2_divisions`` and ``expandable_segments`` (all off by default), and blocks
freed while another stream still uses them (``record_stream``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

MIN_BLOCK_BYTES = 512
"""``kMinBlockSize``: every request is rounded up to a multiple of 512 bytes."""
SMALL_SIZE_BYTES = 1 << 20
"""``kSmallSize``: the largest request of the small pool (1 MiB)."""
SMALL_BUFFER_BYTES = 2 << 20
"""``kSmallBuffer``: a small-pool segment (2 MiB)."""
LARGE_BUFFER_BYTES = 20 << 20
"""``kLargeBuffer``: the segment of a large request under ``MIN_LARGE_ALLOC_BYTES`` (20 MiB)."""
MIN_LARGE_ALLOC_BYTES = 10 << 20
"""``kMinLargeAlloc``: requests from here on get a segment of their own size (10 MiB)."""
ROUND_LARGE_BYTES = 2 << 20
"""``kRoundLarge``: such a segment is the request rounded up to 2 MiB."""
FIRST_ADDRESS = 1 << 48
"""Where the replay's own segments start: above every user-space address of x86-64 and
AArch64 (48-bit), so they never overlap the trace's pinned ranges."""


def round_size(size_bytes: int) -> int:
    """The request's size in the allocator (``round_size``)."""
    return MIN_BLOCK_BYTES * max(1, -(-size_bytes // MIN_BLOCK_BYTES))


def segment_size(size_bytes: int) -> int:
    """The ``cudaMalloc`` size of a new segment for a rounded request (``get_allocation_size``)."""
    if size_bytes <= SMALL_SIZE_BYTES:
        return SMALL_BUFFER_BYTES
    if size_bytes < MIN_LARGE_ALLOC_BYTES:
        return LARGE_BUFFER_BYTES
    return ROUND_LARGE_BYTES * -(-size_bytes // ROUND_LARGE_BYTES)


def splits(block_bytes: int, size_bytes: int, small: bool) -> bool:
    """Whether a free block is split for a request (``should_split``)."""
    rest = block_bytes - size_bytes
    return rest >= MIN_BLOCK_BYTES if small else rest > SMALL_SIZE_BYTES


@dataclass(frozen=True)
class PinnedRange:
    """Free space in a segment that outlives ``empty_cache()`` (it holds a live block)."""

    base: int
    size_bytes: int
    small: bool
    """In the small pool (only requests of at most 1 MiB ever land in it)."""


@dataclass(frozen=True)
class SegmentReplay:
    """What the allocator did with a sequence of allocations and frees."""

    new_segment: np.ndarray
    """Per event, True where an allocation needed a new segment (a ``cudaMalloc``)."""
    segment_bytes: np.ndarray
    """Per event, the new segment's size (0 elsewhere)."""
    num_releases: int
    """Segments ``empty_cache()`` gave back (a ``cudaFree`` each)."""

    @property
    def num_mallocs(self) -> int:
        return int(self.new_segment.sum())


class _Allocator:
    """The allocator's blocks and free pools (mutable; used only inside ``replay_segments``)."""

    def __init__(self, pinned: list[PinnedRange]) -> None:
        self.pools: dict[bool, list[tuple[int, int]]] = {True: [], False: []}
        self.blocks: dict[int, list[int]] = {}  # address -> [size, segment, allocated]
        self.ends: dict[int, int] = {}  # end address -> block address
        self.segments: dict[int, tuple[int, int, bool, bool]] = {}  # base, size, pinned, small
        self.next_address = FIRST_ADDRESS
        self.num_segments = 0
        for p in pinned:
            self._add_segment(p.base, p.size_bytes, p.small, pinned=True)

    def _add_segment(self, base: int, size: int, small: bool, pinned: bool) -> None:
        seg = self.num_segments
        self.num_segments += 1
        self.segments[seg] = (base, size, pinned, small)
        self._put(base, size, seg)

    def _put(self, address: int, size: int, seg: int) -> None:
        self.blocks[address] = [size, seg, 0]
        self.ends[address + size] = address
        bisect.insort(self.pools[self.segments[seg][3]], (size, address))

    def _take(self, address: int) -> tuple[int, int]:
        size, seg, _ = self.blocks.pop(address)
        del self.ends[address + size]
        self.pools[self.segments[seg][3]].remove((size, address))
        return size, seg

    def malloc(self, request_bytes: int) -> tuple[int, int]:
        """The block's address, and the new segment's size (0 when the cache served it)."""
        size = round_size(request_bytes)
        small = size <= SMALL_SIZE_BYTES
        pool = self.pools[small]
        at = bisect.bisect_left(pool, (size, -1))
        new_bytes = 0
        if at < len(pool):
            address = pool[at][1]
        else:
            new_bytes = segment_size(size)
            address = self.next_address
            self.next_address += new_bytes
            self._add_segment(address, new_bytes, small, pinned=False)
        block, seg = self._take(address)
        if splits(block, size, small):
            self._put(address + size, block - size, seg)
            block = size
        self.blocks[address] = [block, seg, 1]
        self.ends[address + block] = address
        return address, new_bytes

    def free(self, address: int) -> None:
        size, seg, _ = self.blocks.pop(address)
        del self.ends[address + size]
        after = self.blocks.get(address + size)
        if after is not None and not after[2] and after[1] == seg:
            size += self._take(address + size)[0]
        before = self.ends.get(address)
        if before is not None and not self.blocks[before][2] and self.blocks[before][1] == seg:
            size += self._take(before)[0]
            address = before
        self._put(address, size, seg)

    def empty_cache(self) -> int:
        released = 0
        for seg, (base, size, pinned, _) in list(self.segments.items()):
            block = self.blocks.get(base)
            if not pinned and block is not None and block[0] == size and not block[2]:
                self._take(base)
                del self.segments[seg]
                released += 1
        return released


def replay_segments(size_bytes: np.ndarray, ids: np.ndarray, release_before: np.ndarray,
                    pinned: list[PinnedRange]) -> SegmentReplay:
    """Replay allocations (``size_bytes`` > 0) and frees (< 0) of blocks named by ``ids`` (an
    allocation's id is freed by the next free of the same id), with ``empty_cache()`` before
    every event where ``release_before`` is set, from a cache holding only ``pinned``. Frees of
    ids allocated before the sequence are ignored (their space is in ``pinned``)."""
    allocator = _Allocator(pinned)
    new = np.zeros(len(size_bytes), dtype=np.int64)
    placed: dict[int, int] = {}
    released = 0
    for i, (size, name, release) in enumerate(zip(size_bytes.tolist(), ids.tolist(),
                                                  release_before.tolist(), strict=True)):
        if release:
            released += allocator.empty_cache()
        if size > 0:
            placed[name], new[i] = allocator.malloc(size)
        elif name in placed:
            allocator.free(placed.pop(name))
    return SegmentReplay(new_segment=new > 0, segment_bytes=new, num_releases=released)
