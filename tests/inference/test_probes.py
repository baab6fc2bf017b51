"""The serving process's probes, on real collections, a real event loop and real threads.

GIVEN the garbage collector, an event loop and threads doing known work WHEN the probes watch
them THEN they report the collections, the longest loop iteration and each thread's CPU time.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref

from aiprof.inference.probes import GcPauses, TimedSelector, frozen_heap, thread_cpu_ns


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_every_collection_is_timed_with_its_generation():
    pauses = GcPauses()
    pauses.start()
    gc.collect()
    gc.collect(0)
    summary = pauses.stop()
    assert summary.num_collections[2] >= 1 and summary.num_collections[0] >= 1
    assert summary.max_pause_us > 0 and summary.total_pause_us >= summary.max_pause_us
    assert summary.max_pause_at_ns > 0
    gc.collect()
    assert pauses.stop().num_collections == summary.num_collections  # stopped: no more


def test_what_lived_before_the_run_is_left_alone_by_its_collections():
    held = [_Node(), _Node()]
    held[0].other, held[1].other = held[1], held[0]  # a reference cycle
    node = weakref.ref(held[0])
    before = gc.get_freeze_count()
    with frozen_heap() as count:
        assert count > before and gc.get_freeze_count() > before
        held.clear()  # the cycle is garbage now, but frozen
        gc.collect()
        assert node() is not None  # not even a full collection walks the frozen objects
    assert gc.get_freeze_count() == before
    gc.collect()
    assert node() is None  # unfrozen when the run ended: the next collection frees it


def test_the_loop_probe_sees_a_callback_that_blocks_it():
    selector = TimedSelector()
    loop = asyncio.SelectorEventLoop(selector)
    try:
        async def work() -> None:
            await asyncio.sleep(0.001)
            selector.reset()
            await asyncio.sleep(0.001)
            time.sleep(0.03)  # the loop's thread stops for 30 ms inside one callback
            await asyncio.sleep(0.001)

        loop.run_until_complete(work())
    finally:
        loop.close()
    summary = selector.summary()
    assert summary.max_iteration_us >= 30_000 and summary.num_iterations >= 2
    assert summary.busy_us >= summary.max_iteration_us


def test_each_thread_cpu_time_is_its_own():
    spun, release = threading.Event(), threading.Event()

    def spin() -> None:
        begin = time.thread_time()
        while time.thread_time() - begin < 0.05:
            pass
        spun.set()
        release.wait()

    def sleep() -> None:
        release.wait()

    busy, idle = threading.Thread(target=spin), threading.Thread(target=sleep)
    busy.start()
    idle.start()
    assert spun.wait(30)
    busy_ns, idle_ns = thread_cpu_ns(busy), thread_cpu_ns(idle)
    release.set()
    busy.join()
    idle.join()
    assert busy_ns >= 50_000_000
    assert idle_ns < 10_000_000
    assert thread_cpu_ns(busy) == 0  # ended: nothing to read
