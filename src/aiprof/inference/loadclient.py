"""The load generator as a process of its own, as perf_analyzer is: ``python -m
aiprof.inference.loadclient --socket PATH --out FILE.npz (--arrivals FILE.npy | --concurrency N
--requests N)``.

Open loop sends request i at ``arrivals[i]`` microseconds after the start, whatever the answers
(with its priority level and deadline when ``--priorities`` / ``--deadlines`` are given);
closed loop keeps N requests outstanding (perf_analyzer's two modes, reference A2 of the serving
notes). One thread, one non-blocking socket and ``select``: requests that are due are written in
one call, answers are read in bulk, so the client's cost per request is a few microseconds of
numpy and syscalls, and a server that stops reading never blocks it from reading answers (no
deadlock when both sides' buffers are full). Times are CLOCK_MONOTONIC (``time.monotonic_ns``),
one clock for every process of the machine, so the server can line its own events up with these.

The file written holds, per request: when it was due (``sched_ns``, from the start), when its last
byte was handed to the kernel (``handoff_ns``), when its first answer came (``recv_ns``, -1 if
none), how many answers came (``answers``: 1 for every request when nothing was lost or doubled),
and the answer's status, reason and value (:mod:`aiprof.inference.wire`).
"""

from __future__ import annotations

import argparse
import select
import socket
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from aiprof.inference.wire import (
    REQUEST,
    RESPONSE,
    ReceiveBuffer,
    RecordReader,
    encode_requests,
)

_CHUNK_BYTES = 1 << 20


@dataclass(kw_only=True)
class _Client:
    sock: socket.socket
    num_requests: int
    num_slots: int
    start_ns: int = 0
    raw: bytes = b""
    bytes_sent: int = 0
    sched_ns: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    handoff_ns: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    recv_ns: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    answers: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))
    status: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint8))
    reason: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint8))
    value: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))
    reader: RecordReader = field(default_factory=lambda: RecordReader(RESPONSE))
    receive_buffer: ReceiveBuffer = field(default_factory=lambda: ReceiveBuffer(_CHUNK_BYTES))
    num_answered: int = 0
    priority: np.ndarray | None = None
    deadline_us: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = self.num_requests
        ids = np.arange(n, dtype=np.uint32)
        self.raw = encode_requests(ids, ids % self.num_slots, self.priority,
                                   self.deadline_us).tobytes()
        self.sched_ns = np.full(n, -1, np.int64)
        self.handoff_ns = np.full(n, -1, np.int64)
        self.recv_ns = np.full(n, -1, np.int64)
        self.answers = np.zeros(n, np.int32)
        self.status = np.zeros(n, np.uint8)
        self.reason = np.zeros(n, np.uint8)
        self.value = np.zeros(n, np.int32)

    def flush(self, upto_request: int) -> None:
        """Write the records of requests before ``upto_request`` that are not yet written."""
        end = upto_request * REQUEST.itemsize
        while self.bytes_sent < end:
            try:
                sent = self.sock.send(self.raw[self.bytes_sent:min(end, self.bytes_sent
                                                                   + _CHUNK_BYTES)])
            except BlockingIOError:
                return
            before = self.bytes_sent // REQUEST.itemsize
            self.bytes_sent += sent
            self.handoff_ns[before:self.bytes_sent // REQUEST.itemsize] = (
                time.monotonic_ns() - self.start_ns)

    def receive(self) -> int:
        """Read what answers arrived; the number of requests answered for the first time."""
        try:
            data = self.receive_buffer.recv(self.sock)
        except BlockingIOError:
            return 0
        if not data:
            raise ConnectionError("the server closed the connection")
        fresh = _mark_answers(self.reader.feed(data), time.monotonic_ns() - self.start_ns,
                              self.answers, self.recv_ns, self.status, self.reason, self.value)
        self.num_answered += fresh
        return fresh

    def wait(self, timeout_s: float, writing: bool) -> bool:
        """Wait until an answer can be read (True) or ``timeout_s`` passed."""
        readable, _, _ = select.select([self.sock], [self.sock] if writing else [], [],
                                       max(0.0, timeout_s))
        return bool(readable)


def _mark_answers(records: np.ndarray, now_ns: int, answers: np.ndarray, recv_ns: np.ndarray,
                  status: np.ndarray, reason: np.ndarray, value: np.ndarray) -> int:
    """Count ``records`` into the per-request arrays; the number answered for the first time."""
    ids = records["id"].astype(np.int64)
    ids = ids[ids < answers.size]
    first = ids[answers[ids] == 0]
    np.add.at(answers, ids, 1)
    recv_ns[first] = now_ns
    keep = records[np.isin(records["id"], first)]
    status[keep["id"]] = keep["status"]
    reason[keep["id"]] = keep["reason"]
    value[keep["id"]] = keep["value"]
    return int(np.unique(first).size)


