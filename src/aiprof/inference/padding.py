"""Padding waste of variable-length batches: fixed, dynamic, bucketed (exact DP) and packed.

Waste is the share of the *padded* compute that does no useful work, weighted by a cost model:
``waste = 1 - sum(cost(len)) / sum(cost(padded len))``. With the linear (token) cost, lengths
10, 20, ..., 100 padded to 100 waste 450 / 1000 = 45% (the chapter's "55%" is the useful share);
see ../shared/reference/serving-and-distributed.md section A5.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from aiprof.errors import InputError
from aiprof.inference.packing import first_fit_decreasing

CostModel = Literal["linear", "quadratic"]
COST_MODELS: tuple[str, ...] = ("linear", "quadratic")


@dataclass(frozen=True, kw_only=True)
class PaddingOptions:
    """How the lengths are batched and what a padded token costs."""

    batch_size: int = 32
    """Sequences per batch for dynamic (pad-to-batch-maximum) padding."""
    num_buckets: int = 4
    """Number of bucket boundaries K for the optimal bucketing."""
    cost: CostModel = "linear"
    """``linear``: compute proportional to tokens; ``quadratic``: to length squared (attention)."""
    max_length: int | None = None
    """Fixed padding length and packing row capacity; default: the longest sequence."""

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise InputError(f"batch size {self.batch_size} must be at least 1")
        if self.num_buckets < 1:
            raise InputError(f"number of buckets {self.num_buckets} must be at least 1")
        if self.cost not in COST_MODELS:
            raise InputError(f"cost model {self.cost!r} is not one of {', '.join(COST_MODELS)}")


@dataclass(frozen=True, kw_only=True)
class BucketPlan:
    """Optimal bucket boundaries: each sequence is padded to the smallest boundary >= its length."""

    boundaries: tuple[int, ...]
    waste_pct: float


@dataclass(frozen=True, kw_only=True)
class PaddingReport:
    """Waste of each padding strategy for one set of lengths, in percent of padded compute."""

    num_sequences: int
    num_tokens: int
    max_length: int
    cost: str
    batch_size: int
    fixed_waste_pct: float
    dynamic_waste_pct: float
    """Expected waste with batches drawn at random (i.i.d.) from the lengths."""
    sorted_waste_pct: float
    """Waste with the lengths sorted and cut into consecutive batches."""
    buckets: BucketPlan
    packing_rows: int
    packing_waste_pct: float


def cost_of(lengths: np.ndarray, cost: str) -> np.ndarray:
    """Compute cost of sequences of these lengths (tokens, or tokens squared for attention)."""
    values = lengths.astype(np.float64)
    return values * values if cost == "quadratic" else values


def validate_lengths(lengths: Sequence[int] | np.ndarray) -> np.ndarray:
    """Lengths as an int64 array; raises InputError if empty, non-integer or below 1."""
    array = np.asarray(lengths)
    if array.size == 0:
        raise InputError("no lengths given; give one sequence length (a positive integer) per line")
    if not np.issubdtype(array.dtype, np.integer):
        if not np.all(np.isfinite(array)) or not np.all(array == np.round(array)):
            raise InputError("lengths must be whole numbers of tokens")
        array = array.astype(np.int64)
    if array.min() < 1:
        raise InputError(
            f"length {int(array.min())} is not positive; lengths are token counts >= 1"
        )
    return array.astype(np.int64)


def _waste_pct(useful: float, padded: float) -> float:
    return 100.0 * (1.0 - useful / padded) if padded > 0 else 0.0


def fixed_waste_pct(lengths: np.ndarray, max_length: int, cost: str) -> float:
    """Waste when every sequence is padded to ``max_length``."""
    padded = cost_of(np.array([max_length]), cost)[0] * lengths.size
    return _waste_pct(float(cost_of(lengths, cost).sum()), float(padded))


def expected_dynamic_waste_pct(lengths: np.ndarray, batch_size: int, cost: str) -> float:
    """Expected waste of pad-to-batch-maximum with batches of i.i.d. draws from the lengths.

    ``1 - E[cost(len)] / E[cost(max of B draws)]`` with ``P(max <= x) = F(x)^B``
    (order statistics; the formula of reference section A5).
    """
    values, counts = np.unique(lengths, return_counts=True)
    cdf = np.cumsum(counts) / lengths.size
    below = np.concatenate(([0.0], cdf[:-1]))
    pmf_max = cdf**batch_size - below**batch_size
    expected_max_cost = float((pmf_max * cost_of(values, cost)).sum())
    return _waste_pct(float(cost_of(lengths, cost).mean()), expected_max_cost)


def sorted_waste_pct(lengths: np.ndarray, batch_size: int, cost: str) -> float:
    """Waste when sorted lengths are cut into consecutive batches padded to their maximum."""
    ordered = np.sort(lengths)
    starts = np.arange(0, ordered.size, batch_size)
    ends = np.minimum(starts + batch_size, ordered.size)
    batch_max = ordered[ends - 1]
    padded = cost_of(batch_max, cost) * (ends - starts)
    return _waste_pct(float(cost_of(ordered, cost).sum()), float(padded.sum()))


def optimal_buckets(lengths: np.ndarray, num_buckets: int, cost: str = "linear") -> BucketPlan:
    """Bucket boundaries minimizing padded compute, by exact dynamic programming.

    Distinct lengths x_1 < ... < x_m with counts; a bucket covering x_(i+1..j) pads to x_j at cost
    ``c(x_j)·(C_j − C_i) − (S_j − S_i)`` (C, S prefix counts and prefix costs);
    ``dp[k][j] = min_i dp[k−1][i] + cost(i, j)``, O(K·m²) (reference section A5).
    """
    values, counts = np.unique(lengths, return_counts=True)
    m = values.size
    k_max = min(num_buckets, m)
    unit = cost_of(values, cost)
    prefix_count = np.concatenate(([0.0], np.cumsum(counts, dtype=np.float64)))
    prefix_cost = np.concatenate(([0.0], np.cumsum(counts * unit)))
    best = np.full(m + 1, np.inf)
    best[0] = 0.0
    choices = np.zeros((k_max + 1, m + 1), dtype=np.int64)
    for k in range(1, k_max + 1):
        nxt = np.full(m + 1, np.inf)
        for j in range(1, m + 1):
            i = np.arange(j)
            total = (
                best[:j]
                + unit[j - 1] * (prefix_count[j] - prefix_count[i])
                - (prefix_cost[j] - prefix_cost[i])
            )
            arg = int(np.argmin(total))
            nxt[j], choices[k, j] = total[arg], arg
        best = nxt
    boundaries: list[int] = []
    j = m
    for k in range(k_max, 0, -1):
        boundaries.append(int(values[j - 1]))
        j = int(choices[k, j])
        if j == 0:
            break
    padding = float(best[m])
    useful = float(prefix_cost[m])
    waste = _waste_pct(useful, useful + padding)
    return BucketPlan(boundaries=tuple(sorted(boundaries)), waste_pct=waste)


def bucket_waste_pct(lengths: np.ndarray, boundaries: Sequence[int], cost: str) -> float:
    """Waste when each sequence is padded to the smallest boundary >= its length."""
    edges = np.sort(np.asarray(boundaries))
    if edges.size == 0 or edges[-1] < lengths.max():
        raise InputError("the largest bucket boundary must cover the longest sequence")
    padded_to = edges[np.searchsorted(edges, lengths, side="left")]
    return _waste_pct(float(cost_of(lengths, cost).sum()), float(cost_of(padded_to, cost).sum()))


def analyze_padding(lengths: Sequence[int] | np.ndarray, options: PaddingOptions) -> PaddingReport:
    """Waste of fixed, dynamic (random and sorted), optimally bucketed and packed batching."""
    array = validate_lengths(lengths)
    longest = int(array.max())
    capacity = longest if options.max_length is None else options.max_length
    if capacity < longest:
        raise InputError(f"max length {capacity} is shorter than the longest sequence ({longest})")
    rows = first_fit_decreasing(array, capacity)
    packed_padded = float(cost_of(np.array([capacity]), options.cost)[0]) * rows
    return PaddingReport(
        num_sequences=int(array.size),
        num_tokens=int(array.sum()),
        max_length=capacity,
        cost=options.cost,
        batch_size=options.batch_size,
        fixed_waste_pct=fixed_waste_pct(array, capacity, options.cost),
        dynamic_waste_pct=expected_dynamic_waste_pct(array, options.batch_size, options.cost),
        sorted_waste_pct=sorted_waste_pct(array, options.batch_size, options.cost),
        buckets=optimal_buckets(array, options.num_buckets, options.cost),
        packing_rows=rows,
        packing_waste_pct=_waste_pct(float(cost_of(array, options.cost).sum()), packed_padded),
    )


def read_lengths(path: str) -> np.ndarray:
    """Sequence lengths from a text file: integers separated by newlines, spaces or commas;
    ``#`` starts a comment."""
    try:
        with open(path) as handle:
            lines = handle.readlines()
    except OSError as error:
        raise InputError(f"cannot read lengths file {path}: {error.strerror}") from error
    values: list[int] = []
    for number, line in enumerate(lines, start=1):
        for token in line.split("#", 1)[0].replace(",", " ").split():
            try:
                values.append(int(token))
            except ValueError:
                raise InputError(
                    f"{path}, line {number}: {token!r} is not a whole number of tokens"
                ) from None
    if not values:
        raise InputError(f"lengths file {path} is empty; write one sequence length per line")
    return validate_lengths(values)
