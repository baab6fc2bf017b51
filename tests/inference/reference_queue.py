"""The batch queue as it was before its O(log n) rewrite (aiprof, 2026-11-30): the oracle that
tests/inference/test_queue.py compares the new one against. Every operation scans the queue.

The original docstring follows.

The batch-forming queue: a pure state machine driven by ``now``, with no clock and no I/O.

The asyncio batcher and the discrete-event simulator both drive this one class, so the simulator
predicts the same policy decisions the real batcher takes. The decision rule follows Triton's
``GetDynamicBatch`` (triton-inference-server/core ``src/dynamic_batch_scheduler.cc``; steps 3-7 of
the serving reference, section A1): run the largest preferred size that can
be formed; otherwise run what is pending once the oldest request waited its maximum delay.
Extensions beyond Triton (chapter exercise 4): requests nearest their deadline first inside a level,
aging against starvation, and dispatch when a deadline is within ``deadline_slack_us``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiprof.inference.policy import BatchPolicy

INF = math.inf


@dataclass(slots=True, eq=False)
class Request:
    """One queued request. Times are microseconds on the batcher's clock."""

    seq: int
    level: int
    enqueue_us: float
    deadline_us: float = INF
    timeout_at_us: float = INF
    payload: Any = None
    handle: Any = None
    delayed: bool = False


class BatchQueue:
    """Queued requests by priority level, plus Triton's delayed queue for timed-out requests."""

    def __init__(self, policy: BatchPolicy) -> None:
        self.policy = policy
        self._levels: list[deque[Request]] = [deque() for _ in range(policy.priority_levels)]
        self._delayed: deque[Request] = deque()
        self._max_delay = [policy.max_delay_us(lv) for lv in range(1, policy.priority_levels + 1)]
        self._queues = [policy.queue_policy(lv) for lv in range(1, policy.priority_levels + 1)]
        self._size = 0
        self._num_deadlines = 0
        self._next_expiry_us = INF
        self._simple = policy.priority_levels == 1 and policy.aging_us == 0

    def __len__(self) -> int:
        return self._size

    def push(self, request: Request) -> str | None:
        """Queue a request; returns ``"queue_full"`` (and queues nothing) when a limit is hit."""
        level = self._levels[request.level - 1]
        own_limit = self._queues[request.level - 1].max_queue_size
        if (self.policy.max_queue_size and self._size >= self.policy.max_queue_size) or (
            own_limit and len(level) >= own_limit
        ):
            return "queue_full"
        timeout = self._queues[request.level - 1].timeout_us
        if timeout and request.timeout_at_us == INF:
            request.timeout_at_us = request.enqueue_us + timeout
        level.append(request)
        self._size += 1
        if request.deadline_us != INF:
            self._num_deadlines += 1
        self._next_expiry_us = min(self._next_expiry_us, request.timeout_at_us, request.deadline_us)
        return None

    def remove(self, request: Request) -> bool:
        """Take a request out (cancellation); False if it is no longer queued."""
        queue = self._delayed if request.delayed else self._levels[request.level - 1]
        try:
            queue.remove(request)
        except ValueError:
            return False
        self._forget(request)
        return True

    def _forget(self, request: Request) -> None:
        self._size -= 1
        if request.deadline_us != INF:
            self._num_deadlines -= 1

    def expire(self, now_us: float) -> list[tuple[Request, str]]:
        """Remove requests past their deadline or queue timeout; returns them with the reason.

        A timed-out request whose level's action is ``delay`` moves to the delayed queue instead.
        """
        if now_us < self._next_expiry_us:
            return []
        dropped: list[tuple[Request, str]] = []
        next_expiry = INF
        for queue in [*self._levels, self._delayed]:
            kept: deque[Request] = deque()
            for request in queue:
                if request.deadline_us <= now_us:
                    dropped.append((request, "deadline"))
                elif request.timeout_at_us <= now_us and not request.delayed:
                    if self._queues[request.level - 1].timeout_action == "delay":
                        request.delayed = True
                        self._delayed.append(request)
                        next_expiry = min(next_expiry, request.deadline_us)
                    else:
                        dropped.append((request, "timeout"))
                else:
                    kept.append(request)
                    stop = request.deadline_us if request.delayed else request.timeout_at_us
                    next_expiry = min(next_expiry, request.deadline_us, stop)
            queue.clear()
            queue.extend(kept)
        for request, _ in dropped:
            self._forget(request)
        self._next_expiry_us = next_expiry
        return dropped

    def _ordered(self, now_us: float, limit: int) -> list[Request]:
        """The first ``limit`` requests in service order."""
        if self._simple and self._num_deadlines == 0:
            head = [r for _, r in zip(range(limit), self._levels[0], strict=False)]
        else:
            aging = self.policy.aging_us
            keyed = []
            for request in (r for level in self._levels for r in level):
                level = request.level
                if aging:
                    level = max(1, level - int((now_us - request.enqueue_us) // aging))
                keyed.append((level, request.deadline_us, request.seq, request))
            keyed.sort(key=lambda item: item[:3])
            head = [item[3] for item in keyed[:limit]]
        if len(head) < limit:
            head.extend(r for _, r in zip(range(limit - len(head)), self._delayed, strict=False))
        return head

    def _delay_exceeded(self, now_us: float) -> bool:
        for index, queue in enumerate(self._levels):
            if queue and now_us >= queue[0].enqueue_us + self._max_delay[index]:
                return True
        if self._delayed:
            head = self._delayed[0]
            if now_us >= head.enqueue_us + self._max_delay[head.level - 1]:
                return True
        return self._deadline_near(now_us)

    def _deadline_near(self, now_us: float) -> bool:
        if not self._num_deadlines:
            return False
        slack = self.policy.deadline_slack_us
        return any(r.deadline_us - slack <= now_us for r in self.queued())

    def queued(self) -> list[Request]:
        """Every queued request (main levels first, then the delayed queue)."""
        return [r for queue in [*self._levels, self._delayed] for r in queue]

    def take_batch(self, now_us: float) -> list[Request] | None:
        """The batch to run now, removed from the queue; None if the policy says wait."""
        pending = min(self._size, self.policy.max_batch_size)
        if pending == 0:
            return None
        fitting = [p for p in self.policy.preferred if p <= pending]
        if fitting:
            size = fitting[-1]
        elif self._delay_exceeded(now_us):
            size = pending
        else:
            return None
        batch = self._ordered(now_us, size)
        self._take(batch)
        return batch

    def _take(self, batch: list[Request]) -> None:
        if self._simple and self._num_deadlines == 0 and not any(r.delayed for r in batch):
            main = self._levels[0]
            for _ in batch:
                main.popleft()
        else:
            chosen = {id(r) for r in batch}
            for queue in [*self._levels, self._delayed]:
                kept = [r for r in queue if id(r) not in chosen]
                queue.clear()
                queue.extend(kept)
        for request in batch:
            self._forget(request)

    def next_wake_us(self) -> float:
        """When the decision may change with no new arrival: a delay ends or a request expires."""
        wake = self._next_expiry_us
        for index, queue in enumerate(self._levels):
            if queue:
                wake = min(wake, queue[0].enqueue_us + self._max_delay[index])
        if self._delayed:
            head = self._delayed[0]
            wake = min(wake, head.enqueue_us + self._max_delay[head.level - 1])
        if self._num_deadlines:
            slack = self.policy.deadline_slack_us
            wake = min(wake, min(r.deadline_us - slack for r in self.queued()))
        return wake
