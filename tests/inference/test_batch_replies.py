"""Requests queued as a group (``DynamicBatcher.submit_many``): the same policy as ``submit``,
each request answered once through its group's ``Replies``, a batch's results sent from its
model thread without waking the loop, and the thread-safe answer writer of the front end."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import pytest

from aiprof.errors import InputError
from aiprof.inference.batcher import DynamicBatcher
from aiprof.inference.clock import FakeClock
from aiprof.inference.frontend import AnswerWriter
from aiprof.inference.policy import BatchPolicy, QueuePolicy
from aiprof.inference.probes import TimedSelector

COMPUTE_US = 1000.0


class Recorder:
    """Replies that keep every call: (kind, payloads, values or reason, thread)."""

    def __init__(self, thread_safe: bool = False) -> None:
        self.thread_safe = thread_safe
        self.calls: list[tuple[str, list[Any], Any, int]] = []

    def results(self, payloads: list[Any], values: list[Any]) -> None:
        self.calls.append(("results", list(payloads), list(values), threading.get_ident()))

    def errors(self, payloads: list[Any], error: BaseException) -> None:
        self.calls.append(("errors", list(payloads), getattr(error, "reason", repr(error)),
                           threading.get_ident()))

    def answered(self) -> list[Any]:
        return sorted(p for _, payloads, _, _ in self.calls for p in payloads)


def _fake_batcher(clock: FakeClock, policy: BatchPolicy) -> tuple[DynamicBatcher, list[Any]]:
    batches: list[Any] = []

    async def model(inputs: list[int]) -> list[int]:
        batches.append((clock.now_us(), list(inputs)))
        await clock.sleep(COMPUTE_US)
        return [2 * x for x in inputs]

    batcher = DynamicBatcher(model, policy, clock=clock)
    batcher.start()
    return batcher, batches


def test_a_group_is_batched_as_the_same_requests_submitted_one_by_one():
    # GIVEN max batch 4 and a 500 us delay WHEN 6 requests come as one group, then 1 more
    # THEN the batches are those of submit(): 4 at once, then the rest once the delay is over
    policy = BatchPolicy(max_batch_size=4, max_queue_delay_us=500)

    async def grouped() -> list[Any]:
        clock = FakeClock()
        batcher, batches = _fake_batcher(clock, policy)
        replies = Recorder()
        batcher.submit_many(list(range(6)), replies)
        await clock.advance(100)
        batcher.submit_many([6], replies)
        await clock.advance(3 * COMPUTE_US)
        await batcher.close()
        assert replies.answered() == list(range(7))
        assert all(kind == "results" for kind, *_ in replies.calls)
        assert [values for _, _, values, _ in replies.calls] == [
            [2 * x for x in payloads] for _, payloads, _, _ in replies.calls]
        assert len(replies.calls) == len(batches)  # one call per batch
        return batches

    async def one_by_one() -> list[Any]:
        clock = FakeClock()
        batcher, batches = _fake_batcher(clock, policy)
        futures = [batcher.submit(x) for x in range(6)]
        await clock.advance(100)
        futures.append(batcher.submit(6))
        await clock.advance(3 * COMPUTE_US)
        await batcher.close()
        assert [f.result() for f in futures] == [2 * x for x in range(7)]
        return batches

    assert asyncio.run(grouped()) == asyncio.run(one_by_one())


def test_rejections_of_a_group_are_answered_once_with_their_reason():
    async def scenario() -> None:
        clock = FakeClock()
        policy = BatchPolicy(max_batch_size=2, max_queue_size=3,
                             default_queue=QueuePolicy(timeout_us=5_000))
        batcher, _ = _fake_batcher(clock, policy)
        replies = Recorder()
        # the whole group is queued before a batch is taken, as submit() one by one would be
        batcher.submit_many(list(range(8)), replies)
        assert [c[:3] for c in replies.calls] == [("errors", [3, 4, 5, 6, 7], "queue_full")]
        with pytest.raises(InputError):
            batcher.submit_many([8, 9], replies, priorities=[1, 2])  # one level only
        with pytest.raises(InputError):
            batcher.submit_many([8], replies, deadlines_in_us=[-1.0])
        await clock.advance(10 * COMPUTE_US)
        await batcher.close()
        batcher.submit_many([10], replies)
        assert replies.calls[-1][:3] == ("errors", [10], "shutdown")
        assert replies.answered() == [0, 1, 2, 3, 4, 5, 6, 7, 10]  # each once, none invented
        assert batcher.metrics().rejected == {"queue_full": 5, "shutdown": 1}

    asyncio.run(scenario())


def test_a_deadline_in_a_group_rejects_only_its_request():
    async def scenario() -> None:
        clock = FakeClock()
        batcher, _ = _fake_batcher(clock, BatchPolicy(max_batch_size=1))
        replies = Recorder()
        batcher.submit_many([0], replies)  # computes until 1,000 us
        batcher.submit_many([1, 2], replies, deadlines_in_us=[500.0, float("inf")])
        await clock.advance(5 * COMPUTE_US)
        await batcher.close()
        errors = [c[:3] for c in replies.calls if c[0] == "errors"]
        assert errors == [("errors", [1], "deadline")]
        assert replies.answered() == [0, 1, 2]

    asyncio.run(scenario())


def test_thread_safe_replies_get_results_from_the_model_thread_and_the_loop_sleeps():
    # GIVEN a model in a thread and replies that may be called from any thread WHEN 50 lone
    # requests are served, one at a time THEN each batch's results come from the model thread,
    # and the loop wakes only for the requests' arrivals (not once more per batch)
    async def scenario(replies: Recorder, selector: TimedSelector) -> tuple[int, int]:
        batcher = DynamicBatcher(lambda xs: [x + 1 for x in xs], BatchPolicy(max_batch_size=4))
        batcher.start()
        loop_thread = threading.get_ident()
        selector.reset()
        for x in range(50):
            batcher.submit_many([x], replies)
            await asyncio.sleep(0.002)
        iterations = selector.num_iterations
        for _ in range(500):  # the last batch may still be in the model thread (a busy host)
            if batcher.metrics().num_completed == 50:
                break
            await asyncio.sleep(0.002)
        assert batcher.metrics().num_completed == 50  # the loop took in every batch
        await batcher.close()
        assert replies.answered() == list(range(50))
        return loop_thread, iterations

    for thread_safe in (True, False):
        replies, selector = Recorder(thread_safe=thread_safe), TimedSelector()
        with asyncio.Runner(loop_factory=lambda s=selector: asyncio.SelectorEventLoop(s)) as r:
            loop_thread, iterations = r.run(scenario(replies, selector))
        threads = {thread for *_, thread in replies.calls}
        if thread_safe:
            assert loop_thread not in threads
            quiet = iterations
        else:
            assert threads == {loop_thread}
            assert iterations > quiet + 40  # a wake-up per batch more


def test_answer_writer_keeps_records_whole_and_in_order_when_the_socket_is_full():
    async def scenario() -> bytes:
        loop = asyncio.get_running_loop()
        mine, theirs = socket.socketpair()
        mine.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        writer = AnswerWriter(loop, mine)
        records = [i.to_bytes(4, "little") * 3 for i in range(20_000)]  # 240 kB of 12-byte

        def send_half(part: list[bytes]) -> None:
            for record in part:
                writer.send(record)

        sender = threading.Thread(target=send_half, args=(records[1::2],))
        sender.start()
        send_half(records[0::2])
        sender.join()
        theirs.setblocking(False)
        received = bytearray()
        deadline = time.monotonic() + 10
        while len(received) < 12 * len(records) and time.monotonic() < deadline:
            try:
                received += theirs.recv(1 << 16)
            except BlockingIOError:
                await asyncio.sleep(0.001)  # the loop flushes what the kernel did not take
        writer.close()
        theirs.close()
        return bytes(received)

    data = asyncio.run(scenario())
    assert len(data) == 12 * 20_000
    words = [data[i:i + 12] for i in range(0, len(data), 12)]
    assert all(w[:4] == w[4:8] == w[8:] for w in words)  # no record torn
    ids = [int.from_bytes(w[:4], "little") for w in words]
    assert sorted(ids) == list(range(20_000))
    evens, odds = [i for i in ids if i % 2 == 0], [i for i in ids if i % 2]
    assert evens == sorted(evens) and odds == sorted(odds)  # each sender's order kept


def test_a_batch_recorded_at_once_is_recorded_as_its_requests_one_by_one():
    from aiprof.inference.metrics import MetricsRecorder

    together, each = MetricsRecorder(), MetricsRecorder()
    for enqueues, levels in (([1.0], [1]), ([1.0, 4.0, 6.5], [1, 2, 1])):
        together.requests(enqueues, levels, 3.0, 5.0, 9.0)
        for enqueue, level in zip(enqueues, levels, strict=True):
            each.request(enqueue, 3.0, 5.0, 9.0, level)
    assert together.summary(10.0) == each.summary(10.0)
    assert together.summary(10.0).forming_mean_us > 0


def _served(policy: BatchPolicy, groups: list[tuple[float, list[int], list[int] | None]],
            fresh: bool) -> tuple[list[Any], list[Any], Any]:
    """The batches, the answers and the metrics of ``groups`` (time, payloads, priorities)."""

    async def scenario() -> tuple[list[Any], list[Any], Any]:
        clock = FakeClock()
        batches: list[Any] = []

        async def model(inputs: list[int]) -> list[int]:
            batches.append((clock.now_us(), list(inputs)))
            await clock.sleep(COMPUTE_US)
            return [2 * x for x in inputs]

        batcher = DynamicBatcher(model, policy, clock=clock, num_instances=2,
                                 fresh_dispatch=fresh)
        batcher.start()
        replies = Recorder()
        for at_us, payloads, priorities in groups:
            await clock.advance(at_us - clock.now_us())
            batcher.submit_many(payloads, replies, priorities=priorities)
        await clock.advance(20 * COMPUTE_US)
        metrics = batcher.metrics()
        await batcher.close()
        answers = sorted((p, kind, value) for kind, payloads, values, _ in replies.calls
                         for p, value in zip(payloads, values if kind == "results"
                                             else [values] * len(payloads), strict=True))
        return batches, answers, metrics

    return asyncio.run(scenario())


def test_fresh_dispatch_takes_the_batches_queueing_would_take(monkeypatch):
    # GIVEN random policies (sizes, delays, preferred sizes, levels, queue timeouts and limits,
    # aging) and random groups of requests, some with priorities, WHEN each is served with the
    # groups that form a batch at once dispatched without being queued, and with every request
    # queued first THEN the batches, each request's answer and the metrics are the same
    import random

    from .test_queue import random_policy

    taken: list[int] = []
    dispatch_fresh = DynamicBatcher._dispatch_fresh

    def counted(self: DynamicBatcher, *args: Any) -> int:
        taken.append(dispatch_fresh(self, *args))
        return taken[-1]

    monkeypatch.setattr(DynamicBatcher, "_dispatch_fresh", counted)
    for seed in range(30):
        rng = random.Random(seed)
        policy = random_policy(rng)
        groups, now, ident = [], 0.0, 0
        for _ in range(rng.randint(5, 25)):
            now += rng.choice([0.0, 100.0, 400.0, 1500.0, 4000.0])
            size = rng.randint(1, 2 * policy.max_batch_size)
            priorities = ([rng.randint(1, policy.priority_levels) for _ in range(size)]
                          if rng.random() < 0.3 else None)
            groups.append((now, list(range(ident, ident + size)), priorities))
            ident += size
        fresh = _served(policy, groups, fresh=True)
        assert fresh == _served(policy, groups, fresh=False), seed
        assert len(fresh[1]) == ident  # every request answered once
    assert sum(taken) > 50 and 0 in taken  # dispatched fresh, and fell back to the queue
