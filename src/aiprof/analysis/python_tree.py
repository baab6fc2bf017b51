"""Python hotspots from ``with_stack`` traces: a call tree of Python functions with their CPU
time and the GPU time of the kernels they launched (pyinstrument's view, plus the GPU).

Frames (``python_function`` events) nest by their ``Python parent id``. Calls of one function
from one call path are merged into one node (the call tree, not the call graph): a node's
total is the time its frames lasted, its self time the total minus its children's. A GPU op
counts for the innermost frame of its launching thread that contains its launch call; a
node's total GPU time includes its descendants'.

The harness is left out by default: frames of aiprof itself, ``runpy`` and ``threading`` that
have no frame of the user's code above them, and everything aiprof's own threads run. That
drops the call chain from ``aiprof run`` down to the script's ``<module>`` (runpy hands over to
the script there, whose frames become the roots) and the NVML sampler's thread with the pynvml
and lock frames under it; it keeps every frame under user code, aiprof's step hooks inside
``optimizer.step()`` included (they cost the step time), and user threads started through
``threading``. ``harness=True`` keeps all.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from aiprof.analysis.cputree import span_tree, thread_keys
from aiprof.analysis.frames import data_frame
from aiprof.trace import Trace
from aiprof.trace.links import lookup


@dataclass(frozen=True)
class CallNode:
    """One function on one call path (``parent``: index of the caller's node, -1 for roots)."""

    parent: int
    depth: int
    name: str
    count: int
    total_cpu_us: float
    self_cpu_us: float
    total_gpu_us: float
    self_gpu_us: float


@dataclass(frozen=True)
class CallTree:
    """Nodes in depth-first order, children by total CPU time (largest first)."""

    rank: int
    path: str
    nodes: list[CallNode]

    @property
    def total_cpu_us(self) -> float:
        return sum(n.total_cpu_us for n in self.nodes if n.parent < 0)

    def to_pandas(self) -> Any:
        names = [f.name for f in fields(CallNode)]
        return data_frame({n: [getattr(c, n) for c in self.nodes] for n in names})


AIPROF_MARK = "aiprof/"
HANDOFF_MARKS = ("<frozen runpy>", "runpy.py(")
"""runpy runs the user's script: after it the frames are the user's again."""
PLAIN_MARKS = ("threading.py(",)
"""Frames that belong to whoever called them."""


def _kinds(trace: Trace, name_id: np.ndarray) -> np.ndarray:
    """Per frame: 0 user code, 1 aiprof, 2 runpy (hands over to the script), 3 threading."""
    lookup_kind = np.zeros(int(name_id.max()) + 1, np.int8)
    for i in np.unique(name_id).tolist():
        name = trace.name(int(i))
        lookup_kind[i] = (1 if AIPROF_MARK in name else 2 if any(m in name for m in HANDOFF_MARKS)
                          else 3 if any(m in name for m in PLAIN_MARKS) else 0)
    kinds: np.ndarray = lookup_kind[name_id]
    return kinds


def _harness(parent: np.ndarray, depth: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """Frames to leave out: the harness prefix of each thread (aiprof, runpy and threading
    frames with no user frame above), and every frame under a prefix whose last say was
    aiprof's (aiprof's own threads: the NVML sampler and what it calls)."""
    n = len(parent)
    prefix = np.zeros(n, bool)
    aiprof_owned = np.zeros(n, bool)  # the prefix so far was handed to aiprof, not to runpy
    dead = np.zeros(n, bool)  # under aiprof's own code: the whole subtree goes
    for level in range(int(depth.max()) + 1 if n else 0):
        rows = np.flatnonzero(depth == level)
        up = parent[rows]
        has_up = up >= 0
        up0 = np.maximum(up, 0)
        above_prefix = np.where(has_up, prefix[up0], True)
        above_owned = np.where(has_up, aiprof_owned[up0], False)
        above_dead = np.where(has_up, dead[up0], False)
        is_prefix = above_prefix & (kind[rows] > 0) & ~above_dead
        prefix[rows] = is_prefix
        aiprof_owned[rows] = np.where(kind[rows] == 1, True,
                                      np.where(kind[rows] == 2, False, above_owned))
        dead[rows] = above_dead | (~is_prefix & above_prefix & above_owned & has_up)
    drop: np.ndarray = prefix | dead
    return drop


def python_call_tree(trace: Trace, *, harness: bool = False) -> CallTree:
    """The merged call tree of every thread's Python frames (see the module docstring);
    ``harness`` keeps the frames of aiprof, runpy and threading above the user's code."""
    py = trace.python_functions
    if len(py) == 0:
        return CallTree(trace.rank, trace.path, [])
    parent = lookup(py.parent_id, py.python_id)
    dur, name_id, self_gpu = py.dur_us, py.name_id, _gpu_by_frame(trace)
    if not harness:
        drop = _harness(parent, _depths(parent), _kinds(trace, name_id))
        if drop.all():
            return CallTree(trace.rank, trace.path, [])
        keep = np.flatnonzero(~drop)
        new_index = np.full(len(parent), -1)
        new_index[keep] = np.arange(len(keep))
        parent = np.where(parent[keep] >= 0, new_index[np.maximum(parent[keep], 0)], -1)
        dur, name_id, self_gpu = dur[keep], name_id[keep], self_gpu[keep]
    n = len(parent)
    depth = _depths(parent)
    node = _merge_paths(parent, depth, name_id)
    total_cpu = np.bincount(node, weights=dur)
    children = np.zeros(n)
    has = parent >= 0
    np.add.at(children, parent[has], dur[has])
    self_cpu = np.bincount(node, weights=dur - children)
    num_nodes = int(node.max()) + 1
    node_parent = np.full(num_nodes, -1)
    node_parent[node[has]] = node[parent[has]]
    node_depth = np.zeros(num_nodes, np.int64)
    node_depth[node] = depth
    node_name = np.zeros(num_nodes, np.int64)
    node_name[node] = name_id
    gpu_self = np.bincount(node, weights=self_gpu, minlength=num_nodes)
    gpu_total = gpu_self.copy()
    for level in range(int(node_depth.max()), 0, -1):
        rows = np.flatnonzero(node_depth == level)
        np.add.at(gpu_total, node_parent[rows], gpu_total[rows])
    counts = np.bincount(node, minlength=num_nodes)
    order = _depth_first(node_parent, total_cpu)
    position = np.empty(num_nodes, np.int64)
    position[order] = np.arange(num_nodes)
    nodes = [
        CallNode(int(position[node_parent[i]]) if node_parent[i] >= 0 else -1,
                 int(node_depth[i]), trace.name(int(node_name[i])), int(counts[i]),
                 float(total_cpu[i]), float(self_cpu[i]), float(gpu_total[i]), float(gpu_self[i]))
        for i in order
    ]
    return CallTree(trace.rank, trace.path, nodes)


def _depths(parent: np.ndarray) -> np.ndarray:
    """Depth of each frame: all frames climb one level per round (rounds = the deepest)."""
    depth = (parent >= 0).astype(np.int64)
    up = parent.copy()
    while (up >= 0).any():
        step = up >= 0
        depth[step] += np.where(up[step] >= 0, (parent[up[step]] >= 0).astype(np.int64), 0)
        up = np.where(step, parent[np.maximum(up, 0)], -1)
    return depth


def _merge_paths(parent: np.ndarray, depth: np.ndarray, name_id: np.ndarray) -> np.ndarray:
    """Node id of each frame: frames with the same caller node and name share one."""
    node = np.full(len(parent), -1)
    next_id = 0
    for level in range(int(depth.max()) + 1):
        rows = np.flatnonzero(depth == level)
        caller = np.where(parent[rows] >= 0, node[np.maximum(parent[rows], 0)], -1)
        keys = (caller + 1) * (int(name_id.max()) + 1) + name_id[rows]
        _, group = np.unique(keys, return_inverse=True)
        node[rows] = next_id + group
        next_id += int(group.max()) + 1 if len(group) else 0
    return node


def _gpu_by_frame(trace: Trace) -> np.ndarray:
    """GPU time launched from inside each frame (by the innermost frame around the launch)."""
    py, calls, gpu = trace.python_functions, trace.runtime, trace.gpu_ops
    n = len(py)
    pid = np.concatenate([py.pid, calls.pid])
    tid = np.concatenate([py.tid, calls.tid])
    ts = np.concatenate([py.ts_us, calls.ts_us])
    dur = np.concatenate([py.dur_us, calls.dur_us])
    tree = span_tree(thread_keys(pid, tid), ts, dur)
    owner = tree.parent[n:]
    while (owner >= n).any():  # a call nested in a call: its frame is the outer call's
        owner = np.where(owner >= n, tree.parent[np.maximum(owner, 0)], owner)
    launched = gpu.launch_row >= 0
    frame = owner[gpu.launch_row[launched]]
    out = np.zeros(n)
    np.add.at(out, frame[frame >= 0], gpu.dur_us[launched][frame >= 0])
    return out


def _depth_first(parent: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Node ids in depth-first order, heavier children first."""
    children: dict[int, list[int]] = {}
    for child in np.lexsort((np.arange(len(parent)), -weight)).tolist():
        children.setdefault(int(parent[child]), []).append(child)
    order: list[int] = []
    stack = list(reversed(children.get(-1, [])))
    while stack:  # one step per merged node (call paths, far fewer than frames)
        current = stack.pop()
        order.append(current)
        stack.extend(reversed(children.get(current, [])))
    return np.array(order, dtype=np.int64)
