"""``aiprof distributed``: collectives, overlap, stragglers and imbalance across ranks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from aiprof.distributed.busbw import busbw_factor
from aiprof.distributed.commtrace import CollectiveCalls, collective_calls, compute_spans
from aiprof.distributed.overlap import StepOverlap, overlap_pct, step_overlaps
from aiprof.distributed.stragglers import collective_waits, compute_outliers, imbalance_pct
from aiprof.errors import InputError
from aiprof.trace.devices import DistributedInfo
from aiprof.trace.stream import TraceStream

if TYPE_CHECKING:
    from aiprof.trace import Trace, TraceSet

SCHEMA = "aiprof.distributed/1"


@dataclass(frozen=True, kw_only=True)
class DistributedOptions:
    """Thresholds of the analysis."""

    straggler_wait_pct: float = 15.0
    """Name a rank a straggler when the others wait for it at least this % of the step time,
    it arrives last in most matched calls, and it causes at least ``dominance`` × the wait any
    other rank causes (so that symmetric noise names nobody)."""
    dominance: float = 2.0
    """How many times more wait a straggler causes than any other rank."""
    compute_tolerance_pct: float = 10.0
    """...or when its compute per step exceeds the other ranks' median by more than this %."""
    include_calls: bool = False
    """Also list every collective call (rank, start, duration, size, busbw)."""


@dataclass(frozen=True, kw_only=True)
class CollectiveCall:
    """One collective call on one rank."""

    rank: int
    collective: str
    ts_us: float
    dur_us: float
    num_bytes: float
    """nccl-tests' S; -1 when the trace does not say."""
    busbw_gbps: float
    """S / duration × the busbw factor (NaN without a size); includes any waiting."""
    algorithm: str


@dataclass(frozen=True, kw_only=True)
class CollectiveSummary:
    """One collective kind on one rank."""

    rank: int
    collective: str
    num_calls: int
    total_bytes: float
    """Sum of nccl-tests sizes S over the calls of known size."""
    total_time_us: float
    mean_time_us: float
    busbw_gbps: float
    """Σ bytes / Σ time of the calls of known size × busbw factor; waiting lowers it."""
    algorithms: list[str]


@dataclass(frozen=True, kw_only=True)
class RankReport:
    """One rank, averaged over its steps."""

    rank: int
    num_steps: int
    step_time_us: float
    compute_us_per_step: float
    comm_us_per_step: float
    overlap_pct: float
    """|compute ∩ comm| / |comm| × 100 (HTA's definition)."""
    exposed_comm_us_per_step: float
    wait_us_per_step: float
    """Time in collectives spent waiting for a later rank."""
    caused_wait_us_per_step: float
    """Wait of the other ranks attributed to this rank."""
    last_arrival_share_pct: float
    steps: list[StepOverlap]


@dataclass(frozen=True, kw_only=True)
class Straggler:
    """A rank the others wait for, with the evidence."""

    rank: int
    reason: str
    """``late arrival`` (others wait for it in collectives) and/or ``compute`` (outlier)."""
    others_wait_us_per_step: float
    others_wait_pct_of_step: float
    """The wait it causes per step as a share of the longest rank's step."""
    compute_us_per_step: float
    last_arrival_share_pct: float


@dataclass(frozen=True, kw_only=True)
class DistributedReport:
    """Result of ``analyze_distributed`` (schema ``aiprof.distributed/1``)."""

    schema: str
    num_ranks: int
    world_size: int
    backend: str
    alignment: str
    collective_source: str
    num_matched_calls: int
    ranks: list[RankReport]
    collectives: list[CollectiveSummary]
    stragglers: list[Straggler]
    compute_imbalance_pct: float
    """λ = (max/mean − 1)·100 of compute per step across ranks."""
    notes: list[str] = field(default_factory=list)
    calls: list[CollectiveCall] = field(default_factory=list)
    """Every collective call, when asked for (``include_calls``)."""


