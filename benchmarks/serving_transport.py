"""Which request channel between a load-generator process and the server is cheaper per request:
a Unix stream socket or a shared-memory ring (single producer, single consumer).

A producer process sends ``--requests`` 16-byte request records at ``--rate`` (paced, one record
per send, the worst case of a lightly loaded server); the consumer process reads them and records
how long each took to arrive (both read CLOCK_MONOTONIC through ``time.monotonic_ns``, one clock
for every process of the machine). Printed per channel: the consumer's and the producer's CPU time
per request (``time.process_time``), and the one-way delay P50 / P99. The ring's consumer cannot
block on anything, so it polls: once with ``time.sleep(0)`` between polls (a spinning core) and
once with ``time.sleep(--poll-us)``; the socket's consumer blocks in ``select`` until data comes.

    python benchmarks/serving_transport.py [--rate 5000] [--requests 10000] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import select
import socket
import struct
import tempfile
import threading
import time
from multiprocessing import shared_memory
from typing import Any

import numpy as np

RECORD = struct.Struct("<Iiq")  # request id, slot, send time ns: 16 bytes
RING_SLOTS = 4096


def _pace(rate_rps: float, index: int, start_ns: int) -> None:
    due = start_ns + int(index * 1e9 / rate_rps)
    while time.monotonic_ns() < due:
        pass


def _socket_producer(path: str, rate: float, count: int, cpu: Any) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    begin = time.process_time()
    start = time.monotonic_ns()
    spent = 0.0
    for i in range(count):
        _pace(rate, i, start)
        t0 = time.process_time()
        sock.sendall(RECORD.pack(i, 0, time.monotonic_ns()))
        spent += time.process_time() - t0
    sock.close()
    cpu.value = spent if spent > 0 else time.process_time() - begin


def _socket_consumer(path: str, count: int) -> tuple[float, np.ndarray]:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    conn, _ = server.accept()
    delays = np.empty(count)
    pending = b""
    got = 0
    begin = time.process_time()
    while got < count:
        select.select([conn], [], [])
        data = pending + conn.recv(65536)
        now = time.monotonic_ns()
        whole = len(data) - len(data) % RECORD.size
        for _, _, sent in RECORD.iter_unpack(data[:whole]):
            delays[got] = (now - sent) / 1e3
            got += 1
        pending = data[whole:]
    cpu = time.process_time() - begin  # the consumer thread is the only one running
    conn.close()
    server.close()
    return cpu, delays


def _ring_producer(name: str, rate: float, count: int, cpu: Any) -> None:
    shm = shared_memory.SharedMemory(name=name)
    buf = shm.buf
    start = time.monotonic_ns()
    spent = 0.0
    for i in range(count):
        _pace(rate, i, start)
        t0 = time.process_time()
        while i - struct.unpack_from("<q", buf, 8)[0] >= RING_SLOTS:  # full: wait for the reader
            pass
        RECORD.pack_into(buf, 16 + (i % RING_SLOTS) * RECORD.size, i, 0, time.monotonic_ns())
        struct.pack_into("<q", buf, 0, i + 1)  # head: published after the record
        spent += time.process_time() - t0
    cpu.value = spent
    del buf
    shm.close()


def _ring_consumer(shm: shared_memory.SharedMemory, count: int, poll_s: float
                   ) -> tuple[float, np.ndarray]:
    buf = shm.buf
    delays = np.empty(count)
    tail = 0
    begin = time.process_time()
    while tail < count:
        head = struct.unpack_from("<q", buf, 0)[0]
        if head == tail:
            time.sleep(poll_s)
            continue
        now = time.monotonic_ns()
        for i in range(tail, head):
            _, _, sent = RECORD.unpack_from(buf, 16 + (i % RING_SLOTS) * RECORD.size)
            delays[i] = (now - sent) / 1e3
        tail = head
        struct.pack_into("<q", buf, 8, tail)
    cpu = time.process_time() - begin
    del buf
    return cpu, delays


def _summary(name: str, consumer_cpu: float, producer_cpu: float, delays: np.ndarray,
             count: int) -> dict[str, Any]:
    p50, p99 = np.percentile(delays, [50, 99])
    return {"channel": name, "consumer_cpu_us_per_request": consumer_cpu / count * 1e6,
            "producer_cpu_us_per_request": producer_cpu / count * 1e6,
            "delay_p50_us": float(p50), "delay_p99_us": float(p99)}


def run_socket(rate: float, count: int) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    cpu = ctx.Value("d", 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s")
        proc = ctx.Process(target=_socket_producer, args=(path, rate, count, cpu))
        result: list[Any] = []
        thread = threading.Thread(target=lambda: result.append(_socket_consumer(path, count)))
        thread.start()
        while not os.path.exists(path):
            time.sleep(0.001)
        proc.start()
        thread.join()
        proc.join()
    return _summary("unix socket", result[0][0], cpu.value, result[0][1], count)


def run_ring(rate: float, count: int, poll_s: float) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    cpu = ctx.Value("d", 0.0)
    shm = shared_memory.SharedMemory(create=True, size=16 + RING_SLOTS * RECORD.size)
    try:
        shm.buf[:16] = bytes(16)
        proc = ctx.Process(target=_ring_producer, args=(shm.name, rate, count, cpu))
        proc.start()
        consumer_cpu, delays = _ring_consumer(shm, count, poll_s)
        proc.join()
    finally:
        shm.close()
        shm.unlink()
    label = "shm ring, spinning" if poll_s == 0 else f"shm ring, {poll_s * 1e6:.0f} us polls"
    return _summary(label, consumer_cpu, cpu.value, delays, count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=5000.0)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--poll-us", type=float, default=50.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [run_socket(args.rate, args.requests), run_ring(args.rate, args.requests, 0.0),
            run_ring(args.rate, args.requests, args.poll_us / 1e6)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{args.requests} requests at {args.rate:.0f} req/s, one 16-byte record per send")
    for r in rows:
        print(f"{r['channel']:<24} consumer CPU {r['consumer_cpu_us_per_request']:6.1f} us/req, "
              f"producer CPU {r['producer_cpu_us_per_request']:5.1f} us/req, delay P50 "
              f"{r['delay_p50_us']:7.1f} us, P99 {r['delay_p99_us']:8.1f} us")
    base = rows[0]["consumer_cpu_us_per_request"]
    for r in rows[1:]:
        print(f"{r['channel']}: consumer CPU {r['consumer_cpu_us_per_request'] / base:.2f}x "
              "the socket's")


if __name__ == "__main__":
    main()
