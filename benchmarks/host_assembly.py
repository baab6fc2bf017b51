"""What assembling a batch costs the serving thread, per way of doing it, alone and under load.

The serving engine's host stage: the rows of a batch's requests, taken from the registered inputs
(ResNet-50's input by default: 3x224x224 float32, 602 KB a row), put where the model reads them.
Each way runs ``--batches`` batches per size with a pause of ``--gap-us`` between them (as
batches come to one instance under load, so that a thread team can fall asleep in between), once
alone and once under load: a second thread assembling its own batches the same way (the other
instance) and a thread running Python in bursts (the event loop holding the GIL). Printed per way
and batch size: the assembling thread's wall time per batch, mean, P50 and P99, and the process's
CPU time per batch (every thread: a team of helpers shows here). The ways:

- ``gather``: the engine's ``gather`` (one ``index_select``, ATen's intra-op team);
- ``gather, 1 thread``: the same with ``torch.set_num_threads(1)``;
- ``copy_ rows``: one ``Tensor.copy_`` per request into the host buffer;
- ``numpy rows``: one numpy row assignment per request;
- ``take``: the engine's ``take`` (one ``numpy.take``, one thread);
- ``direct`` (CUDA only): the engine's ``direct``, one asynchronous copy per request from the
  pinned inputs into the device buffer (the host's calls timed; the copies end on the device).

    python benchmarks/host_assembly.py [--shape 3,224,224] [--dtype float32] [--batches 200]
        [--sizes 1,2,4,8,16,32] [--gap-us 500] [--device cpu|cuda] [--json]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from aiprof.measure.inference.assembly import Assembler, byte_rows

SLOTS = 64
Fill = Callable[[list[int]], None]


def ways(inputs: torch.Tensor, max_batch: int, device: str) -> dict[str, Callable[[], Fill]]:
    """Each way's maker: a fresh buffer set and a function that fills it with a batch."""
    pin = device.startswith("cuda")
    row = tuple(inputs.shape[1:])

    def host() -> torch.Tensor:
        return torch.zeros((max_batch, *row), dtype=inputs.dtype, pin_memory=pin)

    def engine(name: str) -> Fill:
        buffer, assembler = host(), Assembler(name, inputs)
        rows = byte_rows(buffer)
        return lambda slots: assembler.to_host(slots, buffer, rows)

    def copy_rows() -> Fill:
        buffer = host()

        def fill(slots: list[int]) -> None:
            for i, slot in enumerate(slots):
                buffer[i].copy_(inputs[slot])
        return fill

    def numpy_rows() -> Fill:
        source, target = byte_rows(inputs), byte_rows(host())

        def fill(slots: list[int]) -> None:
            for i, slot in enumerate(slots):
                target[i] = source[slot]
        return fill

    def direct() -> Fill:
        dev_in = torch.zeros((max_batch, *row), dtype=inputs.dtype, device=device)
        assembler, stream = Assembler("direct", inputs), torch.cuda.Stream(device)

        def fill(slots: list[int]) -> None:
            with torch.cuda.stream(stream):
                assembler.to_device(slots, dev_in, dev_in, len(slots))
        fill.settle = stream.synchronize  # type: ignore[attr-defined]
        return fill

    found: dict[str, Callable[[], Fill]] = {
        "gather": lambda: engine("gather"), "gather, 1 thread": lambda: engine("gather"),
        "copy_ rows": copy_rows, "numpy rows": numpy_rows, "take": lambda: engine("take")}
    if pin:
        found["direct"] = direct
    return found


def _python_bursts(stop: threading.Event, burst_us: float = 200.0) -> None:
    """Pure Python for ``burst_us``, then as long asleep: the event loop's share of the GIL."""
    while not stop.is_set():
        end = time.perf_counter() + burst_us / 1e6
        while time.perf_counter() < end:
            pass
        time.sleep(burst_us / 1e6)


def _other_instance(make: Callable[[], Fill], size: int, gap_s: float,
                    stop: threading.Event) -> None:
    fill, slots = make(), [(7 * i) % SLOTS for i in range(size)]
    while not stop.is_set():
        fill(slots)
        getattr(fill, "settle", _nothing)()
        time.sleep(gap_s)


