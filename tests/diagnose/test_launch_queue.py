"""GIVEN H200 records of large steps the GPU paces (``tests/data/diagnose/counterfactual_large``,
2026-12-03) WHEN the replay reads the launch queue off them and changes the backlog with its
twins THEN the queue's depth is what the blocked launch calls show, the backlog's ops pair with
the last step's, and the kernel-level fixes replay near what they measured; on steps the host
paces, the queue never fills and nothing changes."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.launch_queue import MIN_IN_FLIGHT, launch_queue
from aiprof.diagnose.replay import Change, simulate
from aiprof.diagnose.rules import tensor_cores_unused
from aiprof.diagnose.timeline import backlog_twins
from aiprof.evaluation import load_suite
from aiprof.evaluation.score import GAIN_TOLERANCE
from aiprof.record.targets import load_traces

DATA = Path(__file__).parents[1] / "data" / "diagnose"
LARGE = DATA / "counterfactual_large"


@cache
def context(name: str, folder: Path = LARGE) -> Context:
    return Context(next(iter(load_traces(folder / f"{name}.aiprof"))), DiagnoseOptions())


@cache
def measured_pct(name: str, category: str) -> float:
    """The best measured fix of ``category`` for workload ``name`` (the score's truth)."""
    workload = next(w for w in load_suite(LARGE) if w.name == name)
    return max(f.gain_pct for f in workload.fixes
               if f.category == category and f.gain_pct is not None)


@pytest.mark.parametrize("name", ["roberta_fp32_train", "vit_wide_fp32_train"])
def test_a_full_queue_is_read_off_the_blocked_launch_calls(name: str) -> None:
    timeline = context(name).timeline
    # the calls that waited returned with 556-1021 ops in flight; the queue holds ~1024
    assert 900 <= timeline.queue_depth <= 1024
    assert timeline.queue_waited.sum() >= 100
    calls = timeline.cpu_end_us - timeline.cpu_start_us
    assert np.median(calls[timeline.queue_waited]) > 50 * timeline.launch_call_us


@pytest.mark.parametrize("name", ["llama_tiny_b2_infer", "mobilenet_v3_small_b8_infer"])
def test_a_step_the_host_paces_never_fills_the_queue(name: str) -> None:
    timeline = context(name, DATA / "counterfactual_seventh").timeline
    assert timeline.queue_depth == 0 and not timeline.queue_waited.any()


def test_a_long_call_with_few_ops_in_flight_did_not_wait_for_a_slot() -> None:
    # ops launched 1 µs apart, each running 2 µs: one op in flight at most; four long calls
    n = 12
    start = np.arange(n, dtype=np.float64)
    end = start + 0.2
    end[[3, 5, 7, 9]] += 500.0  # a lazy load, not a full queue: nothing queued behind them
    gpu_end = start + 2.0
    queue = launch_queue(np.ones(n, dtype=bool), start, end, gpu_end, long_call_us=10.0)
    assert queue.depth == 0 and not queue.waited.any()
    # the same calls returning with MIN_IN_FLIGHT ops launched before them and none ended
    many = MIN_IN_FLIGHT + n
    start = np.arange(many, dtype=np.float64)
    end = start + 0.2
    late = np.arange(MIN_IN_FLIGHT, many, 3)
    end[late] += 500.0
    queue = launch_queue(np.ones(many, dtype=bool), start, end, np.full(many, 1e9), 10.0)
    assert queue.waited[late].all() and queue.depth >= MIN_IN_FLIGHT


def test_the_backlog_pairs_with_the_last_steps_ops() -> None:
    ctx = context("llama_wide_fp32_train")
    timeline, gpu = ctx.timeline, ctx.trace.gpu_ops
    twin = timeline.backlog_twin
    assert timeline.num_queued > 500 and (twin[:timeline.num_queued] >= 0).all()
    assert (twin[timeline.num_queued:] == -1).all()
    back = timeline.gpu_row[:timeline.num_queued]
    assert (gpu.name_id[back] == gpu.name_id[timeline.gpu_row[twin[:timeline.num_queued]]]).all()
    # a kernel that differs from its place in the last step gets no twin
    names = np.array([1, 2, 3, 1, 9, 3])
    paired = backlog_twins(names, np.zeros(6, dtype=np.int64), np.arange(6.0), 3)
    assert paired.tolist() == [3, -1, 5, -1, -1, -1]


@pytest.mark.parametrize(("name", "without"), [
    ("roberta_fp32_train", 40.0), ("vit_wide_fp32_train", 60.0),
    ("llama_wide_fp32_train", 50.0)])
def test_kernel_level_fixes_replay_near_their_measured_gain(name: str, without: float) -> None:
    """Issue 15's third failure class: FP32 steps the GPU paces, whose TF32 and bf16 fixes
    measured 73-83%; without the queue and the backlog's twins their estimates were 34-54%
    (the blocked launch calls and the unchanged backlog replayed as the host's own time)."""
    ctx = context(name)
    change = tensor_cores_unused.change(ctx)
    assert change is not None
    truth = measured_pct(name, "tensor_cores_unused")
    assert abs(ctx.gain_pct(change) - truth) <= GAIN_TOLERANCE * truth
    plain = replace(ctx.timeline, queue_depth=0, backlog_twin=np.zeros(0, dtype=np.int64))
    base, fixed = simulate(plain).step_us, simulate(plain, change).step_us
    assert 100.0 * (1.0 - fixed / base) < without


def test_the_backlog_changes_with_its_twins_and_keeps_the_unchanged_step() -> None:
    ctx = context("gpt2_eager_long_bf16_train")
    timeline = ctx.timeline
    plain = replace(timeline, backlog_twin=np.zeros(0, dtype=np.int64))
    assert simulate(timeline).step_us == simulate(plain).step_us
    assert simulate(timeline, Change()).step_us == simulate(plain, Change()).step_us