def summarize_collectives(rank: int, calls: CollectiveCalls) -> list[CollectiveSummary]:
    """Per collective kind: calls, bytes, time and achieved bus bandwidth."""
    out = []
    for kind in sorted(set(calls.kind)):
        rows = np.array([i for i, k in enumerate(calls.kind) if k == kind])
        known = rows[calls.num_bytes[rows] >= 0]
        nbytes, known_time = float(calls.num_bytes[known].sum()), float(calls.dur_us[known].sum())
        group = int(np.max(calls.group_size[rows])) if len(rows) else -1
        factor = busbw_factor(kind, group) if group >= 1 and kind != "other" else float("nan")
        busbw = nbytes / known_time / 1000.0 * factor if known_time > 0 else float("nan")
        total = float(calls.dur_us[rows].sum())
        out.append(
            CollectiveSummary(
                rank=rank,
                collective=kind,
                num_calls=len(rows),
                total_bytes=nbytes,
                total_time_us=total,
                mean_time_us=total / len(rows),
                busbw_gbps=busbw,
                algorithms=sorted({calls.algorithm[i] for i in rows} - {""}),
            )
        )
    return out


@dataclass(frozen=True)
class RankPart:
    """What the cross-rank analysis needs of one rank, computed where the rank is read: its
    collectives (with sizes and times) and its per-step overlap."""

    rank: int
    distributed: DistributedInfo | None
    calls: CollectiveCalls
    steps: list[StepOverlap]

    def shifted(self, delta_us: float) -> RankPart:
        """The same part with its calls moved by ``delta_us`` (as ``Trace.shifted`` moves)."""
        if delta_us == 0:
            return self
        return replace(self, calls=replace(self.calls, ts_us=self.calls.ts_us + delta_us))


def rank_part(trace: Trace) -> RankPart:
    """One rank's ``RankPart`` (a ``Trace``)."""
    calls = collective_calls(trace)
    steps = trace.steps
    comm = (calls.ts_us, calls.ts_us + calls.dur_us)
    per_step = step_overlaps(compute_spans(trace), comm, steps.number, steps.start_us, steps.end_us)
    return RankPart(trace.rank, trace.distributed, calls, per_step)


def _rank_report(
    part: RankPart, wait_us: float, caused_us: float, last_share: float
) -> RankReport:
    per_step = part.steps
    count = max(len(per_step), 1)

    def mean(attr: str) -> float:
        return float(np.mean([getattr(s, attr) for s in per_step])) if per_step else 0.0

    return RankReport(
        rank=part.rank,
        num_steps=len(per_step),
        step_time_us=mean("step_time_us"),
        compute_us_per_step=mean("compute_us"),
        comm_us_per_step=mean("comm_us"),
        overlap_pct=overlap_pct(per_step),
        exposed_comm_us_per_step=mean("exposed_comm_us"),
        wait_us_per_step=wait_us / count,
        caused_wait_us_per_step=caused_us / count,
        last_arrival_share_pct=last_share,
        steps=per_step,
    )


def find_stragglers(ranks: list[RankReport], options: DistributedOptions) -> list[Straggler]:
    """Ranks the others wait for (late arrival) or whose compute is an outlier.

    A compute outlier counts only if it makes the others wait at least as long as it waits
    itself: a rank stuck in collectives runs its compute beside NCCL kernels that hold SMs,
    so its compute can look longer without it being the one the others wait for.
    """
    compute = [r.compute_us_per_step for r in ranks]
    outliers = set(compute_outliers(compute, options.compute_tolerance_pct))
    longest_step = max(r.step_time_us for r in ranks)
    out = []
    for i, r in enumerate(ranks):
        wait_pct = 100.0 * r.caused_wait_us_per_step / longest_step if longest_step > 0 else 0.0
        rivals = max((o.caused_wait_us_per_step for o in ranks if o is not r), default=0.0)
        late = (
            wait_pct >= options.straggler_wait_pct
            and r.last_arrival_share_pct >= 50.0
            and r.caused_wait_us_per_step >= options.dominance * rivals
        )
        slow = i in outliers and r.caused_wait_us_per_step >= r.wait_us_per_step
        reasons = [name for name, hit in (("late arrival", late), ("compute", slow)) if hit]
        if reasons:
            out.append(
                Straggler(
                    rank=r.rank,
                    reason=" + ".join(reasons),
                    others_wait_us_per_step=r.caused_wait_us_per_step,
                    others_wait_pct_of_step=wait_pct,
                    compute_us_per_step=r.compute_us_per_step,
                    last_arrival_share_pct=r.last_arrival_share_pct,
                )
            )
    return sorted(out, key=lambda s: -s.others_wait_us_per_step)