def _nothing() -> None:
    pass


def measure(make: Callable[[], Fill], size: int, batches: int, gap_s: float,
            loaded: bool) -> dict[str, float]:
    """Wall time per batch in the assembling thread (mean, P50, P99) and process CPU per batch."""
    fill = make()
    stop = threading.Event()
    helpers = ([threading.Thread(target=_other_instance, args=(make, size, gap_s, stop)),
                threading.Thread(target=_python_bursts, args=(stop,))] if loaded else [])
    for helper in helpers:
        helper.start()
    rng = np.random.default_rng(size)
    walls = np.empty(batches)
    try:
        for _ in range(3):
            fill(list(range(size)))
        cpu = time.process_time_ns()
        for i in range(batches):
            slots = rng.integers(0, SLOTS, size).tolist()
            begin = time.perf_counter_ns()
            fill(slots)
            walls[i] = (time.perf_counter_ns() - begin) / 1e3
            getattr(fill, "settle", _nothing)()  # direct: its copies end on the device, untimed
            time.sleep(gap_s)
        cpu_us = (time.process_time_ns() - cpu) / 1e3 / batches
    finally:
        stop.set()
        for helper in helpers:
            helper.join()
    return {"mean_us": float(walls.mean()), "p50_us": float(np.percentile(walls, 50)),
            "p99_us": float(np.percentile(walls, 99)), "process_cpu_us_per_batch": cpu_us}


def run(shape: tuple[int, ...], dtype: torch.dtype, sizes: tuple[int, ...], batches: int,
        gap_us: float, device: str) -> dict[str, Any]:
    """Every way, both conditions, every size: {way: {"alone"|"loaded": {size: stats}}} (or
    {way: {"error": why}})."""
    torch.manual_seed(0)
    inputs = torch.randn(SLOTS, *shape).to(dtype)
    if device.startswith("cuda"):
        inputs = inputs.pin_memory()
    threads = torch.get_num_threads()
    out: dict[str, Any] = {}
    for way, make in ways(inputs, max(sizes), device).items():
        torch.set_num_threads(1 if way == "gather, 1 thread" else threads)
        try:
            out[way] = {condition: {size: measure(make, size, batches, gap_us / 1e6,
                                                  condition == "loaded") for size in sizes}
                        for condition in ("alone", "loaded")}
        except Exception as error:  # one way failing (a device without it) keeps the others
            out[way] = {"error": f"{type(error).__name__}: {error}"[:300]}
    torch.set_num_threads(threads)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="3,224,224")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--sizes", default="1,2,4,8,16,32")
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--gap-us", type=float, default=500.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    shape = tuple(int(s) for s in args.shape.split(","))
    sizes = tuple(int(s) for s in args.sizes.split(","))
    found = run(shape, getattr(torch, args.dtype), sizes, args.batches, args.gap_us, args.device)
    if args.json:
        print(json.dumps(found, indent=1, sort_keys=True))
        return
    print(f"rows of {shape} {args.dtype}, {torch.get_num_threads()} intra-op threads, "
          f"{args.batches} batches per size, {args.gap_us:g} us apart; wall us per batch "
          "mean / P50 / P99 (process CPU us per batch)")
    for way in [w for w, c in found.items() if "error" in c]:
        print(f"{way:>16} failed: {found.pop(way)['error']}")
    for way, conditions in found.items():
        for condition, by_size in conditions.items():
            cells = "  ".join(f"{s}: {r['mean_us']:.0f}/{r['p50_us']:.0f}/{r['p99_us']:.0f} "
                              f"({r['process_cpu_us_per_batch']:.0f})"
                              for s, r in by_size.items())
            print(f"{way:>16} {condition:>6}  {cells}")
    base = found["gather"]["loaded"]
    for way, conditions in found.items():
        mean = [conditions["loaded"][s]["mean_us"] / base[s]["mean_us"] for s in sizes]
        p99 = [conditions["loaded"][s]["p99_us"] / base[s]["p99_us"] for s in sizes]
        print(f"{way:>16} under load / gather: mean {', '.join(f'{r:.2f}' for r in mean)}; "
              f"P99 {', '.join(f'{r:.2f}' for r in p99)}")


if __name__ == "__main__":
    main()
