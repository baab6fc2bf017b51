"""What the profiler costs an eager step and its torch.compile'd twin, per recorded event, on
the H200 (``scripts/h200/compiled_profiler_cost.py``, ``tests/data/diagnose/
compiled_profiler_cost/``): the compiled steps' events cost more than the eager steps', and
more than the op nesting estimates in the compiled traces the compile model's host costs were
read from (docs/diagnose.md, "The profiler's cost per event in compiled steps, measured")."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from aiprof.diagnose.profiler_cost import estimated_overhead_us
from aiprof.trace import load_trace

DATA = Path(__file__).parents[1] / "data" / "diagnose"
MEASURED = DATA / "compiled_profiler_cost" / "profiler_cost_0635.json"
COMPILED = {"distilbert_sync_train": "compiled_second", "resnet34_nchw_bf16_train":
            "compiled_second", "bert_small_fp32_train": "compiled",
            "efficientnet_b0_pageable_nchw_train": "compiled_third",
            "gpt2_vocab_bf16_train": "compiled_fifth", "rl_policy_item_sync": "compiled"}
"""The committed compiled trace of each measured workload (the compile model's sources)."""
RECORDED = ("cpu_op", "cuda_runtime", "cuda_driver")


def per_event_us(row: dict, variant: str) -> float:
    """The profiler's cost per recorded CPU-side event: the median over the rounds of (the block
    with CPU ops, CUDA activity and shapes - the unprofiled block of the same round), over the
    events a step of that setting records."""
    rounds = row["rounds_ms"][variant]
    paired = [s - n for s, n in zip(rounds["cpu_cuda_shapes"], rounds["none"], strict=True)]
    events = sum(row["events_per_step"][variant]["cpu_cuda_shapes"].get(k, 0.0)
                 for k in RECORDED)
    return 1000.0 * statistics.median(paired) / events


def rows() -> list[dict]:
    return [r for r in json.loads(MEASURED.read_text())["workloads"] if "error" not in r]


def test_all_six_workloads_were_measured_in_three_interleaved_rounds() -> None:
    measured = rows()
    assert sorted(r["workload"] for r in measured) == sorted(COMPILED)
    for row in measured:
        for variant in ("base", "compile"):
            assert all(len(t) == 3 for t in row["rounds_ms"][variant].values())


def test_a_compiled_steps_events_cost_the_profiler_more_than_an_eager_steps() -> None:
    """GIVEN each workload's eager and compiled steps timed with and without the profiler in
    the same rounds, WHEN the profiler's cost per recorded event is computed for each, THEN
    the compiled step's is the higher on all six (median ratio 1.8: under the profiler
    Inductor records every Triton launch with its arguments)."""
    ratios = [per_event_us(r, "compile") / per_event_us(r, "base") for r in rows()]
    assert all(x > 1.0 for x in ratios), ratios
    assert 1.5 < statistics.median(ratios) < 2.5


@pytest.mark.parametrize("workload", sorted(COMPILED))
def test_the_compiled_traces_nesting_estimate_against_the_measured_cost(workload: str) -> None:
    """GIVEN the compiled trace the compile model read its host costs from, WHEN its op nesting
    estimate of the profiler's cost per event is set beside the cost measured on the H200,
    THEN it is below the measured one on four workloads (1.7-4.2 times: the constants keep
    that much of the profiler) and above it on bert_small and rl_policy (0.76-0.77)."""
    row = next(r for r in rows() if r["workload"] == workload)
    trace = load_trace(DATA / COMPILED[workload] / f"{workload}.compiled.trace.json.gz")
    estimate = estimated_overhead_us(trace)
    assert estimate
    ratio = per_event_us(row, "compile") / estimate
    if workload in ("bert_small_fp32_train", "rl_policy_item_sync"):
        assert 0.7 < ratio < 0.85, ratio
    else:
        assert 1.6 < ratio < 4.5, ratio
