"""The caching allocator's replay (``diagnose/caching_allocator.py``, ``allocation_replay.py``)
and what it does to ``layout_conversion`` under ``empty_cache()`` (``segment_change.py``):
hand-built sequences for the allocator's rules, the suite's H200 recordings for the replay."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.kineto_synth import TraceBuilder

from aiprof.diagnose import DiagnoseOptions
from aiprof.diagnose.allocation_replay import (
    AllocationEvents,
    allocation_events,
    next_launches,
    replayed,
    scratch_inside,
)
from aiprof.diagnose.caching_allocator import (
    PinnedRange,
    replay_segments,
    round_size,
    segment_size,
)
from aiprof.diagnose.context import Context
from aiprof.diagnose.rules import allocator_churn, layout_conversion
from aiprof.diagnose.segment_change import without_scratch
from aiprof.record.targets import load_traces

SUITE = Path(__file__).parents[1] / "data" / "diagnose" / "counterfactual"
MiB = 1 << 20


def _replay(sizes: list[int], release_at: tuple[int, ...] = (),
            pinned: tuple[PinnedRange, ...] = ()) -> list[int]:
    """New segments' sizes of a sequence; a free is ``-k``: the block of the k-th event."""
    size, ids = [], []
    for i, s in enumerate(sizes):
        size.append(s if s > 0 else -1)
        ids.append(i if s > 0 else -s)
    release = np.isin(np.arange(len(sizes)), release_at)
    out = replay_segments(np.array(size), np.array(ids), release, list(pinned))
    return [int(b) for b in out.segment_bytes if b]


def test_sizes_follow_pytorch_rounding() -> None:
    assert [round_size(n) for n in (1, 512, 513)] == [512, 512, 1024]
    assert segment_size(MiB) == 2 * MiB  # the small pool's 2 MiB segments
    assert segment_size(MiB + 512) == 20 * MiB  # 1-10 MiB: a 20 MiB segment
    assert segment_size(10 * MiB) == 10 * MiB
    assert segment_size(11 * MiB) == 12 * MiB  # rounded to 2 MiB