def warm_up() -> None:
    """Run every numpy path of the send and receive loops once on scratch arrays, before the
    clock starts: a first call can cost tens of ms (numpy 2.4's first ``np.unique`` took 33 ms on
    the 2-core VM, 2026-12-01), and a client that stops that long after its first answer sends
    the requests due meanwhile late, which alone made the P99 of a 3 s run on the H200."""
    records = np.zeros(4, dtype=RESPONSE)
    records["id"] = [0, 1, 1, 9]
    _mark_answers(RecordReader(RESPONSE).feed(records.tobytes()), 1, np.zeros(4, np.int32),
                  np.full(4, -1, np.int64), np.zeros(4, np.uint8), np.zeros(4, np.uint8),
                  np.zeros(4, np.int32))
    np.searchsorted(np.arange(4, dtype=np.int64), 2, side="right")


def run_open(client: _Client, arrivals_us: np.ndarray, deadline_s: float) -> None:
    """Send each request at its arrival time; read answers until all came or ``deadline_s``."""
    due_ns = np.asarray(np.round(arrivals_us * 1e3), dtype=np.int64)
    client.sched_ns[:] = due_ns
    n = client.num_requests
    client.start_ns = time.monotonic_ns()
    stop_ns = client.start_ns + int(deadline_s * 1e9)
    while client.num_answered < n and time.monotonic_ns() < stop_ns:
        now = time.monotonic_ns() - client.start_ns
        due = int(np.searchsorted(due_ns, now, side="right"))
        client.flush(due)
        pending = client.bytes_sent < due * REQUEST.itemsize
        next_due_s = (due_ns[due] - now) / 1e9 if due < n else 0.05
        if client.wait(0.0 if pending and not next_due_s else next_due_s, pending):
            client.receive()


def run_closed(client: _Client, concurrency: int, deadline_s: float) -> None:
    """Keep ``concurrency`` requests outstanding until every request was answered."""
    n = client.num_requests
    client.start_ns = time.monotonic_ns()
    stop_ns = client.start_ns + int(deadline_s * 1e9)
    issued = min(concurrency, n)
    client.sched_ns[:issued] = 0
    client.flush(issued)
    while client.num_answered < n and time.monotonic_ns() < stop_ns:
        pending = client.bytes_sent < issued * REQUEST.itemsize
        if client.wait(0.05, pending):
            fresh = client.receive()
            if fresh and issued < n:
                more = min(fresh, n - issued)
                client.sched_ns[issued:issued + more] = time.monotonic_ns() - client.start_ns
                issued += more
        client.flush(issued)


def main(argv: list[str] | None = None) -> int:
    """Connect, drive the load, write the per-request times; 0, or 2 on bad arguments."""
    parser = argparse.ArgumentParser(prog="aiprof.inference.loadclient",
                                     description="load generator process for aiprof's server")
    parser.add_argument("--socket", required=True, help="the server's Unix socket")
    parser.add_argument("--out", required=True, help="where to write the per-request times")
    parser.add_argument("--arrivals", help=".npy of arrival times (us from the start): open loop")
    parser.add_argument("--priorities", help="open loop: .npy of each request's priority level")
    parser.add_argument("--deadlines", help="open loop: .npy of each request's deadline, us")
    parser.add_argument("--concurrency", type=int, help="requests outstanding: closed loop")
    parser.add_argument("--requests", type=int, default=0, help="closed loop: requests to send")
    parser.add_argument("--num-slots", type=int, default=1, help="input slots of the server")
    parser.add_argument("--deadline-s", type=float, default=120.0, help="give up after this long")
    args = parser.parse_args(argv)
    arrivals = np.load(args.arrivals) if args.arrivals else None
    count = len(arrivals) if arrivals is not None else args.requests
    if count < 1 or args.num_slots < 1 or (arrivals is None and not args.concurrency):
        print("loadclient: give --arrivals, or --concurrency and --requests (>= 1)",
              file=sys.stderr)
        return 2
    priority = np.load(args.priorities) if args.priorities else None
    deadline = np.load(args.deadlines) if args.deadlines else None
    if any(a is not None and len(a) != count for a in (priority, deadline)):
        print(f"loadclient: --priorities and --deadlines need {count} values", file=sys.stderr)
        return 2
    warm_up()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(args.socket)
    sock.setblocking(False)
    client = _Client(sock=sock, num_requests=count, num_slots=args.num_slots, priority=priority,
                     deadline_us=deadline)
    try:
        if arrivals is not None:
            run_open(client, arrivals, args.deadline_s)
        else:
            run_closed(client, args.concurrency, args.deadline_s)
    except ConnectionError as error:
        print(f"loadclient: {error}", file=sys.stderr)
    finally:
        end_ns = time.monotonic_ns() - client.start_ns
        sock.close()
    np.savez(args.out, sched_ns=client.sched_ns, handoff_ns=client.handoff_ns,
             recv_ns=client.recv_ns, answers=client.answers, status=client.status,
             reason=client.reason, value=client.value, start_ns=np.int64(client.start_ns),
             end_ns=np.int64(end_ns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
