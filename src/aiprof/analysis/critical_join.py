"""The dependency graphs of several ranks joined at their collectives (``critical_ranks``).

Each rank's graph is ``critical_graph``'s of its window, plus its host collectives (gloo's
``gloo:<op>`` spans on the worker thread; the GPU ones, NCCL kernels, are in the graph
already): an edge from the end of the ``c10d::`` op that issued the span to its start, and
from its end to the next op of the issuing thread (a blocking ``all_reduce`` waits there).

A collective is the same one on every rank when it has the same name and size (NCCL kernel
name and ``In msg nelems``; the gloo span's name) and the same place among that rank's
collectives of that name and size in the window; one whose count is not the same on every
given rank, and point-to-point ops (send/recv: the peer is not recorded), stay unjoined.

Its end on every rank waits for the last rank to enter it. The last rank is the one whose
span starts last when every trace names the same host (``host_name``: one clock); otherwise
the one whose span is the shortest, told by duration, not by clocks (hosts' clocks differ by
more than an NCCL kernel lasts, and the kernels of one collective end together: the rank
that waited least entered last). On each rank the collective then weighs the time from the
last rank's entry to that rank's end (on one clock; otherwise the last rank's span): the
rest of a longer span is waiting, on no path, as HTA gives the time in a blocking call no
weight. A **collective** edge of that weight goes from the last rank's start to every other
rank's end, so the longest path can leave the slow rank there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from aiprof.analysis.critical_graph import DEPENDENCY, EDGE_TYPES, OPERATOR, Graph, build_graph
from aiprof.analysis.critical_path import BOUNDS, edge_bounds
from aiprof.trace import Trace

COLLECTIVE = len(EDGE_TYPES)
JOINED_EDGE_TYPES = (*EDGE_TYPES, "collective")
JOINED_BOUNDS = (*BOUNDS, "cpu_communication_bound")
HOST_COMM = len(BOUNDS)
HOST_COLLECTIVE = re.compile(r"^gloo:")
GPU_COLLECTIVE = re.compile(r"^nccl|^rccl", re.I)
POINT_TO_POINT = re.compile(r"send|recv", re.I)
ISSUER = re.compile(r"^c10d::")


@dataclass(frozen=True, eq=False)
class RankPart:
    """One rank's events and edges (node ``2i`` starts event ``i``, ``2i + 1`` ends it):
    ``graph``'s events, then its host collectives (rows of ``trace.annotations``)."""

    trace: Trace
    graph: Graph
    lo_us: float
    hi_us: float
    host_rows: np.ndarray
    ts_us: np.ndarray
    dur_us: np.ndarray
    name_id: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    weight_us: np.ndarray
    kind: np.ndarray  # index into JOINED_EDGE_TYPES
    event: np.ndarray
    bound: np.ndarray  # index into JOINED_BOUNDS, -1 for none

    def node_ts(self, nodes: np.ndarray) -> np.ndarray:
        events = nodes // 2
        return np.asarray(self.ts_us[events] + np.where(nodes % 2 == 1, self.dur_us[events], 0))


def rank_part(trace: Trace, lo_us: float, hi_us: float) -> RankPart:
    """The graph of ``trace`` in ``[lo_us, hi_us]`` with its host collectives."""
    g = build_graph(trace, lo_us, hi_us)
    notes = trace.annotations
    rows = np.flatnonzero((notes.ts_us >= lo_us) & (notes.ts_us <= hi_us) & (notes.dur_us > 0)
                          & trace.strings.mask(notes.name_id, HOST_COLLECTIVE))
    first = len(g.ts_us)
    events = first + np.arange(len(rows))
    ts = np.concatenate([g.ts_us, notes.ts_us[rows]])
    dur = np.concatenate([g.dur_us, notes.dur_us[rows]])
    names = np.concatenate([g.name_id, notes.name_id[rows]])
    name_id = np.where(g.event >= 0, g.name_id[np.maximum(g.event, 0)], -1)
    bound = edge_bounds(trace, g, g.kind, g.event, name_id)
    issue_src, issue_dst, wait_src, wait_dst, blocked = _host_links(trace, g, ts, dur, events)
    n, i, w = len(rows), len(issue_src), len(wait_src)
    into_blocked = (g.kind == OPERATOR) & np.isin(g.dst, 2 * blocked + 1)
    return RankPart(
        trace, g, lo_us, hi_us, rows, ts, dur, names,
        np.concatenate([g.src, 2 * events, issue_src, wait_src]),
        np.concatenate([g.dst, 2 * events + 1, issue_dst, wait_dst]),
        np.concatenate([np.where(into_blocked, 0.0, g.weight_us), dur[first:], np.zeros(i + w)]),
        np.concatenate([g.kind, np.full(n, OPERATOR), np.full(i + w, DEPENDENCY)]),
        np.concatenate([g.event, events, np.full(i + w, -1)]),
        np.concatenate([bound, np.full(n, HOST_COMM), np.full(i + w, -1)]),
    )


