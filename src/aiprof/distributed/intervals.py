"""Sets of time intervals as sorted, disjoint (start, end) arrays; vectorized union and overlap."""

from __future__ import annotations

import numpy as np


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge possibly overlapping intervals into sorted disjoint ones."""
    if len(starts) == 0:
        return np.empty(0), np.empty(0)
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts, dtype=float)[order], np.asarray(ends, dtype=float)[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    return s[new], np.maximum.reduceat(e, np.flatnonzero(new))


def total(starts: np.ndarray, ends: np.ndarray) -> float:
    """Length of the union of the intervals."""
    s, e = union(starts, ends)
    return float(np.sum(e - s))


def intersection(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Intersection of two disjoint sorted interval sets (each from ``union``)."""
    (a_s, a_e), (b_s, b_e) = a, b
    if len(a_s) == 0 or len(b_s) == 0:
        return np.empty(0), np.empty(0)
    # For each interval of a, the b intervals that may touch it form a contiguous range.
    first = np.searchsorted(b_e, a_s, side="right")
    last = np.searchsorted(b_s, a_e, side="left")
    counts = np.maximum(last - first, 0)
    a_idx = np.repeat(np.arange(len(a_s)), counts)
    offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    b_idx = np.repeat(first, counts) + offsets
    s = np.maximum(a_s[a_idx], b_s[b_idx])
    e = np.minimum(a_e[a_idx], b_e[b_idx])
    keep = e > s
    return s[keep], e[keep]


def clip(
    spans: tuple[np.ndarray, np.ndarray], lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray]:
    """The part of the interval set inside [lo, hi]."""
    s, e = np.maximum(spans[0], lo), np.minimum(spans[1], hi)
    keep = e > s
    return s[keep], e[keep]


def length(spans: tuple[np.ndarray, np.ndarray]) -> float:
    """Total length of a disjoint interval set."""
    return float(np.sum(spans[1] - spans[0]))
