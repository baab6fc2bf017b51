"""The caching-allocator replay held out on the H200 (2026-12-02 06:30 UTC,
``scripts/h200/allocator_twins.py``): the UNet's base, channels_last and no-empty_cache steps
traced in one session with the allocator's ``[memory]`` events, after the replay's
channels_last rule was written on the suite's recordings (25 -> 34 a step there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiprof.analysis.layout import layout_conversions
from aiprof.diagnose.allocation_replay import allocation_events, replayed, scratch_inside
from aiprof.trace import load_trace

TWINS = Path(__file__).parents[1] / "data" / "diagnose" / "allocator_twins_0630"
UNET = "unet_bn_nchw_empty_cache_train"


def new_segments_per_step(variant: str, without_scratch: bool = False) -> tuple[float, float]:
    """(recorded, replayed) new segments a step of one variant's trace; replayed without the
    converting convolutions' scratch blocks where asked (the model of channels_last)."""
    trace = load_trace(TWINS / f"{UNET}.{variant}.trace.json.gz")
    events = allocation_events(trace)
    assert events is not None
    steps = max(len(trace.steps), 1)
    scratch = None
    if without_scratch:
        ops = trace.gpu_ops.op_row[layout_conversions(trace).rows]
        scratch = scratch_inside(trace, events, ops[ops >= 0])
    return events.num_mallocs / steps, replayed(events, scratch).num_mallocs / steps


def test_the_replay_reproduces_each_variants_own_segments() -> None:
    for variant in ("base", "channels_last", "no_empty_cache"):
        recorded, replay = new_segments_per_step(variant)
        assert replay == recorded, variant
    assert new_segments_per_step("no_empty_cache")[0] == 0


def test_the_base_without_its_conversions_scratch_predicts_the_channels_last_step() -> None:
    """From the NCHW base alone (29 segments a step), the replay without the conversions'
    scratch blocks gives the channels_last step's own count (41), recorded apart."""
    base_recorded, predicted = new_segments_per_step("base", without_scratch=True)
    recorded_nhwc, _ = new_segments_per_step("channels_last")
    assert base_recorded == 29 and recorded_nhwc == 41
    assert predicted == pytest.approx(recorded_nhwc)


def test_the_committed_summary_is_what_the_traces_give() -> None:
    doc = json.loads((TWINS / "allocator_twins.json").read_text())
    (pair,) = [p for p in doc["pairs"] if p["fix"] == "channels_last"]
    assert pair["base"]["without_conversion_scratch_per_step"] == new_segments_per_step(
        "base", without_scratch=True)[1]
