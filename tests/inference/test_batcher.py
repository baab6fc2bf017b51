"""The asyncio batcher under a fake clock: every policy, failures, cancellation, overload."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aiprof.errors import InputError
from aiprof.inference.batcher import DynamicBatcher, QueueFullError, RequestRejectedError
from aiprof.inference.clock import FakeClock
from aiprof.inference.policy import BatchPolicy, QueuePolicy

COMPUTE_US = 1000.0


class Model:
    """Records (time, inputs) of every batch; takes COMPUTE_US of fake time; x -> 2x."""

    def __init__(self, clock: FakeClock, fail_on: set[int] | None = None) -> None:
        self.clock = clock
        self.calls: list[tuple[float, list[Any]]] = []
        self.fail_on = fail_on or set()

    async def __call__(self, inputs: list[Any]) -> list[Any]:
        self.calls.append((self.clock.now_us(), list(inputs)))
        await self.clock.sleep(COMPUTE_US)
        if self.fail_on & set(inputs):
            raise RuntimeError("model failed")
        return [2 * x for x in inputs]


def run(scenario: Callable[[FakeClock], Awaitable[None]]) -> None:
    asyncio.run(scenario(FakeClock()))


def make(clock: FakeClock, policy: BatchPolicy, **kwargs: Any) -> tuple[DynamicBatcher, Model]:
    model = Model(clock, kwargs.pop("fail_on", None))
    batcher = DynamicBatcher(model, policy, clock=clock, **kwargs)
    batcher.start()
    return batcher, model


async def shut_down(clock: FakeClock, batcher: DynamicBatcher) -> None:
    """Close without draining while the batch in flight finishes on the fake clock."""
    closing = asyncio.ensure_future(batcher.close(drain=False))
    await clock.advance(COMPUTE_US)
    await closing


def test_zero_delay_runs_whatever_is_queued():
    async def scenario(clock: FakeClock) -> None:
        batcher, model = make(clock, BatchPolicy(max_batch_size=8))
        first = batcher.submit(1)
        await clock.advance(10)  # the first request runs alone at once
        rest = [batcher.submit(x) for x in (2, 3, 4)]
        await clock.advance(COMPUTE_US)  # queued while busy: one batch of 3 when it frees
        await clock.advance(COMPUTE_US)
        assert [c[1] for c in model.calls] == [[1], [2, 3, 4]]
        assert model.calls[1][0] == pytest.approx(COMPUTE_US)
        assert [f.result() for f in [first, *rest]] == [2, 4, 6, 8]
        await batcher.close()

    run(scenario)


def test_delay_waits_for_a_full_batch_or_the_delay():
    async def scenario(clock: FakeClock) -> None:
        batcher, model = make(clock, BatchPolicy(max_batch_size=4, max_queue_delay_us=500))
        for x in range(3):
            batcher.submit(x)
        await clock.advance(499)
        assert model.calls == []  # 3 < 4 and the delay has not run out
        await clock.advance(1)
        assert model.calls == [(500.0, [0, 1, 2])]
        await clock.advance(COMPUTE_US)
        for x in range(4):
            batcher.submit(x)
        await clock.advance(0)
        assert model.calls[-1] == (1500.0, [0, 1, 2, 3])  # full: no waiting
        await clock.advance(COMPUTE_US)
        await batcher.close()

    run(scenario)


def test_preferred_size_runs_at_once_and_largest_preferred_wins():
    async def scenario(clock: FakeClock) -> None:
        policy = BatchPolicy(
            max_batch_size=8, max_queue_delay_us=10_000, preferred_batch_sizes=(2, 4)
        )
        batcher, model = make(clock, policy)
        batcher.submit(0)
        await clock.advance(100)
        assert model.calls == []
        for x in range(1, 6):  # 6 queued: largest preferred size that fits is 4
            batcher.submit(x)
        await clock.advance(0)
        assert model.calls == [(100.0, [0, 1, 2, 3])]
        await clock.advance(COMPUTE_US)  # 2 left = a preferred size
        assert model.calls[-1] == (1100.0, [4, 5])
        await clock.advance(COMPUTE_US)
        await batcher.close()

    run(scenario)


def test_level_one_is_served_before_level_two():
    async def scenario(clock: FakeClock) -> None:
        policy = BatchPolicy(max_batch_size=2, priority_levels=2, default_priority=2)
        batcher, model = make(clock, policy)
        batcher.submit(0)
        await clock.advance(1)  # occupies the instance
        for x in (10, 11):
            batcher.submit(x)
        for x in (20, 21):
            batcher.submit(x, priority=1)
        await clock.advance(3 * COMPUTE_US)
        assert [c[1] for c in model.calls] == [[0], [20, 21], [10, 11]]
        await batcher.close()

    run(scenario)


def test_each_level_has_its_own_maximum_delay():
    async def scenario(clock: FakeClock) -> None:
        policy = BatchPolicy(
            max_batch_size=8, priority_levels=2, max_queue_delay_us=5000,
            queue_policies=((1, QueuePolicy(max_delay_us=200)),),
        )
        batcher, model = make(clock, policy)
        batcher.submit(1, priority=2)
        await clock.advance(1000)
        assert model.calls == []
        batcher.submit(2, priority=1)
        await clock.advance(200)  # the level-1 request's 200 us runs out first
        assert model.calls == [(1200.0, [2, 1])]
        await clock.advance(COMPUTE_US)
        await batcher.close()

    run(scenario)


def test_queue_timeout_reject_and_shorter_override():
    async def scenario(clock: FakeClock) -> None:
        policy = BatchPolicy(max_batch_size=1, default_queue=QueuePolicy(timeout_us=1500))
        batcher, model = make(clock, policy)
        first = batcher.submit(0)
        await clock.advance(1)
        late = batcher.submit(1)
        short = batcher.submit(2, timeout_us=300)
        longer = batcher.submit(3, timeout_us=99_999)  # may only shorten: stays 1500
        await clock.advance(5 * COMPUTE_US)
        assert first.result() == 0 and late.result() == 2
        for future in (short, longer):
            with pytest.raises(RequestRejectedError) as caught:
                future.result()
            assert caught.value.reason == "timeout"
        assert batcher.metrics().rejected == {"timeout": 2}
        await batcher.close()

    run(scenario)


def test_timeout_action_delay_moves_request_behind_others():
    async def scenario(clock: FakeClock) -> None:
        policy = BatchPolicy(
            max_batch_size=2, default_queue=QueuePolicy(timeout_us=500, timeout_action="delay")
        )
        batcher, model = make(clock, policy)
        batcher.submit(0)
        await clock.advance(1)
        old = batcher.submit(1)
        await clock.advance(600)  # 1 timed out: delayed, not rejected
        fresh = [batcher.submit(x) for x in (2, 3)]
        await clock.advance(5 * COMPUTE_US)
        assert [c[1] for c in model.calls] == [[0], [2, 3], [1]]
        assert old.result() == 2 and [f.result() for f in fresh] == [4, 6]
        await batcher.close()

    run(scenario)


def test_max_queue_size_rejects_at_once_overall_and_per_level():
    async def scenario(clock: FakeClock) -> None:
        policy = BatchPolicy(
            max_batch_size=1, priority_levels=2, max_queue_size=3,
            queue_policies=((2, QueuePolicy(max_queue_size=1)),),
        )
        batcher, _ = make(clock, policy)
        batcher.submit(0)
        await clock.advance(1)  # running, so no longer queued
        kept = [batcher.submit(1, priority=2)]
        level_full = batcher.submit(2, priority=2)
        kept += [batcher.submit(x, priority=1) for x in (3, 4)]
        all_full = batcher.submit(5, priority=1)
        for future in (level_full, all_full):
            assert isinstance(future.exception(), QueueFullError)
        assert len(batcher) == 3
        await clock.advance(10 * COMPUTE_US)
        assert all(f.result() for f in kept)
        await batcher.close()

    run(scenario)


def test_nearest_deadline_first_and_expired_deadline_rejected():
    async def scenario(clock: FakeClock) -> None:
        batcher, model = make(clock, BatchPolicy(max_batch_size=1))
        batcher.submit(0)
        await clock.advance(1)
        relaxed = batcher.submit(1, deadline_in_us=50_000)
        urgent = batcher.submit(2, deadline_in_us=5_000)
        hopeless = batcher.submit(3, deadline_in_us=500)
        await clock.advance(4 * COMPUTE_US)
        assert [c[1][0] for c in model.calls] == [0, 2, 1]
        assert urgent.result() == 4 and relaxed.result() == 2
        assert hopeless.exception().reason == "deadline"
        await batcher.close()

    run(scenario)


def test_deadline_slack_dispatches_before_the_delay():
    async def scenario(clock: FakeClock) -> None:
        policy = BatchPolicy(max_batch_size=8, max_queue_delay_us=10_000, deadline_slack_us=1_000)
        batcher, model = make(clock, policy)
        batcher.submit(0, deadline_in_us=3_000)
        await clock.advance(2_500)
        assert model.calls == [(2000.0, [0])]  # deadline 3000 minus slack 1000
        await clock.advance(COMPUTE_US)
        await batcher.close()

    run(scenario)


def test_aging_keeps_low_priority_from_starving():
    async def scenario(clock: FakeClock) -> None:
        policy = BatchPolicy(max_batch_size=1, priority_levels=2, default_priority=2, aging_us=3000)
        batcher, model = make(clock, policy)
        batcher.submit(0, priority=1)
        await clock.advance(1)
        low = batcher.submit(-1)
        # a level-1 request every 500 us keeps the queue of level 1 busy forever
        for step in range(20):
            batcher.submit(step, priority=1)
            await clock.advance(500)
        served = [c[1][0] for c in model.calls]
        assert -1 in served and low.done()
        # without aging it would still be waiting
        assert served.index(-1) < len(served) - 1
        await shut_down(clock, batcher)

    run(scenario)


def test_without_aging_low_priority_waits():
    async def scenario(clock: FakeClock) -> None:
        policy = BatchPolicy(max_batch_size=1, priority_levels=2, default_priority=2)
        batcher, model = make(clock, policy)
        batcher.submit(0, priority=1)
        await clock.advance(1)
        low = batcher.submit(-1)
        for step in range(20):
            batcher.submit(step, priority=1)
            await clock.advance(500)
        assert not low.done()
        await shut_down(clock, batcher)
        assert low.exception().reason == "shutdown"

    run(scenario)


def test_cancelled_request_leaves_the_queue():
    async def scenario(clock: FakeClock) -> None:
        batcher, model = make(clock, BatchPolicy(max_batch_size=4, max_queue_delay_us=1000))
        keep = batcher.submit(1)
        drop = batcher.submit(2)
        drop.cancel()
        await clock.advance(2 * COMPUTE_US)
        assert model.calls == [(1000.0, [1])]
        assert keep.result() == 2 and batcher.metrics().rejected == {"cancelled": 1}
        await batcher.close()

    run(scenario)


def test_failing_model_fails_its_batch_only():
    async def scenario(clock: FakeClock) -> None:
        batcher, _ = make(clock, BatchPolicy(max_batch_size=2), fail_on={13})
        first = [batcher.submit(x) for x in (13, 1)]
        await clock.advance(1)
        second = [batcher.submit(x) for x in (2, 3)]
        await clock.advance(3 * COMPUTE_US)
        assert all(isinstance(f.exception(), RuntimeError) for f in first)
        assert [f.result() for f in second] == [4, 6]
        metrics = batcher.metrics()
        assert metrics.num_failed == 2 and metrics.num_completed == 2
        await batcher.close()

    run(scenario)


def test_model_returning_wrong_count_fails_the_batch():
    async def scenario(clock: FakeClock) -> None:
        async def short(inputs: list[int]) -> list[int]:
            return inputs[:-1]

        batcher = DynamicBatcher(short, BatchPolicy(max_batch_size=4), clock=clock)
        batcher.start()
        futures = [batcher.submit(x) for x in range(3)]
        await clock.advance(1)
        assert all(isinstance(f.exception(), InputError) for f in futures)
        await batcher.close()

    run(scenario)


def test_queue_and_forming_split_and_two_instances():
    async def scenario(clock: FakeClock) -> None:
        policy = BatchPolicy(max_batch_size=2, max_queue_delay_us=300)
        batcher, model = make(clock, policy, num_instances=2)
        for x in range(4):  # two full batches at once on two instances
            batcher.submit(x)
        await clock.advance(0)
        assert [c[0] for c in model.calls] == [0.0, 0.0]
        await clock.advance(COMPUTE_US + 1)
        batcher.submit(9)  # waits 300 us for a partner with both instances free
        await clock.advance(2 * COMPUTE_US)
        m = batcher.metrics()
        assert m.num_completed == 5
        assert m.forming_mean_us == pytest.approx(300 / 5)
        assert m.queue_mean_us == pytest.approx(0.0)
        assert m.compute_mean_us == pytest.approx(COMPUTE_US)
        assert m.batch_size_histogram == {"1": 1, "2": 2}
        await batcher.close()

    run(scenario)


def test_overload_ten_times_capacity_answers_every_request():
    # capacity: batches of 4 per 1000 us = 4000 req/s; offer 40,000 req/s for 50 ms
    async def scenario(clock: FakeClock) -> None:
        policy = BatchPolicy(max_batch_size=4, max_queue_delay_us=200, max_queue_size=64,
                             default_queue=QueuePolicy(timeout_us=20_000))
        batcher, _ = make(clock, policy)
        futures = []
        peak = 0
        for _ in range(2000):
            futures.append(batcher.submit(len(futures)))
            peak = max(peak, len(batcher))
            await clock.advance(25)
        await clock.advance(100_000)
        await batcher.close()
        assert all(f.done() for f in futures)
        m = batcher.metrics()
        answered = m.num_completed + m.num_failed + sum(m.rejected.values())
        assert answered == len(futures)  # none lost
        assert peak <= 64  # memory bounded by the queue limit
        assert m.rejected["queue_full"] >= 0.8 * len(futures)  # about 9 in 10 over capacity
        for future in futures:
            error = future.exception()
            assert error is None or isinstance(error, RequestRejectedError) and error.reason
        # served at capacity: 4 requests per 1000 us of busy time
        assert m.mean_batch_size == pytest.approx(4.0, abs=0.05)

    run(scenario)
