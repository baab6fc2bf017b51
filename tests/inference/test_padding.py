"""Padding waste: the chapter's example, DP buckets against brute force, packing, dynamic."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiprof.errors import InputError
from aiprof.inference.packing import first_fit_decreasing
from aiprof.inference.padding import (
    PaddingOptions,
    analyze_padding,
    bucket_waste_pct,
    expected_dynamic_waste_pct,
    optimal_buckets,
    sorted_waste_pct,
)

CHAPTER = list(range(10, 101, 10))


def test_chapter_example_fixed_padding_wastes_45_pct_not_55():
    # GIVEN lengths 10..100 padded to 100: 550 useful tokens of 1000 computed
    report = analyze_padding(CHAPTER, PaddingOptions(batch_size=2, num_buckets=3))
    assert report.fixed_waste_pct == pytest.approx(100 * 450 / 1000)
    quadratic = analyze_padding(CHAPTER, PaddingOptions(cost="quadratic"))
    useful = sum(x * x for x in CHAPTER)
    assert quadratic.fixed_waste_pct == pytest.approx(100 * (1 - useful / (10 * 100**2)))


@pytest.mark.parametrize(
    ("k", "boundaries", "waste_pct"),
    # table of ../shared/reference/serving-and-distributed.md section A5
    [(1, (100,), 45.0), (2, (50, 100), 26.7), (3, (30, 60, 100), 17.9),
     (4, (20, 40, 70, 100), 12.7), (5, (20, 40, 60, 80, 100), 8.3)],
)
def test_chapter_buckets_match_reference_table(k, boundaries, waste_pct):
    plan = optimal_buckets(np.array(CHAPTER), k)
    assert plan.boundaries == boundaries
    assert plan.waste_pct == pytest.approx(waste_pct, abs=0.05)


def _brute_force(lengths: list[int], k: int, cost: str) -> float:
    values = sorted(set(lengths))
    longest = values[-1]
    best = math.inf
    for r in range(0, min(k - 1, len(values) - 1) + 1):
        for inner in itertools.combinations(values[:-1], r):
            best = min(best, bucket_waste_pct(np.array(lengths), [*inner, longest], cost))
    return best


@settings(max_examples=150, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 60), min_size=1, max_size=14),
    k=st.integers(1, 4),
    cost=st.sampled_from(["linear", "quadratic"]),
)
def test_dp_buckets_match_brute_force(lengths, k, cost):
    plan = optimal_buckets(np.array(lengths), k, cost)
    assert plan.waste_pct == pytest.approx(_brute_force(lengths, k, cost), abs=1e-9)
    # the plan's own boundaries reproduce its waste, and there are at most k of them
    assert len(plan.boundaries) <= k
    assert bucket_waste_pct(np.array(lengths), plan.boundaries, cost) == pytest.approx(
        plan.waste_pct, abs=1e-9
    )


def _naive_ffd(lengths: list[int], capacity: int) -> int:
    rows: list[int] = []
    for item in sorted(lengths, reverse=True):
        for index, room in enumerate(rows):
            if room >= item:
                rows[index] -= item
                break
        else:
            rows.append(capacity - item)
    return len(rows)


@settings(max_examples=150, deadline=None)
@given(lengths=st.lists(st.integers(1, 100), min_size=1, max_size=60))
def test_packing_matches_naive_first_fit_decreasing(lengths):
    rows = first_fit_decreasing(np.array(lengths), 100)
    assert rows == _naive_ffd(lengths, 100)
    assert rows >= math.ceil(sum(lengths) / 100)


def test_chapter_packing_six_rows():
    report = analyze_padding(CHAPTER, PaddingOptions())
    assert report.packing_rows == 6
    assert report.packing_waste_pct == pytest.approx(100 * (1 - 550 / 600))


def test_expected_dynamic_waste_agrees_with_monte_carlo():
    rng = np.random.default_rng(7)
    lengths = rng.integers(5, 300, 400)
    batch = 8
    draws = rng.choice(lengths, size=(100_000, batch))
    simulated = 100 * (1 - draws.mean() / draws.max(axis=1).mean())
    assert expected_dynamic_waste_pct(lengths, batch, "linear") == pytest.approx(simulated, abs=0.3)


@pytest.mark.parametrize(
    ("batch", "waste"), [(2, 23.1), (4, 35.0), (8, 41.0), (16, 43.8), (32, 44.8)]
)
def test_dynamic_waste_reference_table(batch, waste):
    expected = expected_dynamic_waste_pct(np.array(CHAPTER), batch, "linear")
    assert expected == pytest.approx(waste, abs=0.05)


def test_sorted_pairs_waste():
    # sorted pairs (10,20), (30,40), ... pad to 20, 40, ..., 100: 600 tokens for 550 useful
    assert sorted_waste_pct(np.array(CHAPTER), 2, "linear") == pytest.approx(100 * 50 / 600)


@pytest.mark.parametrize("bad", [[], [3, -1, 4], [0], [1.5, 2]])
def test_bad_lengths_raise_input_error(bad):
    with pytest.raises(InputError):
        analyze_padding(bad, PaddingOptions())


def test_max_length_shorter_than_longest_is_an_input_error():
    with pytest.raises(InputError, match="shorter"):
        analyze_padding([10, 200], PaddingOptions(max_length=100))
