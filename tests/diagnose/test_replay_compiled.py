"""GIVEN the replay's compiled event loop (``diagnose/_replay.c``) and its Python loop WHEN both
replay the same timelines under the same changes THEN every result is the same bit for bit;
and the compiled loop refuses what it cannot read (wrong types, indices out of range) with a
Python exception, never a crash."""

from __future__ import annotations

import shutil
import sysconfig
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import EXAMPLES

from aiprof import load_trace
from aiprof.diagnose import replay
from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.engine import diagnose_trace
from aiprof.diagnose.replay import BLOCKING_LAUNCH, LAUNCH, SYNC, Change, Replayed, Timeline
from aiprof.diagnose.verdict import all_fixes

TRACES = [
    EXAMPLES / "h200_gpt2_bf16.json.gz",
    EXAMPLES / "critical_path" / "event_sync_trace.json.gz",
    EXAMPLES / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz",
]

needs_helper = pytest.mark.skipif(replay._replay is None, reason="C helper not built")


def _bits(result: Replayed) -> tuple[object, ...]:
    return (result.step_us.hex(), tuple(w.hex() for w in result.host_wait_us), result.num_ops,
            result.num_drained, result.sync_wait_us.hex(), tuple(b.hex() for b in result.busy_us))


def _both(timeline: Timeline, change: Change | None) -> tuple[Replayed, Replayed]:
    compiled = replay.simulate(timeline, change)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(replay, "_replay", None)
        python = replay.simulate(timeline, change)
    return compiled, python


def test_helper_is_built_where_a_compiler_exists() -> None:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip("no C compiler: the install falls back to the Python loop")
    assert replay._replay is not None


@needs_helper
@pytest.mark.parametrize("path", TRACES, ids=lambda p: Path(p).name.split(".")[0])
def test_compiled_loop_is_the_python_loop_bit_for_bit(path: Path) -> None:
    trace = load_trace(path)
    found, ctx = diagnose_trace(trace, DiagnoseOptions())
    assert isinstance(ctx, Context)
    changes: list[Change | None] = [None, Change()]
    changes += [f.change for f in found if f.change is not None]
    if len(changes) > 3:
        changes.append(all_fixes([c for c in changes[2:] if c is not None]))
    syncs = ctx.timeline.sync_id[ctx.timeline.kind != LAUNCH]
    changes.append(Change(unblocked=frozenset(syncs[::2].tolist()), launch_work_scale=0.0,
                          queued_gap_us=0.5))
    for change in changes:
        compiled, python = _both(ctx.timeline, change)
        assert _bits(compiled) == _bits(python), change


def _timeline(kind: list[int], stream: list[int], dur: list[float], after: list[int],
              waits: list[list[int]]) -> Timeline:
    """A hand-made timeline: one event per CPU microsecond, calls of 0.25 µs."""
    n = len(kind)
    starts = np.arange(n, dtype=np.float64) * 1.0
    ptr = np.concatenate([[0], np.cumsum([len(w) for w in waits])]).astype(np.int32)
    return Timeline(
        kind=np.array(kind, np.int8), cpu_start_us=starts, cpu_end_us=starts + 0.25,
        gpu_row=np.where(np.array(kind) == SYNC, -1, np.arange(n)),
        stream=np.array(stream, np.int16), gpu_dur_us=np.array(dur), after=np.array(after),
        delay_us=np.full(n, 0.125), wait_ptr=ptr,
        wait_idx=np.array([j for w in waits for j in w], np.int64),
        own_us=np.full(n, 0.0625), sync_id=np.arange(n, dtype=np.int64) + 100,
        start_us=0.0, end_us=float(n), cpu_stop_us=float(n) + 2.0, latency_us=3.0,
        gap_us=np.broadcast_to(0.5, n), num_streams=2, measured_us=float(n) + 2.0,
        launch_call_us=0.2,
    )