def _host_links(trace: Trace, g: Graph, ts: np.ndarray, dur: np.ndarray,
                events: np.ndarray) -> tuple[np.ndarray, ...]:
    """Issue edges (the last ``c10d::`` op started before a host collective -> its start:
    from the op's end, or from its start when it outlasts the collective's start: then it
    waits on the worker, and its time is the collective's, ``blocked``), and wait edges (the
    collective's end -> the first op of the issuing thread starting after both ends)."""
    empty = np.zeros(0, np.int64)
    ops = trace.cpu_ops
    op_rows = g.rows[: g.num_ops]
    issuers = np.flatnonzero(trace.strings.mask(g.name_id[: g.num_ops], ISSUER))
    if len(events) == 0 or len(issuers) == 0:
        return empty, empty, empty, empty, empty
    issuers = issuers[np.argsort(ts[issuers], kind="stable")]
    at = np.searchsorted(ts[issuers], ts[events], side="right") - 1
    has, coll = at >= 0, events[at >= 0]
    issuer = issuers[at[has]]
    issuer_end = ts[issuer] + dur[issuer]
    overlaps = issuer_end > ts[coll]
    thread = ops.pid[op_rows].astype(np.int64) * (1 << 32) + ops.tid[op_rows]
    order = np.lexsort((-dur[: g.num_ops], ts[: g.num_ops], thread))  # thread, start, outer first
    wait_src, wait_dst = [], []
    for c, i, after in zip(coll.tolist(), issuer.tolist(),
                           np.maximum(ts[coll] + dur[coll], issuer_end).tolist(), strict=True):
        mine = order[thread[order] == thread[i]]
        k = int(np.searchsorted(ts[mine], after, side="left"))
        if k < len(mine):
            wait_src.append(2 * c + 1)
            wait_dst.append(2 * int(mine[k]))
    return (2 * issuer + 1 - overlaps, 2 * coll, np.array(wait_src, np.int64),
            np.array(wait_dst, np.int64), issuer[overlaps])


@dataclass(frozen=True, eq=False)
class Joined:
    """Every rank's part on common node ids (rank ``k``'s nodes start at ``offset[k]``)."""

    parts: list[RankPart]
    offset: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    weight_us: np.ndarray
    src_ts_us: np.ndarray
    dst_ts_us: np.ndarray
    part: np.ndarray  # per edge: index into parts (of the source node)
    local: np.ndarray  # per edge: index into that part's edges; -1 for collective edges
    kind: np.ndarray
    bound: np.ndarray
    num_joined: int
    num_unjoined: int

    @property
    def num_nodes(self) -> int:
        return int(self.offset[-1])


def join(parts: list[RankPart], *, one_clock: bool) -> Joined:
    """The parts on one graph, joined at their collectives (the module docstring;
    ``one_clock``: the traces are of one host)."""
    keys = [_collectives(p) for p in parts]
    weights = [p.weight_us.copy() for p in parts]
    span_edge = [_span_edges(p) for p in parts]
    offset = np.concatenate([[0], np.cumsum([2 * len(p.ts_us) for p in parts])])
    cross: list[tuple[int, int, int, int, float]] = []  # (part, event, part, event, weight)
    joined, unjoined = 0, sum(n for _, n in keys)
    for key in sorted(set().union(*(k for k, _ in keys))):
        lists = [k.get(key, []) for k, _ in keys]
        if len({len(x) for x in lists}) != 1:
            unjoined += sum(len(x) for x in lists)
            continue
        for members in zip(*lists, strict=True):
            start = np.array([parts[r].ts_us[e] for r, e in enumerate(members)])
            dur = np.array([parts[r].dur_us[e] for r, e in enumerate(members)])
            last = int(np.argmax(start) if one_clock else np.argmin(dur))
            transfer = (np.clip(start + dur - start[last], 0.0, dur) if one_clock
                        else np.full(len(dur), dur[last]))
            for r, e in enumerate(members):
                weights[r][span_edge[r][e]] = transfer[r]
                if r != last:
                    cross.append((last, members[last], r, e, float(transfer[r])))
            joined += 1
    return _assemble(parts, weights, offset, cross, joined, unjoined)


