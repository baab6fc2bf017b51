"""The batcher under a hostile model and hostile callers: one answer per request, deadlines on time.

Each test is a row of the reliability campaign (issue 21, failure class 7) that failed before.
"""

from __future__ import annotations

import asyncio
import gc
import math
import threading
import time
from typing import Any

import pytest

from aiprof.errors import InputError
from aiprof.inference.batcher import BatchFailedError, DynamicBatcher, RequestRejectedError
from aiprof.inference.clock import Cancellable, FakeClock
from aiprof.inference.failures import ModelOutputError
from aiprof.inference.policy import BatchPolicy, QueuePolicy

COMPUTE_US = 1000.0
FATAL = [asyncio.CancelledError, GeneratorExit, KeyboardInterrupt, SystemExit]


def raising_async(clock: FakeClock, error: type[BaseException], poison: int = 13) -> Any:
    async def model(inputs: list[int]) -> list[int]:
        await clock.sleep(COMPUTE_US)
        if poison in inputs:
            raise error()
        return [2 * x for x in inputs]

    return model


def raising_sync(error: type[BaseException], poison: int = 13) -> Any:
    def model(inputs: list[int]) -> list[int]:
        if poison in inputs:
            raise error()
        return [2 * x for x in inputs]

    return model


@pytest.mark.parametrize("error", FATAL)
def test_async_model_raising_any_base_exception_fails_its_batch_only(error):
    async def scenario() -> None:
        clock = FakeClock()
        batcher = DynamicBatcher(raising_async(clock, error), BatchPolicy(max_batch_size=2),
                                 clock=clock)
        batcher.start()
        poisoned = [batcher.submit(x) for x in (13, 1)]
        await clock.advance(1)
        later = [batcher.submit(x) for x in (2, 3)]
        await clock.advance(3 * COMPUTE_US)
        for future in poisoned:
            failure = future.exception()
            assert isinstance(failure, BatchFailedError) and failure.reason == "interrupted"
            assert isinstance(failure.__cause__, error)
        assert [f.result() for f in later] == [4, 6]
        m = batcher.metrics()
        assert m.failed == {"interrupted": 2} and m.num_completed == 2
        assert m.num_replaced_instances == 1
        await batcher.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("error", FATAL)
def test_thread_model_raising_any_base_exception_fails_its_batch_only(error):
    async def scenario() -> None:
        batcher = DynamicBatcher(raising_sync(error), BatchPolicy(max_batch_size=2))
        batcher.start()
        poisoned = [batcher.submit(x) for x in (13, 1)]
        await asyncio.wait(poisoned, timeout=5)
        later = [batcher.submit(x) for x in (2, 3)]
        assert await asyncio.wait_for(asyncio.gather(*later), 5) == [4, 6]
        for future in poisoned:
            assert future.exception().reason == "interrupted"
        await asyncio.wait_for(batcher.close(), 5)
        assert batcher.metrics().num_replaced_instances == 1

    asyncio.run(scenario())


def test_hung_async_model_times_out_and_its_instance_is_replaced():
    async def scenario() -> None:
        clock = FakeClock()
        never = asyncio.Event()

        async def model(inputs: list[int]) -> list[int]:
            if 13 in inputs:
                await never.wait()
            await clock.sleep(COMPUTE_US)
            return inputs

        batcher = DynamicBatcher(model, BatchPolicy(max_batch_size=1), clock=clock,
                                 compute_timeout_us=50_000)
        batcher.start()
        hung = batcher.submit(13)
        await clock.advance(1)
        after = batcher.submit(1)
        await clock.advance(49_998)
        assert not hung.done() and not after.done()
        await clock.advance(1)  # 50 ms after dispatch
        assert hung.exception().reason == "compute_timeout"
        await clock.advance(COMPUTE_US)
        assert after.result() == 1
        await batcher.close()
        assert batcher.metrics().failed == {"compute_timeout": 1}

    asyncio.run(scenario())


@pytest.mark.timing
def test_hung_thread_model_times_out_and_close_returns():
    release = threading.Event()

    def model(inputs: list[int]) -> list[int]:
        if 13 in inputs:
            release.wait(30)
        return inputs

    async def scenario() -> None:
        batcher = DynamicBatcher(model, BatchPolicy(max_batch_size=1), compute_timeout_us=50_000)
        batcher.start()
        hung = batcher.submit(13)
        await asyncio.sleep(0.01)
        after = batcher.submit(1)  # served by a new thread once the hung one is abandoned
        assert await asyncio.wait_for(after, 5) == 1
        assert hung.exception().reason == "compute_timeout"
        started = time.monotonic()
        await batcher.close()
        assert time.monotonic() - started < 1.0

    try:
        asyncio.run(scenario())
    finally:
        release.set()


