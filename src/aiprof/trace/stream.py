"""A ``TraceStream``: rank traces read and analysed one rank at a time, where the work runs.

``TraceSet`` holds every rank's tables in one process; 64 ranks of 54 MB do not fit a laptop
that way. A ``TraceStream`` holds only the files: ``map(work)`` reads each rank and runs
``work(trace)`` on it in a worker process (a pool bounded by the cores and by a memory budget),
or on a Ray cluster (``ray``), and hands back only what ``work`` returns. The trace itself
never leaves the worker.

Each rank is analysed on its own clock (``*_us`` from its first event, as ``load_trace``
reads it); ``RankResults.shifts_us`` are what ``align`` would add to put it on the ranks'
common zero, so cross-rank tables are moved there in the parent with the same additions.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Generic, TypeVar

from aiprof.errors import InputError
from aiprof.forked import map_forked, usable_cores
from aiprof.trace import parcel, split
from aiprof.trace.model import Trace
from aiprof.trace.reader import clock_shifts, load_trace
from aiprof.trace.tables import Table

R = TypeVar("R")
T = TypeVar("T", bound=Table)

PEAK_PER_JSON_BYTE = 2.0
"""A worker's peak memory per byte of its rank's JSON while reading and analysing it, above the
interpreter: measured 0.8-1.6 (benchmarks/scale.py, 2-core VM, 2026-12-01: one 54 MB synthetic
rank 105-141 MiB PSS against a 60 MiB bare interpreter; 2.5 GB, 2,485 MiB for summary and
3,929 MiB for diagnose and report), rounded up for traces with more, smaller events."""
WORKER_BASE_BYTES = 80 << 20
"""A worker's memory before it reads anything (a forked interpreter with numpy and aiprof's
analyses loaded, measured about 60 MiB PSS; 2-core VM, 2026-12-01), rounded up."""
BUDGET_SHARE = 0.5
"""Default budget: this share of the memory the kernel says is available (MemAvailable)."""


@dataclass(frozen=True)
class RankClock:
    """What putting a rank on the common zero needs (``reader.align``'s inputs)."""

    path: str
    rank: int
    base_time_ns: int | None
    origin_us: float
    world_size: int | None = None


@dataclass(frozen=True)
class RankResults(Generic[R]):
    """``work``'s result per rank, ordered by (rank, path) as a ``TraceSet`` orders traces."""

    clocks: tuple[RankClock, ...]
    results: tuple[R, ...]
    shifts_us: tuple[float, ...]
    """Per rank: what moves its own clock to the common zero (``Trace.shifted``'s delta)."""
    alignment: str

    def __iter__(self) -> Iterator[tuple[RankClock, R]]:
        return iter(zip(self.clocks, self.results, strict=True))

    def __len__(self) -> int:
        return len(self.results)


@dataclass(frozen=True)
class TraceStream:
    """Rank trace files, read and analysed where ``map`` runs the work; see the module doc."""

    files: tuple[Path, ...]
    step_annotation: str | None = None
    """``record_function`` name delimiting steps when there is no ``ProfilerStep#N``."""
    workers: int | None = None
    """Worker processes at most (default: one per core); 1 runs everything in this process."""
    memory_budget_bytes: int | None = None
    """What the workers may hold together (default: half of MemAvailable); fewer workers run
    when their ranks would not fit (``PEAK_PER_JSON_BYTE`` per byte of JSON each)."""
    ray: str | None = None
    """Run on Ray: a cluster's address ("auto", "local", ``host:port``, ``ray://host:10001``;
    "": ``ray.init()``'s default); ranks are then read and analysed as Ray tasks, on the nodes
    next to the files (``ray_engine``)."""
    check: Callable[[Sequence[RankClock]], None] | None = None
    """Called with every rank's clock before the results are used (``record.targets`` refuses
    files of two runs read as one job there)."""

    def __len__(self) -> int:
        return len(self.files)

    def map(self, work: Callable[[Trace], R]) -> RankResults[R]:
        """``work`` of every rank, run in workers (or Ray tasks); only its results come back.

        ``work`` must be a module-level function (or a ``functools.partial`` of one): it is
        pickled to the workers."""
        if not self.files:
            raise InputError("no trace files to analyse")
        if self.ray is not None:
            from aiprof.trace.ray_engine import map_on_ray

            pairs = map_on_ray(self.ray, list(self.files), work, self.step_annotation)
        else:
            pairs = self._map_local(work)
        if self.check is not None:
            self.check([clock for clock, _ in pairs])
        return _ordered(pairs)

    def _map_local(self, work: Callable[[Trace], R]) -> list[tuple[RankClock, R]]:
        parcel.remove_stale()  # every reader clears what killed readers left (parcel.py)
        count = self.worker_count()
        one = partial(read_and_work, work=work, step_annotation=self.step_annotation,
                      parts=1 if count > 1 else None)
        return map_forked(one, list(self.files), workers=count)

    def worker_count(self) -> int:
        """Workers that fit: at most the cores, the ranks and the memory budget allows."""
        wanted = min(self.workers or usable_cores(), len(self.files))
        budget = self.memory_budget_bytes or default_budget_bytes()
        largest = max(split.json_bytes(f) for f in self.files)
        fits = int(budget // rank_peak_bytes(largest))
        return max(1, min(wanted, fits))


def rank_peak_bytes(json_bytes: int) -> float:
    """The documented bound on one worker's peak memory for a rank of ``json_bytes``."""
    return WORKER_BASE_BYTES + PEAK_PER_JSON_BYTE * json_bytes


def default_budget_bytes() -> int:
    """``BUDGET_SHARE`` of MemAvailable (Linux), else of the physical memory."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(int(line.split()[1]) * 1024 * BUDGET_SHARE)
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * BUDGET_SHARE)
    except (ValueError, OSError):
        return 4 << 30


def read_and_work(
    file: str | Path, work: Callable[[Trace], R], step_annotation: str | None,
    parts: int | None = None,
) -> tuple[RankClock, R]:
    """One rank: read, run ``work``, keep its result and the rank's clock; drop the trace."""
    trace = load_trace(file, step_annotation=step_annotation, parts=parts)
    world = trace.distributed.world_size if trace.distributed is not None else None
    clock = RankClock(trace.path, trace.rank, trace.base_time_ns, trace.origin_us, world)
    return clock, work(trace)


def shifted_table(table: T, delta_us: float) -> T:
    """``table`` with its times moved by ``delta_us``, as ``Trace.shifted`` moves them."""
    if delta_us == 0:
        return table
    moved = {column: values + delta_us for column, values in table.columns().items()
             if column.endswith("_us") and column != "dur_us"}
    return replace(table, **moved)


def _ordered(pairs: Sequence[tuple[RankClock, R]]) -> RankResults[R]:
    ordered = sorted(pairs, key=lambda p: (p[0].rank, p[0].path))
    clocks = tuple(c for c, _ in ordered)
    shifts, how = clock_shifts([(c.base_time_ns, c.origin_us) for c in clocks])
    return RankResults(clocks, tuple(r for _, r in ordered), tuple(shifts), how)