def _collectives(p: RankPart) -> tuple[dict[tuple[str, int], list[int]], int]:
    """Events that are collectives, by (name, size), in start order; and the number of
    point-to-point ones (left out)."""
    g, trace = p.graph, p.trace
    gpu_events = np.arange(g.num_cpu, len(g.ts_us))
    sizes = trace.gpu_ops.in_nelems[g.rows[g.num_cpu:]]
    is_gpu = trace.strings.mask(g.name_id[g.num_cpu:], GPU_COLLECTIVE)
    host_events = np.arange(len(g.ts_us), len(p.ts_us))
    events = np.concatenate([gpu_events[is_gpu], host_events]).astype(np.int64)
    size = np.concatenate([sizes[is_gpu], np.full(len(host_events), -1)])
    ids, which = np.unique(p.name_id[events], return_inverse=True)
    names = [trace.strings.full(int(i)) for i in ids.tolist()]
    p2p = np.array([bool(POINT_TO_POINT.search(n)) for n in names], dtype=bool)[which]
    out: dict[tuple[str, int], list[int]] = {}
    for i in np.argsort(p.ts_us[events], kind="stable").tolist():
        if not p2p[i]:
            out.setdefault((names[which[i]], int(size[i])), []).append(int(events[i]))
    return out, int(p2p.sum())


def _span_edges(p: RankPart) -> np.ndarray:
    """Per event: the index of its start -> end edge, -1 for none."""
    out = np.full(len(p.ts_us), -1)
    span = np.flatnonzero((p.kind == OPERATOR) & (p.src % 2 == 0) & (p.dst == p.src + 1))
    out[p.src[span] // 2] = span
    return out


def _assemble(parts: list[RankPart], weights: list[np.ndarray], offset: np.ndarray,
              cross: list[tuple[int, int, int, int, float]], joined: int,
              unjoined: int) -> Joined:
    c = np.array(cross, dtype=np.float64).reshape(-1, 5)
    a, ae, b, be = (c[:, i].astype(np.int64) for i in range(4))
    cross_src = offset[a] + 2 * ae
    cross_dst = offset[b] + 2 * be + 1
    start = np.array([parts[int(r)].ts_us[int(e)] for r, e in zip(a, ae, strict=True)])
    end = np.array([parts[int(r)].ts_us[int(e)] + parts[int(r)].dur_us[int(e)]
                    for r, e in zip(b, be, strict=True)])
    host = np.array([int(e) >= len(parts[int(r)].graph.ts_us) for r, e in zip(a, ae, strict=True)],
                    dtype=bool)
    cross_bound = np.where(host, HOST_COMM, BOUNDS.index("gpu_communication_bound"))
    return Joined(
        parts, offset,
        np.concatenate([*(p.src + offset[k] for k, p in enumerate(parts)), cross_src]),
        np.concatenate([*(p.dst + offset[k] for k, p in enumerate(parts)), cross_dst]),
        np.concatenate([*weights, c[:, 4]]),
        np.concatenate([*(p.node_ts(p.src) for p in parts), start]),
        np.concatenate([*(p.node_ts(p.dst) for p in parts), end]),
        np.concatenate([*(np.full(len(p.src), k) for k, p in enumerate(parts)), a]),
        np.concatenate([*(np.arange(len(p.src)) for p in parts), np.full(len(a), -1)]),
        np.concatenate([*(p.kind for p in parts), np.full(len(a), COLLECTIVE)]),
        np.concatenate([*(p.bound for p in parts), cross_bound]),
        joined, unjoined,
    )
