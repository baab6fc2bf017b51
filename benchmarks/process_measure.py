"""Measuring a program from outside: each run in its own process, its peak memory summed over
every process it starts (PSS), rank sets for the benchmarks. Shared by ingest.py and scale.py."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

# Each child prints one JSON line: {"seconds": float, "cpu_s": float, "rss_mib": float,
# "child_rss_mib": float}. cpu_s is the CPU time of the program and of the workers it waited for,
# from ``start()`` on (imports excluded when the program calls it): other jobs on a shared
# machine stretch the wall time, not that.
CHILD_PRELUDE = """
import json, resource, sys, time
_WHO = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
def _cpu():
    return sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, _WHO))
_CPU0 = [0.0]
def start():
    _CPU0[0] = _cpu()
    return time.perf_counter()
def report(t0):
    elapsed = time.perf_counter() - t0
    # VmHWM: this program's peak RSS (ru_maxrss would include what the parent had at fork)
    status = open("/proc/self/status").read()
    me = int(status.split("VmHWM:")[1].split()[0]) / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"seconds": elapsed, "cpu_s": _cpu() - _CPU0[0], "rss_mib": me,
                      "child_rss_mib": kids}))
"""


FLOOR_DECODER = """
import msgspec
class Event(msgspec.Struct, omit_defaults=True):
    ph: str = ""
    name: str = ""
    cat: str = ""
    ts: float = 0.0
    dur: float = 0.0
    pid: int | str = 0
    tid: int | str = 0
    args: msgspec.Raw = msgspec.Raw(b"null")  # msgspec.Raw | None would accept only null
class Document(msgspec.Struct):
    traceEvents: list[Event]
decoder = msgspec.json.Decoder(Document)
"""
"""The floor of reading a trace: a bare typed msgspec decode of the fields every event has (its
``args`` kept as raw bytes), nothing built from it. Defines ``decoder``."""


def measure(python: str, code: str, target: Path) -> dict[str, float]:
    command = [python, "-c", code, str(target)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{python} failed on {target}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def peak_tree_pss_mib(python: str, code: str, target: Path, interval_s: float = 0.005) -> float:
    """Peak of the summed PSS of a run's processes (the program and every worker it starts),
    sampled from outside every ``interval_s``; an extra, untimed run (sampling costs CPU).

    PSS splits pages shared between processes (a forked worker shares the interpreter with
    its parent), so the sum is the memory the run really holds, not double-counted RSS.
    """
    child = subprocess.Popen(
        [python, "-c", code, str(target)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    peak_kib = 0
    while child.poll() is None:
        peak_kib = max(peak_kib, sum(_pss_kib(pid) for pid in _tree(child.pid)))
        time.sleep(interval_s)
    if child.returncode != 0:
        raise RuntimeError(f"{python} failed on {target} while sampling memory")
    return peak_kib / 1024


def _tree(pid: int) -> list[int]:
    pids, pending = [], [pid]
    while pending:
        current = pending.pop()
        pids.append(current)
        try:
            tasks = Path(f"/proc/{current}/task").iterdir()
            for task in tasks:
                pending += [int(c) for c in (task / "children").read_text().split()]
        except OSError:  # the process ended meanwhile
            continue
    return pids


def _pss_kib(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def make_rank_set(source: Path, ranks: int, out: Path) -> Path:
    """Write ``ranks`` plain-JSON copies of ``source`` with distributedInfo.rank rewritten."""
    import gzip

    text = gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes()
    head, marker, rest = text.partition(b'"traceEvents"')
    for rank in range(ranks):
        new_head = _with_rank(head, rank)
        (out / f"rank{rank}.json").write_bytes(new_head + marker + rest)
    return out


def _with_rank(head: bytes, rank: int) -> bytes:
    import re

    replaced, count = re.subn(rb'"rank":\s*\d+', f'"rank": {rank}'.encode(), head, count=1)
    if count != 1:
        raise ValueError("the source trace has no distributedInfo.rank to rewrite")
    return replaced


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
