"""The batch-forming queue: a pure state machine driven by ``now``, with no clock and no I/O.

The asyncio batcher and the discrete-event simulator both drive this one class, so the simulator
predicts the same policy decisions the real batcher takes. The decision rule follows Triton's
``GetDynamicBatch`` (triton-inference-server/core ``src/dynamic_batch_scheduler.cc``; steps 3-7 of
the serving reference, section A1): run the largest preferred size that can be formed; otherwise run
what is pending once the oldest request waited its maximum delay. Extensions beyond Triton (chapter
exercise 4): requests nearest their deadline first inside a level, aging against starvation, and
dispatch when a deadline is within ``deadline_slack_us``.

Cost: every structure is a heap or a deque with lazy deletion (a request that left is skipped when
it reaches the front; a structure is rebuilt once it holds more stale entries than live ones), so a
push, a cancellation and each request expired or taken cost O(log n) for n queued. The one
exception is aging combined with deadlines, where the service order changes with time inside a
level: forming a batch then scans the queue, O(n log b).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiprof.inference.policy import BatchPolicy

INF = math.inf
_COMPACT_SLACK = 1024
"""Stale entries a structure may hold beyond its live ones before it is rebuilt (amortized)."""


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
    queued: bool = False


_Entry = tuple[float, int, Request]


def _in_main(request: Request) -> bool:
    return request.queued and not request.delayed


def _in_delayed(request: Request) -> bool:
    return request.queued and request.delayed


def _expiry_of(request: Request) -> float:
    """When a queued request must next be looked at: its deadline, or its timeout first."""
    return request.deadline_us if request.delayed else min(request.deadline_us,
                                                           request.timeout_at_us)


def fresh_batch_sizes(policy: BatchPolicy) -> tuple[int, ...]:
    """What :meth:`BatchQueue.take_batch` takes from ``k`` requests of the default level that
    arrived together into an empty queue, at their arrival: ``sizes[k]`` for ``k`` in
    ``0..max_batch_size`` within the queue's limits (0: it waits). Empty when the default
    level has a queue timeout, the one rule that could answer such requests otherwise.

    Fresh requests share one arrival time, have no deadline of their own, and aging has not
    promoted any, so the rule of ``take_batch`` reduces to their count: the largest preferred
    size that fits, else all of them once the level's delay is over (at once for a delay of
    0). ``DynamicBatcher.submit_many`` dispatches such a group without queueing it."""
    level = policy.default_priority
    if policy.queue_policy(level).timeout_us:
        return ()
    at_once = policy.max_delay_us(level) <= 0
    sizes = [0]
    for count in range(1, policy.max_batch_size + 1):
        fitting = [p for p in policy.preferred if p <= count]
        sizes.append(fitting[-1] if fitting else (count if at_once else 0))
    return tuple(sizes)


class BatchQueue:
    """Queued requests by priority level, plus Triton's delayed queue for timed-out requests."""

    def __init__(self, policy: BatchPolicy) -> None:
        self.policy = policy
        levels = policy.priority_levels
        self._order: list[list[_Entry]] = [[] for _ in range(levels)]  # (deadline, seq) heaps
        self._arrival: list[deque[Request]] = [deque() for _ in range(levels)]  # oldest first
        self._live = [0] * levels
        self._delayed: deque[Request] = deque()
        self._num_delayed = 0
        self._expiry: list[_Entry] = []  # (deadline or timeout, seq) heap
        self._num_expiring = 0
        self._deadlines: list[_Entry] = []  # (deadline, seq) heap over main and delayed
        self._max_delay = [policy.max_delay_us(lv) for lv in range(1, levels + 1)]
        self._queues = [policy.queue_policy(lv) for lv in range(1, levels + 1)]
        self._size = 0
        self._num_deadlines = 0

    def __len__(self) -> int:
        return self._size

    def push(self, request: Request) -> str | None:
        """Queue a request; returns ``"queue_full"`` (and queues nothing) when a limit is hit."""
        index = request.level - 1
        own_limit = self._queues[index].max_queue_size
        if (self.policy.max_queue_size and self._size >= self.policy.max_queue_size) or (
            own_limit and self._live[index] >= own_limit
        ):
            return "queue_full"
        timeout = self._queues[index].timeout_us
        if timeout and request.timeout_at_us == INF:
            request.timeout_at_us = request.enqueue_us + timeout
        request.queued = True
        request.delayed = False
        heapq.heappush(self._order[index], (request.deadline_us, request.seq, request))
        self._arrival[index].append(request)
        self._live[index] += 1
        self._size += 1
        if request.deadline_us != INF:
            self._num_deadlines += 1
            heapq.heappush(self._deadlines, (request.deadline_us, request.seq, request))
        self._watch(request)
        return None

    def _watch(self, request: Request) -> None:
        when = _expiry_of(request)
        if when != INF:
            self._num_expiring += 1
            heapq.heappush(self._expiry, (when, request.seq, request))

    def remove(self, request: Request) -> bool:
        """Take a request out (cancellation); False if it is no longer queued."""
        if not request.queued:
            return False
        self._forget(request)
        self._compact()
        return True

    def _forget(self, request: Request) -> None:
        if request.delayed:
            self._num_delayed -= 1
        else:
            self._live[request.level - 1] -= 1
        if _expiry_of(request) != INF:
            self._num_expiring -= 1
        request.queued = False
        self._size -= 1
        if request.deadline_us != INF:
            self._num_deadlines -= 1

    def _compact(self) -> None:
        """Rebuild any structure whose stale entries outnumber its live ones (amortized O(1))."""
        for index, heap in enumerate(self._order):
            limit = 2 * self._live[index] + _COMPACT_SLACK
            if len(heap) > limit:
                heap[:] = [entry for entry in heap if _in_main(entry[2])]
                heapq.heapify(heap)
            arrival = self._arrival[index]
            if len(arrival) > limit:  # taken out of arrival order: stale entries behind the head
                kept = [r for r in arrival if _in_main(r)]
                arrival.clear()
                arrival.extend(kept)
        if len(self._delayed) > 2 * self._num_delayed + _COMPACT_SLACK:
            kept = [r for r in self._delayed if _in_delayed(r)]
            self._delayed.clear()
            self._delayed.extend(kept)
        if len(self._expiry) > 2 * self._num_expiring + _COMPACT_SLACK:
            self._expiry = [e for e in self._expiry if e[2].queued and e[0] == _expiry_of(e[2])]
            heapq.heapify(self._expiry)
        if len(self._deadlines) > 2 * self._num_deadlines + _COMPACT_SLACK:
            self._deadlines = [e for e in self._deadlines if e[2].queued]
            heapq.heapify(self._deadlines)

    def expire(self, now_us: float) -> list[tuple[Request, str]]:
        """Remove requests past their deadline or queue timeout; returns them with the reason.

        A timed-out request whose level's action is ``delay`` moves to the delayed queue instead.
        """
        dropped: list[tuple[Request, str]] = []
        heap = self._expiry
        while heap and heap[0][0] <= now_us:
            when, _, request = heapq.heappop(heap)
            if not request.queued or when != _expiry_of(request):
                continue  # stale: left the queue, or moved to the delayed queue since
            if request.deadline_us <= now_us:
                self._forget(request)
                dropped.append((request, "deadline"))
            elif self._queues[request.level - 1].timeout_action == "delay":
                self._live[request.level - 1] -= 1
                self._num_expiring -= 1
                request.delayed = True
                self._num_delayed += 1
                self._delayed.append(request)
                self._watch(request)
            else:
                self._forget(request)
                dropped.append((request, "timeout"))
        if dropped:
            self._compact()
        return dropped

    def next_expiry_us(self) -> float:
        """When the next queued request passes its deadline or queue timeout (INF: none)."""
        heap = self._expiry
        while heap and (not heap[0][2].queued or heap[0][0] != _expiry_of(heap[0][2])):
            heapq.heappop(heap)
        return heap[0][0] if heap else INF

    def _oldest(self, index: int) -> Request | None:
        arrival = self._arrival[index]
        while arrival and not _in_main(arrival[0]):
            arrival.popleft()
        return arrival[0] if arrival else None

    def _delayed_head(self) -> Request | None:
        while self._delayed and not _in_delayed(self._delayed[0]):
            self._delayed.popleft()
        return self._delayed[0] if self._delayed else None

    def _first(self, index: int) -> Request | None:
        """The request of level ``index + 1`` served first (nearest deadline, then arrival)."""
        heap = self._order[index]
        while heap and not _in_main(heap[0][2]):
            heapq.heappop(heap)
        return heap[0][2] if heap else None

    def _min_deadline_us(self) -> float:
        heap = self._deadlines
        while heap and not heap[0][2].queued:
            heapq.heappop(heap)
        return heap[0][0] if heap else INF

    def _delay_exceeded(self, now_us: float) -> bool:
        for index in range(len(self._order)):
            oldest = self._oldest(index)
            if oldest is not None and now_us >= oldest.enqueue_us + self._max_delay[index]:
                return True
        head = self._delayed_head()
        if head is not None and now_us >= head.enqueue_us + self._max_delay[head.level - 1]:
            return True
        return self._deadline_near(now_us)

    def _deadline_near(self, now_us: float) -> bool:
        if not self._num_deadlines:
            return False
        return self._min_deadline_us() - self.policy.deadline_slack_us <= now_us

    def queued(self) -> list[Request]:
        """Every queued request (main levels first, then the delayed queue)."""
        main = [r for arrival in self._arrival for r in arrival if _in_main(r)]
        return main + [r for r in self._delayed if _in_delayed(r)]

    def ahead_of(self, level: int) -> int:
        """Requests queued at ``level`` or higher: served before a new one of ``level``."""
        return sum(self._live[:level])

    def take_batch(self, now_us: float, *, flush: bool = False) -> list[Request] | None:
        """The batch to run now, removed from the queue; None if the policy says wait.

        ``flush``: no more requests will come (shutdown), so run what is pending without waiting.
        """
        pending = min(self._size, self.policy.max_batch_size)
        if pending == 0:
            return None
        fitting = [p for p in self.policy.preferred if p <= pending]
        if fitting:
            size = fitting[-1]
        elif flush or self._delay_exceeded(now_us):
            size = pending
        else:
            return None
        batch = self._take_main(now_us, size)
        while len(batch) < size:
            head = self._delayed_head()
            if head is None:
                break
            self._delayed.popleft()
            self._forget(head)
            batch.append(head)
        self._compact()
        return batch

    def _take_main(self, now_us: float, size: int) -> list[Request]:
        """Up to ``size`` main-queue requests in service order: (effective level, deadline, seq)."""
        if self.policy.aging_us and self._num_deadlines:
            return self._take_scanning(now_us, size)
        batch: list[Request] = []
        if not self.policy.aging_us:
            for index in range(len(self._order)):
                while len(batch) < size and (request := self._first(index)) is not None:
                    heapq.heappop(self._order[index])
                    self._forget(request)
                    batch.append(request)
            return batch
        # aging, no deadlines: inside a level, older requests have the better effective level,
        # so each level is already sorted by (effective level, seq); merge the levels
        heads: list[tuple[int, int, int]] = []
        for index in range(len(self._order)):
            if (request := self._first(index)) is not None:
                heads.append((self._effective_level(request, now_us), request.seq, index))
        heapq.heapify(heads)
        while heads and len(batch) < size:
            _, _, index = heapq.heappop(heads)
            _, _, request = heapq.heappop(self._order[index])
            self._forget(request)
            batch.append(request)
            if (following := self._first(index)) is not None:
                key = (self._effective_level(following, now_us), following.seq, index)
                heapq.heappush(heads, key)
        return batch

    def _take_scanning(self, now_us: float, size: int) -> list[Request]:
        candidates = (entry[2] for heap in self._order for entry in heap if _in_main(entry[2]))
        batch = heapq.nsmallest(size, candidates, key=lambda r: (
            self._effective_level(r, now_us), r.deadline_us, r.seq))
        for request in batch:
            self._forget(request)
        self._compact()
        return batch

    def _effective_level(self, request: Request, now_us: float) -> int:
        aging = self.policy.aging_us
        return max(1, request.level - int((now_us - request.enqueue_us) // aging))

    def next_wake_us(self) -> float:
        """When the decision may change with no new arrival: a delay ends or a request expires."""
        wake = self.next_expiry_us()
        for index in range(len(self._order)):
            oldest = self._oldest(index)
            if oldest is not None:
                wake = min(wake, oldest.enqueue_us + self._max_delay[index])
        head = self._delayed_head()
        if head is not None:
            wake = min(wake, head.enqueue_us + self._max_delay[head.level - 1])
        if self._num_deadlines:
            wake = min(wake, self._min_deadline_us() - self.policy.deadline_slack_us)
        return wake
