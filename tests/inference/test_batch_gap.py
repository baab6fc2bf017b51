"""The gap between batches: what the real server does between a batch's end and the next
dispatch, measured (``BatchingMetrics.dispatch_gap_us``), shrunk (a model thread takes the next
batch before its batch's answers leave) and simulated (``SimulationOptions.gap_us``).

GIVEN recorded per-request times, a simulated server with and without a gap, and a real
server whose model sleeps WHEN batches queue behind a busy instance THEN the gaps are the
dispatches' lateness, the simulation's arithmetic holds exactly, and the real server takes the
next batch before the answers of the one before leave.
"""

from __future__ import annotations

import numpy as np
import pytest

from aiprof.errors import InputError
from aiprof.inference.latency_curve import LatencyCurve
from aiprof.inference.leader import LeaderServer
from aiprof.inference.metrics import dispatch_gaps_us
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.serving import OpenLoad, serve
from aiprof.inference.simulator import SimulationOptions, simulate, simulate_closed_loop


def test_a_gap_is_counted_only_for_a_batch_due_when_its_instance_was_free():
    # per request: enqueue, instance free, dispatch; due = (delay 100 us, preferred 2)
    enqueue = np.array([0.0, 10.0, 500.0, 900.0, 950.0, 1000.0])
    free = np.array([50.0, 50.0, 600.0, 920.0, 920.0, 1200.0])
    dispatch = np.array([80.0, 80.0, 650.0, 990.0, 990.0, 1230.0])
    gaps = dispatch_gaps_us(enqueue, free, dispatch, (100.0, 2))
    # batch 1: two queued at free (a preferred size): 30 us; batch 2: one queued, it had
    # waited 100 us by the free time: 50 us; batch 3: one queued of two, oldest 20 us old: not
    # due; batch 4: the oldest 200 us old at free: 30 us
    assert sorted(gaps.tolist()) == [30.0, 30.0, 50.0]


def _policy(max_batch: int = 1) -> BatchPolicy:
    return BatchPolicy(max_batch_size=max_batch)


def test_a_backlog_takes_each_batch_one_gap_after_the_last_ends():
    """All requests at once, batches of one of 100 us: with a gap of 30 us the last ends at
    n * 100 + (n - 1) * 30, and every batch after the first was 30 us late."""
    n = 50
    arrivals = np.zeros(n)
    curve = LatencyCurve.linear(100.0, 0.0)
    gapped = simulate(arrivals, curve, _policy(), SimulationOptions(gap_us=(30.0,)))
    assert gapped.num_completed == n
    assert gapped.duration_us == pytest.approx(n * 100 + (n - 1) * 30)
    assert set(gapped.dispatch_gap_us) == {30.0}
    plain = simulate(arrivals, curve, _policy(), SimulationOptions())
    assert plain.duration_us == pytest.approx(n * 100) and set(plain.dispatch_gap_us) == {0.0}


def test_a_gap_delays_the_next_batch_and_no_batch_it_follows():
    """A lone request (nothing queued) never waits for a gap; closed loop with one client,
    each request arrives as the last is answered, so it waits the whole gap."""
    curve = LatencyCurve.linear(100.0, 0.0)
    lone = simulate(np.array([0.0, 10_000.0]), curve, _policy(),
                    SimulationOptions(gap_us=(30.0,)))
    assert lone.latency_p99_us == pytest.approx(100.0)
    closed = simulate_closed_loop(1, 20, curve, _policy(), SimulationOptions(gap_us=(30.0,)))
    assert closed.latency_p50_us == pytest.approx(130.0)
    assert closed.forming_mean_us == pytest.approx(30.0 * 19 / 20)


def test_a_gap_of_zero_is_the_simulation_without_one():
    rng = np.random.default_rng(3)
    arrivals = np.cumsum(rng.exponential(150.0, 3000))
    policy = BatchPolicy(max_batch_size=16, max_queue_delay_us=500,
                         preferred_batch_sizes=(8, 16))
    curve = LatencyCurve.linear(800.0, 60.0)
    for instances in (1, 2):
        plain = simulate(arrivals, curve, policy, SimulationOptions(num_instances=instances))
        zero = simulate(arrivals, curve, policy,
                        SimulationOptions(num_instances=instances, gap_us=(0.0,)))
        assert zero == plain
        gapped = simulate(arrivals, curve, policy,
                          SimulationOptions(num_instances=instances, gap_us=(0.0, 400.0)))
        assert gapped.latency_p99_us > plain.latency_p99_us
        assert gapped.forming_mean_us > plain.forming_mean_us


def test_gaps_are_checked():
    with pytest.raises(InputError, match="gaps"):
        simulate(np.zeros(3), LatencyCurve.linear(1.0, 0.0), _policy(),
                 SimulationOptions(gap_us=(-1.0,)))


def test_the_real_server_takes_the_next_batch_before_the_answers_of_the_last_leave():
    """A model of 3 ms per batch of one, 20 requests sent within 20 us, one instance: when a
    batch's answers are sent (from its model thread), the next batch has left the queue
    already, for every batch after the loop took the reading (before the change the queue
    still held it: the thread sent the answers, then woke the loop to take it)."""
    seen: list[tuple[int, int]] = []

    class Recording(LeaderServer):
        def results(self, payloads, values):
            seen.append((len(self._batcher), len(payloads)))
            super().results(payloads, values)

    def model(batch):
        import time

        time.sleep(3e-3)
        return [rid for rid, _slot in batch]

    count = 20
    run = serve(model, _policy(), OpenLoad(arrivals_us=tuple(float(i) for i in range(count))),
                num_slots=1, num_instances=1, front_end=Recording)
    assert run.num_ok == count and run.num_lost == run.num_duplicated == 0
    answered, ahead = 0, []
    for queued, size in seen:
        left = count - answered - size  # neither answered nor in this batch
        ahead.append(left - queued)  # taken already, for the next batch
        answered += size
    # the first batch ran on the leader thread, before the rest was read; the second may end
    # before the loop has read the rest on a loaded machine (seen in CI once: its answers then
    # found 18 queued, none taken); after it, every batch but the last found the next one
    # taken (the path before: none did)
    assert len(seen) == count and ahead[1] in (0, 1)
    assert ahead[2:-1] == [1] * (count - 3) and ahead[-1] == 0
