"""How queued requests get their answers: a future each (``DynamicBatcher.submit``), or one call
per batch to the :class:`Replies` of the group they came in (``DynamicBatcher.submit_many``).

A request's ``handle`` is one or the other. A batch's outcome is handed over here once: the
futures are set one by one (each then runs its own done-callbacks), and the requests of one
:class:`Replies` get a single call with all their payloads, so a front end that answers a whole
batch with one write pays no per-request future, callback or loop handle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from aiprof.inference.failures import RequestRejectedError
from aiprof.inference.queue import Request


class Replies(Protocol):
    """Receives the answers of the requests submitted with it, each request once: a batch's
    results in one call, or one error for several of them. Called on the event loop, or, when
    the object has a true ``thread_safe`` attribute, with a batch's results from the model
    thread that computed it (no trip through the loop before they leave)."""

    def results(self, payloads: list[Any], values: list[Any]) -> None:
        """``values[i]`` is the model's result for ``payloads[i]``."""
        ...

    def errors(self, payloads: list[Any], error: BaseException) -> None:
        """These requests get no result: ``error`` says why (a rejection, a failed batch)."""
        ...


def _group(requests: list[Request]) -> Replies | None:
    """The one :class:`Replies` every request of ``requests`` answers to, if there is one."""
    sink = requests[0].handle
    if isinstance(sink, asyncio.Future) or any(r.handle is not sink for r in requests):
        return None
    return sink  # type: ignore[no-any-return]


def thread_safe_group(requests: list[Request]) -> Replies | None:
    """The one :class:`Replies` of ``requests`` if it may be called from a model thread (its
    ``thread_safe`` attribute is true): the batch's results can then leave from there."""
    sink = _group(requests)
    return sink if sink is not None and getattr(sink, "thread_safe", False) else None


def deliver_results(requests: list[Request], values: list[Any]) -> None:
    """Answer a batch with the model's results (``values[i]`` for ``requests[i]``)."""
    if not requests:
        return
    sink = _group(requests)
    if sink is not None:
        sink.results([r.payload for r in requests], values)
        return
    groups: dict[int, tuple[Replies, list[Any], list[Any]]] = {}
    for request, value in zip(requests, values, strict=True):
        handle = request.handle
        if isinstance(handle, asyncio.Future):
            if not handle.done():
                handle.set_result(value)
            continue
        _, payloads, kept = groups.setdefault(id(handle), (handle, [], []))
        payloads.append(request.payload)
        kept.append(value)
    for replies, payloads, kept in groups.values():
        replies.results(payloads, kept)


def deliver_error(requests: list[Request], make_error: Callable[[], BaseException]) -> None:
    """Answer requests with an error; each future gets its own from ``make_error``, each group
    of :class:`Replies` one."""
    groups: dict[int, tuple[Replies, list[Any]]] = {}
    for request in requests:
        handle = request.handle
        if isinstance(handle, asyncio.Future):
            if not handle.done():
                handle.set_exception(make_error())
            continue
        groups.setdefault(id(handle), (handle, []))[1].append(request.payload)
    for replies, payloads in groups.values():
        replies.errors(payloads, make_error())


def rejection(reason: str) -> Callable[[], RequestRejectedError]:
    """A maker of the rejection error for ``reason`` (queue timeout, deadline, shutdown...)."""
    return lambda: RequestRejectedError(reason, f"request rejected: {reason}")
