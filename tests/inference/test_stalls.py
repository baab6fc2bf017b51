"""Reading a latency tail's cause off the per-request series.

GIVEN one request due every millisecond for 3 s, each answered in 1 ms, WHEN the server (or the
load generator) stops for 50 ms once THEN the summary puts the tail in that window and says who
stopped; a tail spread over the run covers many windows.
"""

from __future__ import annotations

import numpy as np
import pytest

from aiprof.inference.stalls import latency_series

MS = 1_000_000  # ns


def _series(stall_at_ms: float | None, stall_ms: float, *, client: bool):
    due = np.arange(3000, dtype=np.int64) * MS
    delay = np.zeros(3000)
    if stall_at_ms is not None:  # due inside the stop: wait until it ends
        inside = (due >= stall_at_ms * MS) & (due < (stall_at_ms + stall_ms) * MS)
        delay[inside] = (stall_at_ms + stall_ms) * MS - due[inside]
    sent = due + (delay if client else np.zeros(3000)).astype(np.int64) + 10_000
    received = due + delay.astype(np.int64) + 1 * MS
    return due, sent, received


def test_one_server_stall_puts_the_tail_in_one_window_and_the_client_on_time():
    series = latency_series(*_series(1210.0, 50.0, client=False))
    assert series.num_tail == 30  # 1% of 3,000 above the P99: the stall's first requests
    assert 1210 <= series.tail_first_due_ms <= series.tail_last_due_ms < 1260
    assert series.tail_bins == 1
    assert series.tail_client_late_share == 0.0
    assert series.worst_due_ms == 1210 and series.worst_latency_us == pytest.approx(51_000)
    assert series.max_latency_per_bin_us[12] == pytest.approx(51_000)
    assert series.max_latency_per_bin_us[0] == pytest.approx(1_000)


def test_a_client_that_stopped_is_told_apart_from_a_server_that_did():
    series = latency_series(*_series(1210.0, 50.0, client=True))
    assert series.tail_client_late_share == 1.0
    assert series.worst_send_lag_us == pytest.approx(50_010)  # the stop and the 10 us send


def test_a_stall_at_the_start_shows_as_a_warm_up_window():
    series = latency_series(*_series(0.0, 50.0, client=False))
    assert series.first_window_p99_us > 40_000
    assert series.rest_p99_us == pytest.approx(1_000)


def test_a_spread_tail_covers_many_windows():
    due, sent, received = _series(None, 0.0, client=False)
    slow = np.arange(0, 3000, 97)  # every 97th request 20 ms late, all over the run
    received[slow] += 20 * MS
    series = latency_series(due, sent, received)
    assert series.tail_bins >= 25


def test_unanswered_requests_are_left_out_and_no_answer_is_no_series():
    due, sent, received = _series(None, 0.0, client=False)
    received[:10] = -1
    assert latency_series(due, sent, received).worst_latency_us == pytest.approx(1_000)
    received[:] = -1
    assert latency_series(due, sent, received).max_latency_per_bin_us == ()