@needs_helper
def test_every_branch_of_the_loop_agrees() -> None:
    # launches on two streams, a wait across streams, a removed op that still waits, a
    # blocking copy, syncs with and without ops to wait for; durations equal to the maximum
    timeline = _timeline(
        kind=[LAUNCH, LAUNCH, LAUNCH, SYNC, BLOCKING_LAUNCH, LAUNCH, SYNC, LAUNCH],
        stream=[0, 1, 0, -1, 1, 0, -1, 1],
        dur=[40.0, 5.0, 0.0, 0.0, 7.5, 40.0, 0.0, 2.0],
        after=[-1, 0, 1, -1, -1, -1, -1, 5],
        waits=[[], [], [], [0, 1, 1], [], [], [], []],
    )
    for change in (None, Change(unblocked=frozenset({103, 104})), Change(unblocked={106}),
                   Change(gpu_dur_us={0: 0.0, 5: 1.0}, launch_work_scale=0.5),
                   Change(side_stream_rows=frozenset({1}), queued_gap_us=0.0)):
        compiled, python = _both(timeline, change)
        assert _bits(compiled) == _bits(python), change
    # the profiler's cost and a GPU scale: every column a fresh array
    slowed = replace(timeline, profiler_overhead_us=0.01, gpu_scale=0.9,
                     recorded_starts_us=timeline.cpu_start_us)
    compiled, python = _both(slowed, None)
    assert _bits(compiled) == _bits(python)
    assert python.num_ops == 5 and python.sync_wait_us > 0  # the branches above ran
    # a launch queue of one op per stream: each launch waits for its stream's op before to
    # end, so every op finds its queue drained
    queued = _timeline(kind=[LAUNCH] * 4, stream=[0, 0, 0, 1], dur=[10.0] * 4,
                       after=[-1] * 4, waits=[[]] * 4)
    for depth, change in ((1, None), (1, Change(gpu_dur_us={1: 0.0})), (2, None)):
        compiled, python = _both(replace(queued, queue_depth=depth), change)
        assert _bits(compiled) == _bits(python), (depth, change)
    waited, free = replay.simulate(replace(queued, queue_depth=1)), replay.simulate(queued)
    assert (waited.num_drained, free.num_drained) == (4, 2)


@needs_helper
def test_compiled_loop_refuses_bad_columns() -> None:
    good = _timeline([LAUNCH, SYNC], [0, -1], [1.0, 0.0], [-1, -1], [[], [0]])
    run = replay._replay.run  # type: ignore[union-attr]
    lists = ([0.0, 0.0], [0.0, 0.0], [0.0, 0.0])
    scalars = (0.0, 1.0, 2.0, 1.0, 0.2, 0.0)

    def columns(**swap: np.ndarray) -> tuple[np.ndarray, ...]:
        cols = {"kind": good.kind, "stream": good.stream, "dur": good.gpu_dur_us,
                "sync": good.sync_id, "after": good.after, "delay": good.delay_us,
                "gap": np.broadcast_to(0.5, 2), "work": np.zeros(2), "call": np.zeros(2),
                "own": np.zeros(2)} | swap
        return tuple(cols.values())

    assert run(columns(), good.wait_ptr, good.wait_idx, frozenset(), *lists, scalars)[1] == 1
    with pytest.raises(ValueError, match="stream"):
        run(columns(stream=np.array([2, -1])), good.wait_ptr, good.wait_idx, frozenset(),
            *lists, scalars)
    with pytest.raises(ValueError, match="after"):
        run(columns(after=np.array([5, -1])), good.wait_ptr, good.wait_idx, frozenset(),
            *lists, scalars)
    with pytest.raises(ValueError, match="wait"):
        run(columns(), good.wait_ptr, np.array([9]), frozenset(), *lists, scalars)
    with pytest.raises(TypeError, match="float64"):
        run(columns(dur=np.ones(2, np.float32)), good.wait_ptr, good.wait_idx, frozenset(),
            *lists, scalars)
    with pytest.raises(TypeError, match="integers"):
        run(columns(kind=np.zeros(2)), good.wait_ptr, good.wait_idx, frozenset(), *lists,
            scalars)
    with pytest.raises(ValueError, match="lengths"):
        run(columns(own=np.zeros(3)), good.wait_ptr, good.wait_idx, frozenset(), *lists,
            scalars)
    with pytest.raises(TypeError, match="one-dimensional"):
        run(columns(work=np.zeros((2, 1))), good.wait_ptr, good.wait_idx, frozenset(), *lists,
            scalars)
    with pytest.raises(TypeError, match="set"):
        run(columns(), good.wait_ptr, good.wait_idx, [], *lists, scalars)
