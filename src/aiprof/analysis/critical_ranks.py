"""The critical path across ranks: the longest path through every rank's graph of the same
window, joined at the collectives (``critical_join`` says how), and which rank each stretch
of it is on. HTA's critical path is of one rank; on one rank this is ``critical_path``'s but
for the host collectives (gloo spans), which it adds.

Times are on the common clock of the ``TraceSet`` the traces come from. An edge belongs to
the rank of its source node, so a collective edge (from the last rank to enter a collective
to another rank's end of it) counts on the last rank: the transfer starts when it enters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aiprof.analysis.critical_join import (
    JOINED_BOUNDS,
    JOINED_EDGE_TYPES,
    Joined,
    join,
    rank_part,
)
from aiprof.analysis.critical_path import PathOp, longest_path, path_window
from aiprof.analysis.frames import data_frame
from aiprof.errors import InputError
from aiprof.trace import Trace


@dataclass(frozen=True)
class PathStretch:
    """Consecutive path edges on one rank."""

    rank: int
    start_us: float
    end_us: float
    length_us: float
    """Path time in the stretch (the weights of its edges)."""
    num_edges: int
    top_name: str
    """The name with the most path time in the stretch."""


@dataclass(frozen=True, eq=False)
class RanksCriticalPath:
    """The longest path across ranks; ``edge_*`` are parallel arrays, in path order."""

    ranks: list[int]
    window: str
    length_us: float
    by_bound_us: dict[str, float]
    by_rank_us: dict[int, float]
    ops: list[PathOp]
    """Names on the path over every rank, most time first."""
    stretches: list[PathStretch]
    num_joined: int
    """Collectives joined across the ranks."""
    num_unjoined: int
    """Collective spans left on their rank (point-to-point, or not on every rank as often)."""
    last_by: str
    """How the last rank to enter a collective was told (``critical_join``)."""
    edge_rank: np.ndarray
    edge_type: list[str]
    edge_bound: list[str]
    edge_name: list[str]
    edge_start_us: np.ndarray
    edge_end_us: np.ndarray
    edge_weight_us: np.ndarray

    @property
    def num_rank_changes(self) -> int:
        return max(len(self.stretches) - 1, 0)

    def pct(self, bound: str) -> float:
        return 100.0 * self.by_bound_us.get(bound, 0.0) / self.length_us if self.length_us else 0.0

    def to_pandas(self) -> Any:
        return data_frame({"rank": self.edge_rank, "type": self.edge_type,
                           "bound_by": self.edge_bound, "name": self.edge_name,
                           "start_us": self.edge_start_us, "end_us": self.edge_end_us,
                           "weight_us": self.edge_weight_us})


def ranks_critical_path(traces: Sequence[Trace], *, step: int | None = None,
                        annotation: str | None = None, instance: int = 0) -> RanksCriticalPath:
    """The critical path of the same window (``critical_path``'s arguments) on every rank,
    joined at collectives. The default step is the first rank's second step (or only one)."""
    if not traces:
        raise InputError("no traces given")
    if step is None and annotation is None and len(traces[0].steps):
        numbers = traces[0].steps.number.tolist()
        step = int(numbers[1 if len(numbers) > 1 else 0])
    windows = [path_window(t, step, annotation, instance) for t in traces]
    parts = [rank_part(t, lo, hi) for t, (lo, hi, _) in zip(traces, windows, strict=True)]
    hosts = {t.metadata.get("host_name") for t in traces}
    one_clock = len(hosts) == 1 and bool(hosts.pop())
    g = join(parts, one_clock=one_clock)
    path = np.array(longest_path(g.src, g.dst, g.weight_us, g.src_ts_us, g.dst_ts_us,
                                 g.num_nodes), dtype=np.int64)
    ranks = np.array([t.rank for t in traces])[g.part[path]]
    names = _names(g, path)
    bound, weight = g.bound[path], g.weight_us[path]
    return RanksCriticalPath(
        ranks=[t.rank for t in traces], window=windows[0][2], length_us=float(weight.sum()),
        by_bound_us={b: float(weight[bound == k].sum()) for k, b in enumerate(JOINED_BOUNDS)},
        by_rank_us={t.rank: float(weight[ranks == t.rank].sum()) for t in traces},
        ops=_ops(names, bound, weight), stretches=_stretches(ranks, names, g.src_ts_us[path],
                                                             g.dst_ts_us[path], weight),
        num_joined=g.num_joined, num_unjoined=g.num_unjoined,
        last_by="latest start (one host)" if one_clock else "shortest span", edge_rank=ranks,
        edge_type=[JOINED_EDGE_TYPES[int(k)] for k in g.kind[path]],
        edge_bound=[JOINED_BOUNDS[b] if b >= 0 else "" for b in bound.tolist()],
        edge_name=names, edge_start_us=g.src_ts_us[path], edge_end_us=g.dst_ts_us[path],
        edge_weight_us=weight,
    )


def _names(g: Joined, path: np.ndarray) -> list[str]:
    """The name of the event each path edge is attributed to ("" for none); a collective
    edge is named by the collective it starts."""
    part, local = g.part[path], g.local[path]
    out = [""] * len(path)
    for k, p in enumerate(g.parts):
        mine = np.flatnonzero(part == k)
        cross = local[mine] < 0
        event = np.where(cross, (g.src[path[mine]] - g.offset[k]) // 2,
                         p.event[np.maximum(local[mine], 0)])
        name_id = np.where(event >= 0, p.name_id[np.maximum(event, 0)], -1)
        ids, which = np.unique(name_id, return_inverse=True)
        distinct = [p.trace.name(int(i)) if i >= 0 else "" for i in ids.tolist()]
        for i, j in zip(mine.tolist(), which.tolist(), strict=True):
            out[i] = distinct[j]
    return out


def _ops(names: list[str], bound: np.ndarray, weight: np.ndarray) -> list[PathOp]:
    groups: dict[tuple[str, int], list[float]] = {}
    for name, b, w in zip(names, bound.tolist(), weight.tolist(), strict=True):
        if b >= 0 and w > 0:
            groups.setdefault((name, b), []).append(w)
    ops = [PathOp(name, JOINED_BOUNDS[b], len(ws), float(sum(ws)))
           for (name, b), ws in groups.items()]
    return sorted(ops, key=lambda o: (-o.time_us, o.name))


def _stretches(ranks: np.ndarray, names: list[str], start: np.ndarray, end: np.ndarray,
               weight: np.ndarray) -> list[PathStretch]:
    if len(ranks) == 0:
        return []
    cuts = np.flatnonzero(ranks[1:] != ranks[:-1]) + 1
    out = []
    for lo, hi in zip(np.concatenate([[0], cuts]).tolist(),
                      np.concatenate([cuts, [len(ranks)]]).tolist(), strict=True):
        by_name: dict[str, float] = {}
        for i in range(lo, hi):
            by_name[names[i]] = by_name.get(names[i], 0.0) + float(weight[i])
        top = max(by_name, key=lambda n: (by_name[n], n != ""))
        out.append(PathStretch(int(ranks[lo]), float(start[lo]), float(end[hi - 1]),
                               float(weight[lo:hi].sum()), hi - lo, top))
    return out
