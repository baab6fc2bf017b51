"""The serving path with a real load-generator process: every request answered exactly once, under
overload, failing batches and an unbounded queue; the server's and the client's counts agree.

GIVEN a model function that sleeps T(b) = 2 ms + 0.25 ms per request in each of the two model
instances (max batch 8: capacity 2 x 8 / 4 ms = 4,000 req/s) WHEN a separate process offers
Poisson load through the Unix socket THEN each request gets one answer (served, rejected or
failed) and none is lost.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from aiprof.inference.arrivals import poisson_arrivals
from aiprof.inference.loadclient import main as loadclient_main
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.serving import ClosedLoad, OpenLoad, serve
from aiprof.inference.wire import REASONS, REQUEST, RESPONSE, RecordReader, encode_requests

pytestmark = pytest.mark.timing

CAPACITY_RPS = 2 * 8 / 4e-3


def sleeping(batch):
    time.sleep(2e-3 + 0.25e-3 * len(batch))
    return [rid for rid, _slot in batch]


def _load(rate_rps, count, seed=0):
    return OpenLoad(arrivals_us=tuple(poisson_arrivals(rate_rps, count, seed=seed).tolist()))


def _answered_once(run):
    assert run.num_lost == 0 and run.num_duplicated == 0
    assert run.num_ok + sum(run.rejected.values()) + sum(run.failed.values()) == run.num_requests


def test_ten_times_capacity_answers_or_rejects_every_request_once():
    policy = BatchPolicy(max_batch_size=8, max_queue_delay_us=1000, max_queue_size=32)
    run = serve(sleeping, policy, _load(10 * CAPACITY_RPS, 4000), num_slots=4)
    _answered_once(run)
    assert run.rejected["queue_full"] > run.num_requests / 2  # most of a 10x load cannot fit
    assert run.num_ok > 0 and run.failed == {}
    server = run.server  # the batcher's own count of the same run
    assert server.num_completed == run.num_ok
    assert server.rejected == run.rejected
    assert run.throughput_rps <= CAPACITY_RPS * 1.05  # sleeps cannot be beaten


def test_unbounded_queue_serves_every_request_of_an_overload():
    policy = BatchPolicy(max_batch_size=8, max_queue_delay_us=1000)
    run = serve(sleeping, policy, _load(5 * CAPACITY_RPS, 3000, seed=1), num_slots=4)
    _answered_once(run)
    assert run.num_ok == run.num_requests
    assert run.server.mean_batch_size > 7  # the backlog fills every batch


def test_failing_batches_fail_their_requests_and_lose_none():
    calls = {"n": 0}

    def flaky(batch):
        calls["n"] += 1
        if calls["n"] % 3 == 0:
            raise RuntimeError("device lost")
        return sleeping(batch)

    run = serve(flaky, BatchPolicy(max_batch_size=4), ClosedLoad(concurrency=4, num_requests=300),
                num_slots=4)
    _answered_once(run)
    assert run.failed.get("model_error", 0) > 0 and run.num_ok > 0


def test_answers_carry_the_model_value_and_latency_is_at_least_the_model_time():
    run = serve(sleeping, BatchPolicy(max_batch_size=1), ClosedLoad(concurrency=1,
                                                                    num_requests=50),
                num_slots=4)
    _answered_once(run)
    assert run.num_ok == 50
    assert run.latency_p50_us >= 2250  # T(1) = 2.25 ms


def test_record_reader_joins_records_split_across_reads():
    records = encode_requests(np.arange(5, dtype=np.uint32), np.arange(5, dtype=np.uint32) % 2)
    raw = records.tobytes()
    reader = RecordReader(REQUEST)
    first = reader.feed(raw[:37])
    rest = reader.feed(raw[37:])
    assert reader.partial_bytes == 0
    assert np.concatenate([first, rest])["id"].tolist() == [0, 1, 2, 3, 4]
    assert np.concatenate([first, rest])["slot"].tolist() == [0, 1, 0, 1, 0]
    assert REQUEST.itemsize == 16 and RESPONSE.itemsize == 12
    assert REASONS.index("queue_full") > 0


def test_loadclient_without_a_load_exits_2(tmp_path, capsys):
    assert loadclient_main(["--socket", str(tmp_path / "s"), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_no_arrivals_is_an_input_error():
    from aiprof.errors import InputError

    with pytest.raises(InputError):
        serve(sleeping, BatchPolicy(), OpenLoad(arrivals_us=()), num_slots=1)


def slow_sleeping(batch):
    time.sleep(8e-3 + 1e-3 * len(batch))  # max batch 8: 2 x 8 / 16 ms = 1,000 req/s
    return [rid for rid, _slot in batch]


def test_priorities_and_deadlines_cross_the_socket():
    # GIVEN 3x capacity (a rate the socket front end keeps up with, so the backlog is in the
    # batcher's queue), a fifth of the requests at level 1 (0.6x capacity alone) and the rest at
    # level 2 with a 200 ms deadline WHEN served THEN level 1 overtakes the backlog, level-2
    # requests still queued past their deadline are rejected, and every request is answered once
    count = 1500
    rng = np.random.default_rng(3)
    levels = np.where(rng.random(count) < 0.2, 1, 2)
    deadlines = np.where(levels == 2, 200_000.0, 0.0)
    load = OpenLoad(arrivals_us=tuple(poisson_arrivals(3 * 1000.0, count).tolist()),
                    priorities=tuple(levels.tolist()), deadlines_us=tuple(deadlines.tolist()))
    policy = BatchPolicy(max_batch_size=8, max_queue_delay_us=1000, priority_levels=2,
                         default_priority=2)
    run = serve(slow_sleeping, policy, load, num_slots=4)
    _answered_once(run)
    assert run.rejected.get("deadline", 0) > 0
    by_level = run.server.latency_p99_by_level_us
    assert by_level["1"] < by_level["2"] / 2


def test_mismatched_priorities_are_an_input_error():
    from aiprof.errors import InputError

    with pytest.raises(InputError):
        OpenLoad(arrivals_us=(0.0, 1.0), priorities=(1,))
