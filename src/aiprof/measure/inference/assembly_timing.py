"""What assembling a batch costs the serving thread, per way, alone and under load; and the way
to serve with (``auto``: the lowest P99 under load).

Each way fills its own buffer set with ``batches`` batches per size, a pause of ``gap_us``
between them (as batches come to one instance under load, so that a thread team can fall asleep
in between), once alone and once under load: a second thread assembling its own batches the
same way (the other instance) and a thread running Python in bursts (the event loop holding the
GIL). Per way and size: the assembling thread's wall time per batch (mean, P50, P99) and the
process's CPU time per batch (every thread: a team of helpers shows here). On the H200
(2026-12-02 01:03 UTC, docs/inference.md) ``direct`` took 265 us for 32 ResNet-50 images alone
where a host-side gather took 8,162 us under load: the choice moves P99 by milliseconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from aiprof.measure.inference.assembly import ASSEMBLIES, Assembler, byte_rows
from aiprof.measure.inference.bench import import_torch

Fill = Callable[[list[int]], None]
"""Assembles the batch of the given slots into its way's buffers."""

PYTHON_BURST_US = 200.0
"""The load's event loop: pure Python this long, then asleep as long (the GIL's share a busy
loop takes; the serving runs of docs/inference.md held the loop's thread 50-60% busy)."""


def engine_ways(inputs: Any, max_batch: int, device: str) -> dict[str, Callable[[], Fill]]:
    """The engine's ways (``ASSEMBLIES``; ``direct`` on CUDA only), each a maker of a fresh
    buffer set and the function that fills it."""
    torch = import_torch()
    cuda = device.startswith("cuda")
    row = tuple(inputs.shape[1:])

    def host(name: str) -> Fill:
        buffer = torch.zeros((max_batch, *row), dtype=inputs.dtype, pin_memory=cuda)
        assembler, rows = Assembler(name, inputs), byte_rows(buffer)
        return lambda slots: assembler.to_host(slots, buffer, rows)

    def direct() -> Fill:
        dev_in = torch.zeros((max_batch, *row), dtype=inputs.dtype, device=device)
        assembler, stream = Assembler("direct", inputs), torch.cuda.Stream(device)

        def fill(slots: list[int]) -> None:
            with torch.cuda.stream(stream):
                assembler.to_device(slots, dev_in, dev_in, len(slots))
        fill.settle = stream.synchronize  # type: ignore[attr-defined]
        return fill

    found: dict[str, Callable[[], Fill]] = {"gather": lambda: host("gather"),
                                            "take": lambda: host("take")}
    if cuda:
        found["direct"] = direct
    return found


def _python_bursts(stop: threading.Event) -> None:
    while not stop.is_set():
        end = time.perf_counter() + PYTHON_BURST_US / 1e6
        while time.perf_counter() < end:
            pass
        time.sleep(PYTHON_BURST_US / 1e6)


def _settle(fill: Fill) -> None:
    """Wait for what ``fill`` left on the device (``direct``'s copies), untimed."""
    settle = getattr(fill, "settle", None)
    if settle is not None:
        settle()


def _other_instance(make: Callable[[], Fill], size: int, num_slots: int, gap_s: float,
                    stop: threading.Event) -> None:
    fill, slots = make(), [(7 * i) % num_slots for i in range(size)]
    while not stop.is_set():
        fill(slots)
        _settle(fill)
        time.sleep(gap_s)


def measure(make: Callable[[], Fill], size: int, num_slots: int, batches: int, gap_s: float,
            loaded: bool) -> dict[str, float]:
    """Wall time per batch in the assembling thread (mean, P50, P99) and process CPU per
    batch, alone or under load."""
    fill = make()
    stop = threading.Event()
    helpers = ([threading.Thread(target=_other_instance,
                                 args=(make, size, num_slots, gap_s, stop)),
                threading.Thread(target=_python_bursts, args=(stop,))] if loaded else [])
    for helper in helpers:
        helper.start()
    rng = np.random.default_rng(size)
    walls_us = np.empty(batches)
    try:
        for _ in range(3):
            fill(list(range(size)))
            _settle(fill)
        cpu = time.process_time_ns()
        for i in range(batches):
            slots = rng.integers(0, num_slots, size).tolist()
            begin = time.perf_counter_ns()
            fill(slots)
            walls_us[i] = (time.perf_counter_ns() - begin) / 1e3
            _settle(fill)
            time.sleep(gap_s)
        cpu_us = (time.process_time_ns() - cpu) / 1e3 / batches
    finally:
        stop.set()
        for helper in helpers:
            helper.join()
    return {"mean_us": float(walls_us.mean()), "p50_us": float(np.percentile(walls_us, 50)),
            "p99_us": float(np.percentile(walls_us, 99)), "process_cpu_us_per_batch": cpu_us}


def time_ways(ways: dict[str, Callable[[], Fill]], sizes: tuple[int, ...], num_slots: int,
              batches: int, gap_us: float) -> dict[str, Any]:
    """Every way, both conditions, every size: {way: {"alone"|"loaded": {size: stats}}}, or
    {way: {"error": why}} for a way this machine cannot run."""
    out: dict[str, Any] = {}
    for way, make in ways.items():
        try:
            out[way] = {condition: {size: measure(make, size, num_slots, batches, gap_us / 1e6,
                                                  condition == "loaded") for size in sizes}
                        for condition in ("alone", "loaded")}
        except Exception as error:  # one way failing (a device without it) keeps the others
            out[way] = {"error": f"{type(error).__name__}: {error}"[:300]}
    return out


def choose_assembly(costs: dict[str, Any]) -> str:
    """The engine's way whose P99 under load, summed over the sizes timed, is the lowest
    (``take`` when none was timed)."""
    timed = {way: sum(r["p99_us"] for r in costs[way]["loaded"].values())
             for way in ASSEMBLIES if "loaded" in costs.get(way, {})}
    return min(timed, key=lambda way: timed[way]) if timed else "take"


AUTO_SIZES = (1, 8, 32)
"""Batch sizes ``auto`` times (those up to the largest batch, and the largest): one request, a
batch under moderate load, a full one (scripts/h200/serving_bench.py times the same)."""
AUTO_BATCHES = 60
AUTO_GAP_US = 500.0


def assembly_for(inputs: Any, max_batch: int, device: str,
                 asked: str) -> tuple[str, dict[str, Any]]:
    """The way to serve ``inputs`` with (``asked``, or for ``auto`` the one ``choose_assembly``
    picks from every engine way timed on these inputs), and what was timed (empty unless
    ``auto``)."""
    if asked != "auto":
        return asked, {}
    sizes = tuple(sorted({s for s in AUTO_SIZES if s < max_batch} | {max_batch}))
    costs = time_ways(engine_ways(inputs, max_batch, device), sizes, int(inputs.shape[0]),
                      AUTO_BATCHES, AUTO_GAP_US)
    return choose_assembly(costs), costs
