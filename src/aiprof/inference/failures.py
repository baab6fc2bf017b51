"""The answers a batcher request gets when it gets no result, and the checks on its arguments."""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence, Set
from typing import Any

from aiprof.errors import AiprofError, InputError


class RequestRejectedError(AiprofError):
    """A request was answered without being computed; ``reason`` says why.

    Reasons: ``queue_full``, ``overload`` (its estimated wait exceeded its time budget),
    ``timeout``, ``deadline``, ``cancelled``, ``shutdown``.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class QueueFullError(RequestRejectedError):
    """The queue was at its ``max_queue_size`` when the request arrived."""


class BatchFailedError(AiprofError):
    """The request's batch was given to the model but no result came back; ``reason`` says why.

    Reasons: ``interrupted`` (the model raised a ``BaseException`` that is not an ``Exception``:
    ``CancelledError``, ``GeneratorExit``, ``KeyboardInterrupt``, ``SystemExit``; it is the
    ``__cause__``), ``compute_timeout``, ``shutdown`` (the drain timeout ran out while it
    computed) and ``bad_output``. A model that raises an ordinary ``Exception`` fails its requests
    with that exception itself.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ModelOutputError(BatchFailedError, InputError):
    """The model returned something other than one result per input."""

    def __init__(self, message: str) -> None:
        super().__init__("bad_output", message)


def interrupted(error: BaseException) -> BatchFailedError:
    """The answer for a batch whose model raised a ``BaseException`` that is no ``Exception``."""
    failure = BatchFailedError(
        "interrupted", f"the model raised {type(error).__name__} for this batch; the batcher "
        "replaced the instance and keeps serving")
    failure.__cause__ = error
    return failure


def check_results(results: Any, size: int) -> list[Any] | ModelOutputError:
    """The model's results as a list of ``size``, or the error that says what it returned.

    Any sized iterable of ``size`` (list, tuple, array, tensor) is accepted; strings, bytes,
    mappings and sets are not (their items are no per-input results, or have no order)."""
    if type(results) is list and len(results) == size:  # the common case, without ABC checks
        return results
    if isinstance(results, str | bytes | bytearray | Mapping | Set):
        return ModelOutputError(
            f"the model returned a {type(results).__name__} for {size} inputs; it must return a "
            "list with one result per input")
    try:
        count = len(results)
        if count == size:
            return results if isinstance(results, list) else list(results)
    except Exception:  # noqa: BLE001 - no len() or no iteration: not a list of results
        return ModelOutputError(
            f"the model returned {type(results).__name__} for {size} inputs; it must return a "
            "list with one result per input")
    return ModelOutputError(f"the model returned {count} results for {size} inputs")


def check_priority(priority: object, levels: int) -> int:
    """A request's priority level, or an ``InputError`` saying what is wrong with it."""
    if type(priority) is int and 1 <= priority <= levels:  # the common case, without ABC checks
        return priority
    if isinstance(priority, bool) or not isinstance(priority, numbers.Integral):
        raise InputError(f"priority {priority!r} must be an integer level in 1..{levels}")
    level = int(priority)
    if not 1 <= level <= levels:
        raise InputError(f"priority {level} is outside 1..{levels}")
    return level


def check_budget_us(name: str, value: object) -> float:
    """A request's deadline or timeout in microseconds (``inf``: none), or an ``InputError``."""
    if type(value) is float and value >= 0:  # the common case (NaN fails the comparison)
        return value
    if (isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value)
            or value < 0):
        raise InputError(f"{name} {value!r} must be a number of microseconds >= 0 (or None)")
    return float(value)


def check_priorities(priorities: Sequence[int] | None, count: int, default: int,
                     levels: int) -> Iterable[int]:
    """The priority level of each of ``count`` requests (``default`` for all when None)."""
    if priorities is None:
        return itertools.repeat(default, count)
    if len(priorities) != count:
        raise InputError(f"{len(priorities)} priorities for {count} requests")
    return [check_priority(p, levels) for p in priorities]


def check_deadlines_us(deadlines_in_us: Sequence[float] | None, count: int) -> Iterable[float]:
    """Each of ``count`` requests' deadline budget (none when None)."""
    if deadlines_in_us is None:
        return itertools.repeat(math.inf, count)
    if len(deadlines_in_us) != count:
        raise InputError(f"{len(deadlines_in_us)} deadlines for {count} requests")
    return [check_budget_us("deadline", d) for d in deadlines_in_us]
