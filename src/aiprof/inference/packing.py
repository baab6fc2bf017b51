"""Sequence packing: first-fit decreasing into rows of a fixed token capacity.

FFD uses at most 11/9·OPT + 6/9 rows (Dósa 2007; cited in ../shared/reference/
serving-and-distributed.md section A5, with Krell et al., arXiv:2107.02027, for packing in NLP).
"""

from __future__ import annotations

import numpy as np


class _MaxTree:
    """Segment tree over row capacities left; finds the first row with room for an item."""

    def __init__(self, num_rows: int, capacity: int) -> None:
        size = 1
        while size < num_rows:
            size *= 2
        self.size = size
        self.tree = [0] * size + [capacity] * num_rows + [0] * (size - num_rows)
        for node in range(size - 1, 0, -1):
            self.tree[node] = max(self.tree[2 * node], self.tree[2 * node + 1])

    def place(self, item: int) -> int:
        """Index of the first row with at least ``item`` left, after taking ``item`` from it."""
        tree = self.tree
        node = 1
        while node < self.size:
            node = 2 * node if tree[2 * node] >= item else 2 * node + 1
        tree[node] -= item
        row = node - self.size
        node //= 2
        while node:
            tree[node] = max(tree[2 * node], tree[2 * node + 1])
            node //= 2
        return row


def first_fit_decreasing(lengths: np.ndarray, capacity: int) -> int:
    """Number of rows of ``capacity`` tokens that FFD packs the sequences into."""
    ordered = np.sort(np.asarray(lengths, dtype=np.int64))[::-1]
    tree = _MaxTree(int(ordered.size), capacity)
    used = 0
    for item in ordered.tolist():
        used = max(used, tree.place(item) + 1)
    return used
