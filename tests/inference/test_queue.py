"""The O(log n) batch queue takes the same decisions as the scanning one it replaced."""

from __future__ import annotations

import random

import pytest

from aiprof.inference import queue as fast
from aiprof.inference.policy import BatchPolicy, QueuePolicy

from . import reference_queue as slow

INF = float("inf")


def random_policy(rng: random.Random) -> BatchPolicy:
    levels = rng.randint(1, 3)
    max_batch = rng.randint(1, 6)
    preferred = tuple(sorted({rng.randint(1, max_batch) for _ in range(rng.randint(0, 2))}))
    # one level at most delays its timed-out requests: the order inside the delayed queue of
    # requests that time out at the same call may differ (the old queue took them level by level,
    # the new one by timeout)
    delaying = rng.randint(1, levels) if rng.random() < 0.4 else 0
    queues = tuple(
        (level, QueuePolicy(timeout_us=rng.choice([0.0, 1000.0, 3000.0]),
                            timeout_action="delay" if level == delaying else "reject",
                            max_queue_size=rng.choice([0, 0, 4]),
                            max_delay_us=rng.choice([None, 200.0])))
        for level in range(1, levels + 1))
    return BatchPolicy(
        max_batch_size=max_batch, max_queue_delay_us=rng.choice([0.0, 300.0, 2000.0]),
        preferred_batch_sizes=preferred, priority_levels=levels,
        default_priority=rng.randint(1, levels), queue_policies=queues,
        max_queue_size=rng.choice([0, 12]), aging_us=rng.choice([0.0, 0.0, 1500.0]),
        deadline_slack_us=rng.choice([0.0, 500.0]),
    )


def run_case(seed: int) -> int:
    """Drive both queues with the same random pushes, cancellations, expiries and takes."""
    rng = random.Random(seed)
    policy = random_policy(rng)
    new, old = fast.BatchQueue(policy), slow.BatchQueue(policy)
    pairs: dict[int, tuple[fast.Request, slow.Request]] = {}
    with_deadlines = rng.random() < 0.6
    now = 0.0
    decisions = 0
    for seq in range(rng.randint(20, 120)):
        now += rng.choice([0.0, 50.0, 300.0, 900.0])
        level = rng.randint(1, policy.priority_levels)
        deadline = now + rng.uniform(500, 6000) if with_deadlines and rng.random() < 0.5 else INF
        pair = (fast.Request(seq, level, now, deadline_us=deadline),
                slow.Request(seq, level, now, deadline_us=deadline))
        assert new.push(pair[0]) == old.push(pair[1])
        pairs[seq] = pair
        if rng.random() < 0.1:  # cancel a random earlier request in both
            victim = pairs[rng.randrange(seq + 1)]
            assert new.remove(victim[0]) == old.remove(victim[1])
        dropped_new = sorted((r.seq, why) for r, why in new.expire(now))
        dropped_old = sorted((r.seq, why) for r, why in old.expire(now))
        assert dropped_new == dropped_old
        for _ in range(rng.randint(0, 2)):  # free instances right now
            batch_new, batch_old = new.take_batch(now), old.take_batch(now)
            assert (None if batch_new is None else [r.seq for r in batch_new]) == (
                None if batch_old is None else [r.seq for r in batch_old])
            decisions += 1
        assert len(new) == len(old)
        if len(old):
            assert new.next_wake_us() == true_wake_us(old, policy)
    return decisions


def true_wake_us(old: slow.BatchQueue, policy: BatchPolicy) -> float:
    """The old queue's next wake-up computed afresh (its cached expiry may be stale-early)."""
    wake = INF
    for index, level in enumerate(old._levels):
        if level:
            wake = min(wake, level[0].enqueue_us + policy.max_delay_us(index + 1))
    if old._delayed:
        head = old._delayed[0]
        wake = min(wake, head.enqueue_us + policy.max_delay_us(head.level))
    for request in old.queued():
        wake = min(wake, request.deadline_us - policy.deadline_slack_us, request.deadline_us)
        if not request.delayed:
            wake = min(wake, request.timeout_at_us)
    return wake


@pytest.mark.parametrize("seed", range(300))
def test_new_queue_decides_as_the_old_one(seed):
    assert run_case(seed) > 0


def test_fresh_batch_sizes_are_what_take_batch_takes_from_a_group_in_an_empty_queue():
    # GIVEN random policies WHEN k requests of the default level (k within the queue limits)
    # arrive together into an empty queue THEN fresh_batch_sizes(policy)[k] is the size
    # take_batch takes at their arrival (0: it waits), or the table is empty where a queue
    # timeout applies
    checked = 0
    for seed in range(300):
        rng = random.Random(seed)
        policy = random_policy(rng)
        sizes = fast.fresh_batch_sizes(policy)
        level = policy.default_priority
        if policy.queue_policy(level).timeout_us:
            assert sizes == ()
            continue
        assert len(sizes) == policy.max_batch_size + 1 and sizes[0] == 0
        now = rng.uniform(0, 1e6)
        limits = [policy.max_queue_size, policy.queue_policy(level).max_queue_size]
        for count in range(1, min([policy.max_batch_size, *filter(None, limits)]) + 1):
            queue = fast.BatchQueue(policy)  # (the batcher queues a larger group as usual)
            for seq in range(count):
                queue.push(fast.Request(seq, level, now))
            batch = queue.take_batch(now)
            assert sizes[count] == (0 if batch is None else len(batch))
            if batch is not None:
                assert [r.seq for r in batch] == list(range(len(batch)))  # arrival order
            checked += 1
    assert checked > 200
