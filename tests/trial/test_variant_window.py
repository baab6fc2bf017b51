"""The variant's timed window: steps, seconds, and the ranks of a torchrun job."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

from aiprof.capture.runner import StopScript  # noqa: E402
from aiprof.measure.fixes import FIX_CLASSES  # noqa: E402
from aiprof.measure.fixes.variant import VariantSession, host_probe_us  # noqa: E402
from aiprof.measure.fixes.watch import LossWatch  # noqa: E402


def session(**kwargs: object) -> VariantSession:
    fix = FIX_CLASSES["none"]()
    return VariantSession(torch, fix, LossWatch("loss", ()), warmup=3, steps=2,
                          steps_from=None, **kwargs)  # type: ignore[arg-type]


def steps_until_stop(s: VariantSession, step_s: float, limit: int = 200) -> int:
    for n in range(1, limit + 1):
        time.sleep(step_s)
        try:
            s.step()
        except StopScript:
            return n
    raise AssertionError("the session never stopped the script")


def test_steps_only_stop_after_warmup_plus_steps() -> None:
    s = session()
    assert steps_until_stop(s, 0.0) == 5
    assert s.warmup_steps_run == 3
    assert len(s.timer.step_times_us()) == 2


def test_a_minimum_window_times_more_steps_when_they_are_short() -> None:
    s = session(min_timed_s=0.12)
    n = steps_until_stop(s, 0.02)
    timed = s.timer.step_times_us()
    assert n > 5 and len(timed) == n - 3
    assert sum(timed) / 1e6 >= 0.12
    assert s.warmup_steps_run == 3


def test_long_steps_need_no_more_than_the_steps_asked_for() -> None:
    s = session(min_timed_s=0.01)
    assert steps_until_stop(s, 0.02) == 5


def test_ranks_of_a_job_count_steps_not_seconds() -> None:
    # Each rank reads its own clock: a window in seconds could end one rank a step before
    # another, which then waits alone in the next collective.
    s = session(min_timed_s=10.0, warmup_s=10.0, world_size=2)
    assert s.min_timed_s == 0.0 and s.warmup_s == 0.0
    assert steps_until_stop(s, 0.0) == 5


@pytest.mark.timing
def test_the_host_probe_times_real_work() -> None:
    first, second = host_probe_us(), host_probe_us()
    assert first > 100.0 and second > 100.0  # 200,000 Python iterations are not free
    assert 0.2 < first / second < 5.0


def test_the_floor_is_the_fastest_block_and_keeps_what_recurs_within_a_block() -> None:
    from aiprof.trial.stats import floor_step_us

    # A 10 ms step slowed to 20 ms for a stretch from outside: the floor is the unslowed one.
    slowed = [10_000.0] * 10 + [20_000.0] * 10 + [10_000.0] * 10
    assert floor_step_us(slowed) == 10_000.0
    # A loader that starves one step in 3 (10, 10, 40 ms): every 50 ms block holds one
    # starved step, so the floor keeps its share (the fastest single step would not).
    starving = [10_000.0, 10_000.0, 40_000.0] * 10
    assert floor_step_us(starving) == pytest.approx(20_000.0)
    # A window shorter than one block is one block; a trailing part joins the block before.
    assert floor_step_us([5_000.0, 7_000.0]) == 6_000.0
    assert floor_step_us([30_000.0, 30_000.0, 10_000.0]) == pytest.approx(70_000.0 / 3)
    with pytest.raises(ValueError):
        floor_step_us([])


def test_the_statistic_is_checked_and_drives_the_comparison() -> None:
    from aiprof.errors import InputError
    from aiprof.trial.plan import Protocol
    from aiprof.trial.runs import VariantRun

    with pytest.raises(InputError, match="--statistic"):
        Protocol(statistic="mean")
    run = VariantRun(label="base", round=0, status="ok",
                     step_us=(10_000.0,) * 10 + (20_000.0,) * 11)
    assert run.step_time_us("median") == 20_000.0
    assert run.step_time_us("floor") == 10_000.0