def analyze_distributed(
    traces: TraceSet | TraceStream | Iterable[Trace], options: DistributedOptions | None = None
) -> DistributedReport:
    """Analyze a TraceSet (one trace per rank), a single trace, or a ``TraceStream`` (each
    rank's part computed where it is read; only the parts come back)."""
    if isinstance(traces, TraceStream):
        mapped = traces.map(rank_part)
        parts = [p.shifted(s) for p, s in zip(mapped.results, mapped.shifts_us, strict=True)]
        return analyze_parts(parts, mapped.alignment, options)
    ranks_traces = list(traces)
    if not ranks_traces:
        raise InputError("no traces to analyze")
    return analyze_parts([rank_part(t) for t in ranks_traces],
                         str(getattr(traces, "alignment", "single trace")), options)


def analyze_parts(
    parts: list[RankPart], alignment: str, options: DistributedOptions | None = None
) -> DistributedReport:
    """The cross-rank analysis of the ranks' parts (on the common clock, in rank order)."""
    options = options or DistributedOptions()
    if not parts:
        raise InputError("no traces to analyze")
    calls = [p.calls for p in parts]
    waits = collective_waits(calls)
    reports = [
        _rank_report(p, waits.wait_us[i], waits.caused_us[i], waits.last_arrival_share_pct[i])
        for i, p in enumerate(parts)
    ]
    info = parts[0].distributed
    notes = _notes(parts, waits.num_matched_calls)
    return DistributedReport(
        schema=SCHEMA,
        num_ranks=len(parts),
        world_size=int(info.world_size) if info and info.world_size else len(parts),
        backend=str(info.backend) if info and info.backend else "unknown",
        alignment=alignment,
        collective_source=", ".join(sorted({c.source for c in calls})),
        num_matched_calls=waits.num_matched_calls,
        ranks=reports,
        collectives=[s for p in parts for s in summarize_collectives(p.rank, p.calls)],
        stragglers=find_stragglers(reports, options) if len(reports) > 1 else [],
        compute_imbalance_pct=imbalance_pct([r.compute_us_per_step for r in reports]),
        notes=notes,
        calls=[row for p in parts for row in list_calls(p.rank, p.calls)]
        if options.include_calls
        else [],
    )


def list_calls(rank: int, calls: CollectiveCalls) -> list[CollectiveCall]:
    """One row per call, with its achieved bus bandwidth."""
    rows = []
    for i, kind in enumerate(calls.kind):
        size, dur, group = (
            float(calls.num_bytes[i]),
            float(calls.dur_us[i]),
            int(calls.group_size[i]),
        )
        known = size >= 0 and dur > 0 and group >= 1 and kind != "other"
        busbw = size / dur / 1000.0 * busbw_factor(kind, group) if known else float("nan")
        rows.append(
            CollectiveCall(
                rank=rank,
                collective=kind,
                ts_us=float(calls.ts_us[i]),
                dur_us=dur,
                num_bytes=size,
                busbw_gbps=busbw,
                algorithm=calls.algorithm[i],
            )
        )
    return rows


def _notes(parts: list[RankPart], matched: int) -> list[str]:
    calls = [p.calls for p in parts]
    notes = []
    if all(len(c.kind) == 0 for c in calls):
        notes.append("no collectives found (no NCCL kernels, no gloo annotations)")
    if any(c.source == "gloo annotations" for c in calls):
        notes.append("gloo: collective sizes from c10d op input dims, float32 assumed")
    if len(parts) > 1 and matched == 0:
        notes.append(
            "no collective could be matched across ranks: waits and stragglers not computed"
        )
    world = parts[0].distributed.world_size if parts[0].distributed else None
    if world and world > len(parts):
        notes.append(
            f"{len(parts)} of {world} ranks given: cross-rank results cover those ranks only"
        )
    unknown = sum(int((c.num_bytes < 0).sum()) for c in calls)
    if unknown:
        notes.append(f"{unknown} collective calls without size args: excluded from bandwidth")
    return notes
