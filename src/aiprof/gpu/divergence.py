"""Warp divergence: a warp executes every path any of its active lanes takes, one after another.

Model: SIMT execution (CUDA C++ Programming Guide, "SIMT Architecture"): when lanes of a warp take
different paths, the warp runs each taken path with the other lanes masked off. The serialized
cost is the sum of the taken paths' costs; Nsight Compute's
``smsp__thread_inst_executed_per_inst_executed.ratio`` (nvprof ``warp_execution_efficiency`` as a
0-32 ratio; ../shared/reference/gpu-models.md §4) is thread-instructions / warp-instructions.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from aiprof.errors import InputError

WARP_SIZE = 32

BRANCH_EFFICIENCY_NOTE = (
    "Branch efficiency (smsp__sass_average_branch_targets_threads_uniform.pct) counts branch "
    "executions whose active lanes all went the same way. A divergent `if` is one non-uniform "
    "branch per warp, while every loop back-edge inside each path is uniform among the lanes "
    "still active, so a kernel that serializes half its work can still show ~97% (measured on an "
    "H200: 96.55% with 16.64 active threads per instruction). Use threads per instruction / 32.")


@dataclass(frozen=True, kw_only=True)
class Divergence:
    """Cost of one warp running a branch whose lanes may take different paths."""

    lanes_per_path: dict[str, int]
    """Active lanes that take each path."""
    serialized_cost: float
    """Cost the warp pays: common part + sum of the taken paths (cycles or instructions)."""
    converged_cost: float
    """Cost if every lane of the warp took the most expensive taken path (no serialization)."""
    slowdown: float
    """serialized_cost / converged_cost."""
    avg_active_threads_per_instruction: float
    """Thread-instructions / warp-instructions, 0 to 32, with costs counted as instructions."""
    simt_efficiency: float
    """avg_active_threads_per_instruction / 32."""
    note: str = BRANCH_EFFICIENCY_NOTE
    """Why branch efficiency does not measure divergence."""


def divergence(
    lane_paths: Sequence[Hashable | None],
    path_costs: Mapping[Hashable, float],
    *,
    common_cost: float = 0.0,
) -> Divergence:
    """Serialized cost and average active threads of one warp.

    ``lane_paths``: 32 path labels (None: inactive lane). ``path_costs``: cost of each path in
    cycles or instructions. ``common_cost``: work all active lanes do outside the branch.
    """
    if len(lane_paths) != WARP_SIZE:
        raise InputError(f"give {WARP_SIZE} lane paths (None for inactive), not {len(lane_paths)}")
    counts: dict[Hashable, int] = {}
    for path in lane_paths:
        if path is not None:
            counts[path] = counts.get(path, 0) + 1
    if not counts:
        raise InputError("at least one lane must be active")
    missing = [p for p in counts if p not in path_costs]
    if missing:
        raise InputError(f"no cost given for path(s) {missing!r}")
    costs = {p: float(path_costs[p]) for p in counts}
    if any(c < 0 for c in costs.values()) or common_cost < 0:
        raise InputError("path costs must be >= 0")
    active = sum(counts.values())
    serialized = common_cost + sum(costs.values())
    converged = common_cost + max(costs.values())
    thread_work = common_cost * active + sum(costs[p] * counts[p] for p in counts)
    avg = thread_work / serialized if serialized else float(active)
    return Divergence(
        lanes_per_path={str(p): n for p, n in counts.items()}, serialized_cost=serialized,
        converged_cost=converged, slowdown=serialized / converged if converged else 1.0,
        avg_active_threads_per_instruction=avg, simt_efficiency=avg / WARP_SIZE,
    )


def even_odd(cost_even: float, cost_odd: float, *, common_cost: float = 0.0) -> Divergence:
    """The chapter's example: even lanes run one path, odd lanes another (``if (t % 2)``)."""
    paths = ["even" if t % 2 == 0 else "odd" for t in range(WARP_SIZE)]
    return divergence(paths, {"even": cost_even, "odd": cost_odd}, common_cost=common_cost)
