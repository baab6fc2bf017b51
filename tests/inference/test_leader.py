"""The leader/follower front end: a leader thread reads and runs short batches itself; the loop
reads, and hands batches to the model threads, for a model whose calls block; a leader whose
batch hangs loses the reading at once, so only that batch waits.

GIVEN a separate load-generator process offering Poisson load through the Unix socket WHEN the
model costs nothing, or sleeps milliseconds per batch, or hangs on one batch THEN every request
is answered once, and who read the connection is what the model's calls call for.
"""

from __future__ import annotations

import functools
import threading
import time

import pytest

from aiprof.inference import serving
from aiprof.inference.arrivals import poisson_arrivals
from aiprof.inference.batcher import DynamicBatcher
from aiprof.inference.leader import WATCH_S, LeaderServer
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.serving import OpenLoad, serve

pytestmark = pytest.mark.timing


def _load(rate_rps, count, seed=0):
    return OpenLoad(arrivals_us=tuple(poisson_arrivals(rate_rps, count, seed=seed).tolist()))


def _front_ends():
    made: list[LeaderServer] = []

    def make(batcher, num_slots, closed):
        made.append(LeaderServer(batcher, num_slots, closed))
        return made[-1]

    return made, make


def _answered_once(run):
    assert run.num_lost == 0 and run.num_duplicated == 0
    assert run.num_ok + sum(run.rejected.values()) + sum(run.failed.values()) == run.num_requests


def zero_cost(batch):
    return [rid for rid, _slot in batch]


def test_a_leader_serves_a_model_that_costs_nothing_without_the_loop():
    made, make = _front_ends()
    threads: list[str] = []

    def model(batch):
        threads.append(threading.current_thread().name)
        return zero_cost(batch)

    run = serve(model, BatchPolicy(max_batch_size=32), _load(4000, 2000), num_slots=1,
                front_end=make)
    _answered_once(run)
    assert run.num_ok == run.num_requests
    # leaders ran most batches: a model thread only those the loop took while it read, after
    # a stall of this shared machine (a leader's batch past WATCH_S) gave it the reading, and
    # the second of two batches taken at once from requests that piled up meanwhile
    led = sum(name.startswith("aiprof-batcher-model-leader-") for name in threads)
    assert led > 0.5 * len(threads)
    assert made[0].num_leaders <= 1 + (len(threads) - led)  # a new one only after the loop
    assert run.probes is not None  # the loop woke for its timers, not per read
    assert run.probes.loop.num_iterations < 0.2 * run.num_requests


def test_a_model_whose_calls_block_is_read_by_the_loop_and_its_batches_overlap():
    made, make = _front_ends()
    spans: list[tuple[float, float]] = []

    def sleeping(batch):
        begin = time.monotonic()
        time.sleep(2e-3)
        spans.append((begin, time.monotonic()))
        return zero_cost(batch)

    policy = BatchPolicy(max_batch_size=4, max_queue_delay_us=500)
    run = serve(sleeping, policy, _load(3000, 600), num_slots=1, front_end=make)
    _answered_once(run)
    assert run.num_ok == run.num_requests
    assert made[0].num_leaders == 1  # the first batch told: the loop reads from then on
    spans.sort()
    overlapping = sum(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False))
    assert overlapping > len(spans) / 4  # a batch is taken in while another computes


def test_a_hung_batch_in_the_leader_stops_only_itself():
    made, make = _front_ends()
    hang = threading.Event()

    def hangs_once(batch):
        if any(rid == 300 for rid, _ in batch):
            hang.wait(1.0)  # past the compute timeout below
        return zero_cost(batch)

    batcher = functools.partial(DynamicBatcher, compute_timeout_us=200e3)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(serving, "DynamicBatcher", batcher)
        run = serve(hangs_once, BatchPolicy(max_batch_size=8), _load(2000, 1500), num_slots=1,
                    front_end=make)
    hang.set()
    _answered_once(run)
    failed = run.failed.get("compute_timeout", 0)
    assert set(run.failed) == {"compute_timeout"} and 1 <= failed <= 8  # the hung batch only
    assert run.num_ok == run.num_requests - failed
    # the loop took the reading back within a few checks: the other instance served meanwhile
    assert run.latency_p99_us < 100 * WATCH_S * 1e6
    assert made[0].num_leaders >= 1


def test_a_coroutine_model_is_read_by_the_loop():
    made, make = _front_ends()

    async def model(batch):
        return zero_cost(batch)

    run = serve(model, BatchPolicy(max_batch_size=8), _load(2000, 400), num_slots=1,
                front_end=make)
    _answered_once(run)
    assert run.num_ok == run.num_requests
    assert made[0].num_leaders == 0  # its batches are tasks on the loop: no thread to lead
