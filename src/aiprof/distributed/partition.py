"""Optimal contiguous split of layers into pipeline stages.

Objective: minimize the slowest stage's time (the pipeline's period), subject to every stage fitting
in GPU memory; among the optimal splits, minimize the largest stage memory. Stage i (0-based) of a
1F1B schedule holds min(p − i, m) micro-batches of activations (Narayanan et al. SC'21; reference
§B4), so the memory a layer costs depends on the stage that gets it. Both passes are exact dynamic
programs over prefixes, O(p·L²) (the bottleneck-partition DP, as in Alpa's inter-op pass).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aiprof.errors import InputError


@dataclass(frozen=True, kw_only=True)
class StageCosts:
    """Per-layer inputs of the partitioner."""

    time_us: Sequence[float]
    """Forward + backward time of each layer for one micro-batch."""
    state_bytes: Sequence[float]
    """Parameters + gradients + optimizer states of each layer."""
    activation_bytes: Sequence[float]
    """Activations each layer keeps for one micro-batch."""


@dataclass(frozen=True, kw_only=True)
class Partition:
    """A split of L layers into p contiguous stages."""

    layers_per_stage: list[int]
    stage_time_us: list[float]
    stage_memory_bytes: list[float]
    max_stage_time_us: float
    max_stage_memory_bytes: float
    balance_pct: float
    """Mean stage time / max stage time × 100: 100 means perfectly balanced."""


def inflight(stage: int, num_stages: int, num_microbatches: int) -> int:
    """Micro-batches of activations stage ``stage`` holds under 1F1B: min(p − i, m)."""
    return min(num_stages - stage, num_microbatches)


class _Prefix:
    def __init__(self, costs: StageCosts, num_stages: int, num_microbatches: int) -> None:
        self.t = np.concatenate([[0.0], np.cumsum(np.asarray(costs.time_us, dtype=float))])
        self.s = np.concatenate([[0.0], np.cumsum(np.asarray(costs.state_bytes, dtype=float))])
        self.a = np.concatenate([[0.0], np.cumsum(np.asarray(costs.activation_bytes, dtype=float))])
        self.p, self.m = num_stages, num_microbatches

    def time(self, i: int, j: int) -> float:
        return float(self.t[j] - self.t[i])

    def memory(self, stage: int, i: int, j: int) -> float:
        held = inflight(stage, self.p, self.m)
        return float(self.s[j] - self.s[i] + held * (self.a[j] - self.a[i]))


def _bottleneck_dp(
    pre: _Prefix, n: int, cost: str, time_cap: float, memory_cap: float
) -> tuple[float, list[int]]:
    """Minimize max over stages of ``cost`` (``time`` or ``memory``) under both caps."""
    p = pre.p
    best = np.full((p + 1, n + 1), math.inf)
    cut = np.zeros((p + 1, n + 1), dtype=int)
    best[0, 0] = 0.0
    for k in range(1, p + 1):
        for j in range(k, n - (p - k) + 1):
            for i in range(k - 1, j):
                if best[k - 1, i] == math.inf:
                    continue
                t, mem = pre.time(i, j), pre.memory(k - 1, i, j)
                if t > time_cap * (1 + 1e-12) or mem > memory_cap:
                    continue
                value = max(best[k - 1, i], t if cost == "time" else mem)
                if value < best[k, j]:
                    best[k, j], cut[k, j] = value, i
    if best[p, n] == math.inf:
        return math.inf, []
    bounds, j = [n], n
    for k in range(p, 0, -1):
        j = int(cut[k, j])
        bounds.append(j)
    return float(best[p, n]), bounds[::-1]


def evaluate(
    costs: StageCosts, layers_per_stage: Sequence[int], num_microbatches: int
) -> Partition:
    """Stage times and memories of a given split."""
    p = len(layers_per_stage)
    pre = _Prefix(costs, p, num_microbatches)
    edges = np.concatenate([[0], np.cumsum(layers_per_stage)]).astype(int)
    times = [pre.time(edges[k], edges[k + 1]) for k in range(p)]
    memories = [pre.memory(k, edges[k], edges[k + 1]) for k in range(p)]
    worst = max(times)
    return Partition(
        layers_per_stage=[int(x) for x in layers_per_stage],
        stage_time_us=times,
        stage_memory_bytes=memories,
        max_stage_time_us=worst,
        max_stage_memory_bytes=max(memories),
        balance_pct=100.0 * (sum(times) / p) / worst if worst > 0 else 100.0,
    )


def partition_layers(
    costs: StageCosts, num_stages: int, num_microbatches: int, memory_cap_bytes: float = math.inf
) -> Partition:
    """The optimal split (see module docstring); raises InputError if no split fits in memory."""
    n = len(costs.time_us)
    if not len(costs.state_bytes) == len(costs.activation_bytes) == n:
        raise InputError("time, state and activation lists must have one entry per layer")
    if num_stages < 1 or num_microbatches < 1:
        raise InputError(
            f"stages and micro-batches must be >= 1, got {num_stages}, {num_microbatches}"
        )
    if n < num_stages:
        raise InputError(f"cannot split {n} layers into {num_stages} non-empty stages")
    if min(*costs.time_us, *costs.state_bytes, *costs.activation_bytes) < 0:
        raise InputError("layer times and sizes cannot be negative")
    pre = _Prefix(costs, num_stages, num_microbatches)
    period, _ = _bottleneck_dp(pre, n, "time", math.inf, memory_cap_bytes)
    if period == math.inf:
        raise InputError(
            f"no split of {n} layers into {num_stages} stages fits in "
            f"{memory_cap_bytes / 1e9:.1f} GB per GPU; add stages or shard states"
        )
    _, bounds = _bottleneck_dp(pre, n, "memory", period, memory_cap_bytes)
    return evaluate(costs, list(np.diff(bounds)), num_microbatches)
