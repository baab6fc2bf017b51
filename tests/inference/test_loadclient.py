"""The load generator's bookkeeping of answers, and its warm-up before the clock starts.

GIVEN answer records (some repeated, one for a request that does not exist) WHEN the client
counts them THEN each request's first answer sets its time and status, a repeat only its count.
A fresh interpreter that ran ``warm_up`` counts its first answers without a first-call stop.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import numpy as np
import pytest

from aiprof.inference.loadclient import _mark_answers, warm_up
from aiprof.inference.wire import OK, REJECTED, RESPONSE, ReceiveBuffer


def _answers(ids, status):
    records = np.zeros(len(ids), dtype=RESPONSE)
    records["id"], records["status"] = ids, status
    records["value"] = np.asarray(ids) * 10
    return records


def test_first_answers_are_timed_and_repeats_only_counted():
    n = 4
    answers, recv = np.zeros(n, np.int32), np.full(n, -1, np.int64)
    status, reason, value = np.zeros(n, np.uint8), np.zeros(n, np.uint8), np.zeros(n, np.int32)
    fresh = _mark_answers(_answers([0, 2, 2, 7], [OK, REJECTED, REJECTED, OK]), 100, answers,
                          recv, status, reason, value)
    assert fresh == 2  # requests 0 and 2; id 7 does not exist
    assert answers.tolist() == [1, 0, 2, 0]
    assert recv.tolist() == [100, -1, 100, -1]
    fresh = _mark_answers(_answers([2, 1], [OK, OK]), 200, answers, recv, status, reason, value)
    assert fresh == 1
    assert answers.tolist() == [1, 1, 3, 0]
    assert recv.tolist() == [100, 200, 100, -1]  # a repeat does not move the first answer's time
    assert status.tolist() == [OK, OK, REJECTED, 0] and value.tolist() == [0, 10, 20, 0]


def test_warm_up_leaves_no_state_behind():
    warm_up()
    warm_up()  # twice: it holds nothing


@pytest.mark.timing
def test_after_warm_up_the_first_answers_cost_no_first_call_stop():
    code = (
        "import time, numpy as np\n"
        "from aiprof.inference.loadclient import _mark_answers, warm_up\n"
        "from aiprof.inference.wire import RESPONSE\n"
        "warm_up()\n"
        "r = np.zeros(3, dtype=RESPONSE); r['id'] = [0, 1, 1]\n"
        "arrays = [np.zeros(3, np.int32), np.full(3, -1, np.int64), np.zeros(3, np.uint8),"
        " np.zeros(3, np.uint8), np.zeros(3, np.int32)]\n"
        "t = time.perf_counter(); _mark_answers(r, 1, *arrays)\n"
        "print((time.perf_counter() - t) * 1e3)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    # cold, numpy 2.4's np.unique alone took 33 ms here; warm, the whole call is ~0.1 ms
    assert float(done.stdout) < 10.0


def test_a_receive_buffer_returns_each_read_as_bytes_of_its_own_and_empty_once_closed():
    ours, theirs = socket.socketpair()
    buffer = ReceiveBuffer(64)
    theirs.send(b"first")
    first = buffer.recv(ours)
    theirs.send(b"2nd")
    assert (first, buffer.recv(ours)) == (b"first", b"2nd")  # the first read was not overwritten
    theirs.close()
    assert buffer.recv(ours) == b""
    ours.close()
