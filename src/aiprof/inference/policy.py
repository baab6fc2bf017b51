"""Batching policy: the knobs of Triton's dynamic batcher and queue policy, shared by the real
batcher and the simulator.

Field meanings follow Triton's ``ModelDynamicBatching`` / ``ModelQueuePolicy``
(triton-inference-server/common ``protobuf/model_config.proto``; summarized in
../shared/reference/serving-and-distributed.md section A1): priority 1 is the highest; an unset
``preferred_batch_sizes`` means ``[max_batch_size]``; a queue timeout of 0 means none.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Literal

from aiprof.errors import InputError

TimeoutAction = Literal["reject", "delay"]


@dataclass(frozen=True, kw_only=True)
class QueuePolicy:
    """What happens to the requests of one priority level while they wait."""

    max_delay_us: float | None = None
    """Longest a request of this level waits for others to join a batch; None: the batcher's."""
    timeout_us: float = 0.0
    """Queue timeout (0 = none): past it the request is rejected or delayed (``timeout_action``)."""
    timeout_action: TimeoutAction = "reject"
    """``reject`` fails the request; ``delay`` moves it behind every other queued request."""
    max_queue_size: int = 0
    """Most requests of this level queued at once (0 = unlimited); more are rejected at once."""

    def __post_init__(self) -> None:
        if self.max_delay_us is not None:
            check_time_us("max delay", self.max_delay_us)
        check_time_us("queue timeout", self.timeout_us)
        check_count("max queue size", self.max_queue_size)
        if self.max_delay_us is not None and self.max_delay_us < 0:
            raise InputError(f"max delay {self.max_delay_us} us must be >= 0")
        if self.timeout_us < 0:
            raise InputError(f"queue timeout {self.timeout_us} us must be >= 0")
        if self.timeout_action not in ("reject", "delay"):
            raise InputError(f"timeout action {self.timeout_action!r} is not 'reject' or 'delay'")
        if self.max_queue_size < 0:
            raise InputError(f"max queue size {self.max_queue_size} must be >= 0")


@dataclass(frozen=True, kw_only=True)
class BatchPolicy:
    """How requests are grouped into batches and in which order they are served."""

    max_batch_size: int = 8
    """Most requests in one batch."""
    max_queue_delay_us: float = 0.0
    """Longest the oldest request waits for a batch to fill (0: run whatever is queued at once)."""
    preferred_batch_sizes: tuple[int, ...] = ()
    """Sizes run as soon as they can be formed; empty means ``(max_batch_size,)`` as in Triton."""
    priority_levels: int = 1
    """Number of priority levels; 1 is the highest."""
    default_priority: int = 1
    """Level of a request that names none."""
    queue_policies: tuple[tuple[int, QueuePolicy], ...] = ()
    """Per-level queue policy as (level, policy) pairs; levels not listed use ``default_queue``."""
    default_queue: QueuePolicy = field(default_factory=QueuePolicy)
    """Queue policy of levels without their own."""
    max_queue_size: int = 0
    """Most requests queued at once over all levels (0 = unlimited)."""
    aging_us: float = 0.0
    """Anti-starvation: a request is promoted one level per ``aging_us`` waited (0 = never)."""
    deadline_slack_us: float = 0.0
    """Dispatch early when a queued request's deadline is less than this away (expected compute)."""

    def __post_init__(self) -> None:
        check_count("max batch size", self.max_batch_size)
        check_count("priority levels", self.priority_levels)
        check_count("default priority", self.default_priority)
        check_count("max queue size", self.max_queue_size)
        for size in self.preferred_batch_sizes:
            check_count("preferred batch size", size)
        for name, value in (("max queue delay", self.max_queue_delay_us),
                            ("aging", self.aging_us), ("deadline slack", self.deadline_slack_us)):
            check_time_us(name, value)
        if self.max_batch_size < 1:
            raise InputError(f"max batch size {self.max_batch_size} must be at least 1")
        if self.max_queue_delay_us < 0:
            raise InputError(f"max queue delay {self.max_queue_delay_us} us must be >= 0")
        bad = [s for s in self.preferred_batch_sizes if not 1 <= s <= self.max_batch_size]
        if bad:
            raise InputError(f"preferred batch sizes {bad} are outside 1..{self.max_batch_size}")
        if self.priority_levels < 1:
            raise InputError(f"priority levels {self.priority_levels} must be at least 1")
        if not 1 <= self.default_priority <= self.priority_levels:
            raise InputError(
                f"default priority {self.default_priority} is outside 1..{self.priority_levels}"
            )
        for level, _ in self.queue_policies:
            if not 1 <= level <= self.priority_levels:
                raise InputError(
                    f"queue policy for level {level} is outside 1..{self.priority_levels}"
                )
        if self.max_queue_size < 0 or self.aging_us < 0 or self.deadline_slack_us < 0:
            raise InputError("max queue size, aging and deadline slack must be >= 0")

    @property
    def preferred(self) -> tuple[int, ...]:
        """Preferred sizes, ascending; ``(max_batch_size,)`` when none were given."""
        return tuple(sorted(set(self.preferred_batch_sizes))) or (self.max_batch_size,)

    def queue_policy(self, level: int) -> QueuePolicy:
        """The queue policy of a priority level."""
        for candidate, policy in self.queue_policies:
            if candidate == level:
                return policy
        return self.default_queue

    def max_delay_us(self, level: int) -> float:
        """Longest a request of ``level`` waits for a batch to fill."""
        own = self.queue_policy(level).max_delay_us
        return self.max_queue_delay_us if own is None else own


def check_count(name: str, value: object) -> None:
    """An ``InputError`` unless ``value`` is an integer (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{name} must be an integer, not {value!r}")


def check_time_us(name: str, value: object) -> None:
    """An ``InputError`` unless ``value`` is a real number of microseconds (not NaN, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise InputError(f"{name} must be a number of microseconds, not {value!r}")