def test_close_returns_within_its_drain_timeout_and_answers_everything():
    async def scenario() -> None:
        clock = FakeClock()
        never = asyncio.Event()

        async def model(inputs: list[int]) -> list[int]:
            await never.wait()
            return inputs

        batcher = DynamicBatcher(model, BatchPolicy(max_batch_size=1), clock=clock,
                                 compute_timeout_us=math.inf)
        batcher.start()
        futures = [batcher.submit(x) for x in range(3)]
        await clock.advance(1)
        closing = asyncio.ensure_future(batcher.close(timeout_us=10_000))
        await clock.advance(9_000)
        assert not closing.done()
        await clock.advance(1_000)
        assert closing.done()
        reasons = [f.exception().reason for f in futures]
        assert reasons == ["shutdown"] * 3  # one computing (failed), two queued (rejected)
        m = batcher.metrics()
        assert m.failed == {"shutdown": 1} and m.rejected == {"shutdown": 2}

    asyncio.run(scenario())


def test_close_runs_a_partial_batch_without_waiting_for_its_delay():
    async def scenario() -> None:
        clock = FakeClock()

        async def model(inputs: list[int]) -> list[int]:
            await clock.sleep(COMPUTE_US)
            return inputs

        batcher = DynamicBatcher(model, BatchPolicy(max_batch_size=8, max_queue_delay_us=1e9),
                                 clock=clock)
        batcher.start()
        pending = [batcher.submit(x) for x in range(3)]
        closing = asyncio.ensure_future(batcher.close())
        await clock.advance(COMPUTE_US)
        assert closing.done() and [f.result() for f in pending] == [0, 1, 2]

    asyncio.run(scenario())


def busy_batcher(clock: FakeClock, policy: BatchPolicy) -> DynamicBatcher:
    """A batcher whose one instance computes for 1 s."""

    async def model(inputs: list[int]) -> list[int]:
        await clock.sleep(1e6)
        return inputs

    batcher = DynamicBatcher(model, policy, clock=clock)
    batcher.start()
    return batcher


def test_deadline_and_queue_timeout_fire_on_time_while_the_instance_is_busy():
    async def scenario() -> None:
        clock = FakeClock()
        policy = BatchPolicy(max_batch_size=1, priority_levels=2,
                             queue_policies=((2, QueuePolicy(timeout_us=30_000)),))
        batcher = busy_batcher(clock, policy)
        batcher.submit(0)
        await clock.advance(1)  # computes until 1 s
        deadline = batcher.submit(1, priority=1, deadline_in_us=20_000)
        timeout = batcher.submit(2, priority=2)
        answered: dict[str, float] = {}
        for name, future in (("deadline", deadline), ("timeout", timeout)):
            future.add_done_callback(lambda _f, n=name: answered.setdefault(n, clock.now_us()))
        await clock.advance(100_000)
        assert answered == {"deadline": 20_001.0, "timeout": 30_001.0}
        assert deadline.exception().reason == "deadline"
        assert timeout.exception().reason == "timeout"
        await clock.advance(1e6)
        await batcher.close()

    asyncio.run(scenario())


class StillClock:
    """A clock a test sets by hand; timers are kept, never fired (the loop is never waited on)."""

    def __init__(self) -> None:
        self.now = 0.0

    def now_us(self) -> float:
        return self.now

    def call_at(self, when_us: float, callback: Any) -> Cancellable:
        return asyncio.get_running_loop().call_later(3600, callback)

    async def sleep(self, duration_us: float) -> None:
        await asyncio.sleep(3600)


@pytest.mark.timing
def test_submit_cost_does_not_grow_with_the_queue():
    # each submit lets one queued request expire (the old queue rebuilt every level each time)
    # and there are two levels and deadlines (the old one sorted the whole queue per decision)
    def seconds_per_submit(queued: int) -> float:
        async def scenario() -> float:
            clock = StillClock()
            policy = BatchPolicy(max_batch_size=8, priority_levels=2,
                                 default_queue=QueuePolicy(timeout_us=1e12))
            batcher = DynamicBatcher(_never, policy, clock=clock, num_instances=1)
            batcher.start()
            running = batcher.submit(-1)
            await asyncio.sleep(0)  # the one instance is now busy for good
            futures = [running] + [batcher.submit(i, priority=1 + i % 2, timeout_us=1e6 + i,
                                                  deadline_in_us=1e9 + i) for i in range(queued)]
            clock.now = 1e6 - 1
            # this thread's CPU time: the cost of submit itself, not the time the thread
            # waited for a core that other processes of a busy machine held, nor a collection
            # of the cyclic garbage collector, whose cost is that of everything the process
            # holds (a test worker's heap after a thousand tests), not of the queue
            gc.collect()
            gc.disable()
            try:
                started = time.thread_time()
                for i in range(2000):
                    clock.now += 1.0
                    futures.append(batcher.submit(i, priority=1 + i % 2, timeout_us=1e9))
                elapsed = (time.thread_time() - started) / 2000
            finally:
                gc.enable()
            assert len(batcher) == queued  # one in, one expired, each time
            await batcher.close(drain=False, timeout_us=0)
            assert all(f.exception().reason in ("shutdown", "timeout") for f in futures)
            return elapsed

        return asyncio.run(scenario())

    small, large = seconds_per_submit(2_000), seconds_per_submit(100_000)
    assert large < 200e-6  # was 14 ms with 100k queued
    assert large < 5 * small + 20e-6


