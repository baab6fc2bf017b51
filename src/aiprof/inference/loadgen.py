"""Load generation against a live :class:`DynamicBatcher`, as perf_analyzer does it
(../shared/reference/serving-and-distributed.md section A2): open loop (requests at given times,
whatever the responses) and closed loop (N requests outstanding at all times).

On Linux the default asyncio loop waits in ``epoll``, whose timeout is rounded up to whole
milliseconds (CPython ``selectors.EpollSelector.select``); :func:`precise_loop` gives a loop on
``select()``, whose timeout has microsecond resolution, so arrivals and batching delays keep their
sub-millisecond timing.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable
from typing import Any

import numpy as np

from aiprof.errors import AiprofError, InputError
from aiprof.inference.batcher import DynamicBatcher
from aiprof.inference.clock import LoopClock


def precise_loop() -> asyncio.AbstractEventLoop:
    """An event loop whose timers keep microsecond resolution (select-based)."""
    return asyncio.SelectorEventLoop(selectors.SelectSelector())


def run_precise(coroutine: Any) -> Any:
    """Run a coroutine to completion on :func:`precise_loop`."""
    with asyncio.Runner(loop_factory=precise_loop) as runner:
        return runner.run(coroutine)


async def open_loop(
    batcher: DynamicBatcher,
    arrivals_us: np.ndarray,
    payload: Callable[[int], Any] = lambda index: index,
) -> list[Any]:
    """Submit request i at ``arrivals_us[i]`` after now; wait for every answer.

    Returns each request's result or exception, in arrival order.
    """
    if len(arrivals_us) == 0:
        raise InputError("no arrivals to send")
    clock = LoopClock()
    start = clock.now_us()
    futures: list[asyncio.Future[Any]] = []
    for index, when in enumerate(np.asarray(arrivals_us, dtype=np.float64)):

        def send(i: int = index) -> None:
            try:
                futures.append(batcher.submit(payload(i)))
            except AiprofError as error:  # refused (not started, bad payload): an answer too
                refused: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                refused.set_exception(error)
                futures.append(refused)

        clock.call_at(start + float(when), send)
    await clock.sleep(float(arrivals_us[-1]))
    while len(futures) < len(arrivals_us):
        await asyncio.sleep(0)
    return await asyncio.gather(*futures, return_exceptions=True)


async def closed_loop(
    batcher: DynamicBatcher,
    concurrency: int,
    num_requests: int,
    payload: Callable[[int], Any] = lambda index: index,
) -> list[Any]:
    """Keep ``concurrency`` requests outstanding until ``num_requests`` were answered."""
    if concurrency < 1 or num_requests < 1:
        raise InputError("concurrency and number of requests must be at least 1")
    results: list[Any] = []
    counter = iter(range(num_requests))

    async def worker() -> None:
        for index in counter:
            try:
                results.append(await batcher.infer(payload(index)))
            except Exception as error:  # an answer too: rejected or failed
                results.append(error)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results
