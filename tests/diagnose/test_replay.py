"""The replay model against hand computations and its invariants."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from aiprof.analysis import intervals as iv
from aiprof.diagnose.replay import LAUNCH, SYNC, Change, Timeline, covered_between, replay


def timeline(launch: list[float], dur: list[float], syncs: list[tuple[float, float]] = (),
             latency: float = 0.0, gap: float = 0.0, end: float | None = None) -> Timeline:
    n, m = len(launch), len(syncs)
    starts = np.array(launch + [s for s, _ in syncs], float)
    order = np.argsort(starts, kind="stable")
    ends = np.array([t + 1.0 for t in launch] + [e for _, e in syncs], float)
    kinds = np.array([LAUNCH] * n + [SYNC] * m)[order]
    ptr, idx, last = [0], [], -1  # a sync waits for the last op launched before it
    for k, kind in enumerate(kinds.tolist()):
        if kind == SYNC and last >= 0:
            idx.append(last)
        last = k if kind == LAUNCH else last
        ptr.append(len(idx))
    return Timeline(
        kind=kinds, cpu_start_us=starts[order],
        cpu_end_us=ends[order], gpu_row=np.array(list(range(n)) + [-1] * m)[order],
        stream=np.array([0] * n + [-1] * m)[order],
        gpu_dur_us=np.array(dur + [0.0] * m, float)[order],
        after=np.full(n + m, -1), delay_us=np.zeros(n + m), own_us=np.zeros(n + m),
        wait_ptr=np.array(ptr), wait_idx=np.array(idx, dtype=np.int64),
        sync_id=np.array(list(range(n)) + list(range(100, 100 + m)))[order],
        start_us=0.0, end_us=end if end is not None else max(ends.max(), 0.0),
        cpu_stop_us=end if end is not None else max(ends.max(), 0.0),
        latency_us=latency, gap_us=np.full(n + m, gap), num_streams=1, measured_us=0.0,
    )


def test_gpu_bound_queue_is_sum_of_durations() -> None:
    # GIVEN launches at 0, 1, 2 (each call 1 µs) of 10 µs kernels, no latency
    tl = timeline([0.0, 1.0, 2.0], [10.0, 10.0, 10.0])
    # THEN the first starts when its call returns (1) and the queue runs back to back
    assert replay(tl) == 31.0


def test_launch_bound_step_follows_the_cpu() -> None:
    # kernels of 1 µs launched every 10 µs (calls of 1 µs), latency 2 after the call returns:
    # the last is submitted at 21, starts at 23, ends at 24
    tl = timeline([0.0, 10.0, 20.0], [1.0, 1.0, 1.0], latency=2.0)
    assert replay(tl) == 24.0
    # CUDA graphs: CPU work between launches gone -> launches at 0, 1, 2 (call time kept)
    assert replay(tl, Change(launch_work_scale=0.0)) < 24.0


def test_dropping_a_sync_lets_the_cpu_run_ahead() -> None:
    # kernel 0 (50 µs) launched at 0 (runs 1..51); sync from 1 to 52; kernel 1 launched at 60
    tl = timeline([0.0, 60.0], [50.0, 50.0], syncs=[(1.0, 52.0)])
    base = replay(tl)
    assert base == 110.0  # CPU released at 51, 8 µs of work (52..60), call to 61, then 50
    # without the sync the 8 µs of work follow the first call's end (1): queued behind kernel 0
    assert replay(tl, Change(unblocked=frozenset({100}))) == 101.0


def test_removed_cpu_time_shifts_later_launches() -> None:
    tl = timeline([0.0, 100.0], [5.0, 5.0])
    removed = iv.union(np.array([10.0]), np.array([60.0]))
    assert replay(tl) == 106.0
    assert replay(tl, Change(removed_cpu=removed)) == 56.0


def test_removed_cpu_time_inside_a_launch_call_is_gone_too() -> None:
    # the second launch call (100..101) lies inside a removed span: it costs nothing
    tl = timeline([0.0, 100.0], [5.0, 5.0])
    removed = iv.union(np.array([50.0]), np.array([101.0]))
    assert replay(tl, Change(removed_cpu=removed)) == 55.0


def test_profiler_cost_comes_out_of_work_gaps_and_calls() -> None:
    # launches at 0 and 100 (1 µs calls); four recorded CPU events between them
    tl = replace(timeline([0.0, 100.0], [5.0, 5.0]),
                 recorded_starts_us=np.array([10.0, 20.0, 30.0, 40.0]))
    assert replay(tl) == 106.0
    # 2 µs per event: 8 µs out of the 99 µs gap, and each 1 µs call becomes free: the second
    # kernel is submitted at 91 and ends at 96
    assert replay(replace(tl, profiler_overhead_us=2.0)) == 96.0


def test_covered_between_matches_brute_force() -> None:
    spans = iv.union(np.array([0.0, 5.0, 20.0]), np.array([2.0, 8.0, 30.0]))
    lo, hi = np.array([1.0, 0.0, 9.0, 25.0]), np.array([6.0, 40.0, 21.0, 26.0])
    expected = [iv.length(iv.intersect(spans, (np.array([a]), np.array([b]))))
                for a, b in zip(lo, hi, strict=True)]
    assert np.allclose(covered_between(spans, lo, hi), expected)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0.1, 50)), min_size=1, max_size=30),
       st.floats(0, 1))
def test_shorter_kernels_or_less_cpu_never_lengthen_the_step(ops, scale) -> None:
    launch = sorted(t for t, _ in ops)
    dur = [d for _, d in ops]
    tl = timeline(launch, dur, latency=1.0, gap=0.5)
    base = replay(tl)
    assert base >= max(sum(dur), 0.0) - 1e-9  # one stream: at least the sum of durations
    faster = Change(gpu_dur_us={i: d * scale for i, d in enumerate(dur)})
    assert replay(tl, faster) <= base + 1e-9
    assert replay(tl, Change(launch_work_scale=scale)) <= base + 1e-9