async def _never(inputs: list[int]) -> list[int]:
    await asyncio.Event().wait()
    return inputs


def test_submit_before_start_is_rejected():
    batcher = DynamicBatcher(_never, BatchPolicy())

    async def scenario() -> None:
        with pytest.raises(InputError, match="before start"):
            batcher.submit(1)
        await batcher.close()  # closing a batcher never started is fine

    asyncio.run(scenario())


@pytest.mark.parametrize("options", [
    {"priority": 1.0}, {"priority": "1"}, {"priority": True}, {"priority": 3},
    {"deadline_in_us": math.nan}, {"deadline_in_us": -1.0}, {"deadline_in_us": "5"},
    {"timeout_us": math.nan}, {"timeout_us": -5},
])
def test_bad_request_arguments_are_input_errors(options):
    async def scenario() -> None:
        async with DynamicBatcher(_never, BatchPolicy(priority_levels=2)) as batcher:
            with pytest.raises(InputError):
                batcher.submit(1, **options)
            assert len(batcher) == 0

    asyncio.run(scenario())


@pytest.mark.parametrize("kwargs", [
    {"num_instances": 0}, {"num_instances": 1.5}, {"compute_timeout_us": 0},
    {"compute_timeout_us": math.nan}, {"drain_timeout_us": -1}, {"max_samples": 0},
])
def test_bad_batcher_arguments_are_input_errors(kwargs):
    with pytest.raises(InputError):
        DynamicBatcher(_never, BatchPolicy(), **kwargs)


@pytest.mark.parametrize(("kind", "kwargs"), [
    (BatchPolicy, {"max_batch_size": 2.5}), (BatchPolicy, {"max_queue_delay_us": math.nan}),
    (BatchPolicy, {"aging_us": math.nan}), (BatchPolicy, {"priority_levels": "2"}),
    (QueuePolicy, {"timeout_us": math.nan}), (QueuePolicy, {"max_queue_size": 1.5}),
])
def test_bad_policy_fields_are_input_errors(kind, kwargs):
    with pytest.raises(InputError):
        kind(**kwargs)


@pytest.mark.parametrize("garbage", [None, 7, "ab", {"a": 1, "b": 2, "c": 3}])
def test_model_returning_garbage_fails_its_batch(garbage):
    async def scenario() -> None:
        async def model(inputs: list[int]) -> Any:
            return garbage if 13 in inputs else inputs

        async with DynamicBatcher(model, BatchPolicy(max_batch_size=2)) as batcher:
            bad = [batcher.submit(x) for x in (13, 1)]
            await asyncio.wait(bad)
            assert await batcher.submit(5) == 5
        for future in bad:
            error = future.exception()
            assert isinstance(error, ModelOutputError) and isinstance(error, InputError)

    asyncio.run(scenario())


def test_rejected_reasons_are_request_rejected_errors():
    async def scenario() -> None:
        batcher = DynamicBatcher(_never, BatchPolicy())
        batcher.start()
        await batcher.close(drain=False, timeout_us=0)
        late = batcher.submit(1)
        assert isinstance(late.exception(), RequestRejectedError)
        assert batcher.metrics().rejected == {"shutdown": 1}

    asyncio.run(scenario())


def test_loop_shutdown_without_close_answers_what_is_queued():
    futures: list[asyncio.Future[Any]] = []

    async def scenario() -> None:
        batcher = DynamicBatcher(_never, BatchPolicy(max_batch_size=1))
        batcher.start()
        futures.extend(batcher.submit(x) for x in range(4))
        await asyncio.sleep(0.01)  # one computes for ever, three queued; asyncio.run then
        # cancels the batcher's tasks without close()

    asyncio.run(scenario())
    assert all(f.done() for f in futures)
    assert [f.exception().reason for f in futures] == ["shutdown"] * 4