def test_freed_blocks_are_reused_best_fit_and_merged() -> None:
    # two 12 MiB blocks freed next to each other in one 24 MiB segment serve a 24 MiB request
    assert _replay([24 * MiB, -0, 12 * MiB, 12 * MiB, -2, -3, 24 * MiB]) == [24 * MiB]
    # the smallest free block that fits is taken: 12 MiB goes to the 12 MiB block, so the
    # 16 MiB one still serves 16 MiB (the larger block first would need a third segment)
    sizes = [16 * MiB, 12 * MiB, -0, -1, 12 * MiB, 16 * MiB]
    assert _replay(sizes) == [16 * MiB, 12 * MiB]
    # a large block is split only when more than 1 MiB remains
    assert _replay([12 * MiB, -0, 21 * MiB // 2, 3 * MiB // 2]) == [12 * MiB]
    assert _replay([12 * MiB, -0, 11 * MiB, MiB + 512]) == [12 * MiB, 20 * MiB]
    # small requests never take large blocks: a 2 MiB segment of their own
    assert _replay([12 * MiB, -0, MiB // 2]) == [12 * MiB, 2 * MiB]


def test_empty_cache_releases_only_free_segments() -> None:
    sizes = [12 * MiB, 14 * MiB, -1, 14 * MiB]
    assert _replay(sizes) == [12 * MiB, 14 * MiB]  # the freed block is reused
    assert _replay(sizes, release_at=(3,)) == [12 * MiB, 14 * MiB, 14 * MiB]  # it was given back
    held = PinnedRange(base=1 << 40, size_bytes=14 * MiB, small=False)
    assert _replay([14 * MiB, -0, 14 * MiB], release_at=(2,), pinned=(held,)) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 64 * MiB), min_size=1, max_size=40))
def test_segments_hold_every_live_block(sizes: list[int]) -> None:
    """Allocations alone: the segments made are at least the rounded requests, and each new
    segment is one ``segment_size`` of some request."""
    made = _replay(sizes)
    assert sum(made) >= sum(round_size(s) for s in sizes)
    assert set(made) <= {segment_size(round_size(s)) for s in sizes}


@cache
def _context(name: str) -> Context:
    trace = load_traces(SUITE / f"{name}.aiprof")[0]
    return Context(trace, DiagnoseOptions())


def _events(name: str) -> AllocationEvents:
    events = allocation_events(_context(name).trace)
    assert events is not None
    return events


@pytest.mark.parametrize("name", ["unet_bn_nchw_empty_cache_train",
                                  "llama_fp32_empty_cache_train"])
def test_replay_makes_the_traces_own_segments(name: str) -> None:
    """GIVEN an H200 step that calls empty_cache() (25 cudaMalloc a step) WHEN its [memory]
    events are replayed from the cache the trace implies THEN every allocation that made a new
    segment in the trace makes one in the replay, and no other; without empty_cache() the
    second step makes none."""
    events = _events(name)
    replay = replayed(events)
    assert events.num_mallocs == 50
    np.testing.assert_array_equal(replay.new_segment, events.new_segment_bytes > 0)
    np.testing.assert_array_equal(replay.segment_bytes, events.new_segment_bytes)
    kept = replayed(events, releases=False)
    second = _context(name).trace.steps.cpu_start_us[1]
    at = _context(name).trace.memory.ts_us[events.rows]
    assert kept.new_segment[at >= second].sum() == 0


def test_channels_last_needs_segments_for_batch_norm_outputs() -> None:
    """Without the converting convolutions' scratch blocks (cuDNN's NHWC staging) the UNet's
    step makes more segments, most of them for NativeBatchNorm outputs, which reused the freed
    scratch (the channels_last twin of fix_twins_0103 made 41 a step against its base's 29)."""
    ctx = _context("unet_bn_nchw_empty_cache_train")
    events = _events("unet_bn_nchw_empty_cache_train")
    ops = ctx.trace.gpu_ops.op_row[ctx.layout.rows]
    scratch = scratch_inside(ctx.trace, events, ops[ops >= 0])
    base, after = replayed(events), replayed(events, scratch)
    assert after.num_mallocs > base.num_mallocs
    added = np.flatnonzero(after.new_segment & ~base.new_segment)
    launches = next_launches(ctx.trace, events, added)
    kernels = [ctx.trace.name(int(ctx.trace.gpu_ops.name_id[r])) for r in launches if r >= 0]
    assert sum("batch_norm" in k for k in kernels) > len(kernels) / 3


def test_layout_change_adds_the_allocator_calls() -> None:
    ctx = _context("unet_bn_nchw_empty_cache_train")
    ops = ctx.trace.gpu_ops.op_row[ctx.layout.rows]
    shift = without_scratch(ctx, ops[ops >= 0])
    assert shift is not None and shift.mallocs_per_step == 25
    assert shift.mallocs_per_step_after > shift.mallocs_per_step
    change = layout_conversion.change(ctx)
    assert change is not None and change.added_cpu_us == shift.added_cpu_us
    without = type(change)(gpu_dur_us=change.gpu_dur_us)
    assert ctx.gain_pct(change) < ctx.gain_pct(without)


def test_no_allocator_change_without_churn() -> None:
    """A step that never calls cudaMalloc keeps its conversions' model as it was."""
    ctx = _context("resnet34_nchw_bf16_train")
    ops = ctx.trace.gpu_ops.op_row[ctx.layout.rows]
    assert without_scratch(ctx, ops[ops >= 0]) is None


@pytest.mark.parametrize("name", ["unet_bn_nchw_empty_cache_train",
                                  "llama_fp32_empty_cache_train"])
def test_allocator_churn_says_what_the_replay_keeps_without_empty_cache(name: str) -> None:
    """The churn of these steps is the emptied cache: replayed without it, the steady step
    makes no new segment, which is what allocator_churn's model removes."""
    evidence = allocator_churn.replayed_mallocs(_context(name))
    assert evidence == {"replayed_mallocs_per_step": 25.0,
                        "mallocs_per_step_without_empty_cache": 0.0}


def _memory(builder: TraceBuilder, ts: float, size: int, addr: int, reserved: int) -> None:
    builder.events.append({
        "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
        "tid": 1, "ts": ts, "args": {"Total Reserved": reserved, "Total Allocated": 0,
                                     "Bytes": size, "Device Id": 0, "Device Type": 1,
                                     "Addr": addr}})


def _scratch_then_batch_norms(path: Path) -> Path:
    """Two steps that empty the cache: a converting convolution allocates (cudaMalloc) and
    frees a 32 MiB scratch block, then two BatchNorm outputs of 16 MiB reuse its segment."""
    b = TraceBuilder()
    base = 0x7F0000000000
    for step, t in enumerate((0.0, 1000.0)):
        b.step(step, t, 400.0)
        conv = b.cpu_op("aten::cudnn_convolution", t, 100.0)
        b.kernel("void cudnn::engines_precompiled::nchwToNhwcKernel<float>", t + 2, t + 20, 30.0,
                 external=conv)
        b.runtime("cudaStreamIsCapturing", t + 10, 1.0)
        b.runtime("cudaMalloc", t + 11, 80.0)
        _memory(b, t + 92, 32 * MiB, base, 32 * MiB)
        _memory(b, t + 98, -32 * MiB, base, 32 * MiB)
        for i in range(2):
            bn = b.cpu_op("aten::native_batch_norm", t + 120 + 40 * i, 30.0)
            _memory(b, t + 122 + 40 * i, 16 * MiB, base + 16 * MiB * i, 32 * MiB)
            b.kernel("batch_norm_collect_statistics_kernel", t + 130 + 40 * i, t + 140 + 40 * i,
                     10.0, external=bn)
        for i in range(2):
            _memory(b, t + 210 + i, -16 * MiB, base + 16 * MiB * i, 32 * MiB)
        b.runtime("cudaFree", t + 300, 50.0)  # empty_cache(): the next event sees 32 MiB again
    return b.write(path)


def test_scratch_gone_the_batch_norm_outputs_need_segments(tmp_path: Path) -> None:
    """GIVEN a step whose two BatchNorm outputs reuse a converting convolution's freed scratch
    WHEN the scratch is gone (channels_last) THEN each output needs a segment of its own, and
    layout_conversion charges each one's launch the trace's malloc and check, and each step's
    first launch the free."""
    ctx = Context(load_traces(_scratch_then_batch_norms(tmp_path / "t.json.gz"))[0],
                  DiagnoseOptions())
    events = allocation_events(ctx.trace)
    assert events is not None
    assert events.num_mallocs == 2  # the release and the malloc between two events, seen
    assert events.release_before.sum() == 1
    ops = ctx.trace.gpu_ops.op_row[ctx.layout.rows]
    shift = without_scratch(ctx, ops[ops >= 0])
    assert shift is not None
    assert (shift.mallocs_per_step, shift.mallocs_per_step_after) == (1.0, 2.0)
    assert shift.segment_cost_us == pytest.approx(80.0 + 1.0 + 50.0)
    charged: dict[str, list[float]] = {}
    for row, us in shift.added_cpu_us.items():
        charged.setdefault(ctx.trace.name(int(ctx.trace.gpu_ops.name_id[row]))[:10], []).append(us)
    # each BatchNorm launch: a malloc and its capture check (no shapes: no slow path); each
    # step's first launch: the one more cudaFree the previous step's empty_cache() makes
    assert charged == {"batch_norm": [81.0] * 4, "void cudnn": [50.0] * 2}
