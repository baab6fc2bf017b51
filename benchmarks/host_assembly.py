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
from collections.abc import Callable
from typing import Any

import torch

from aiprof.measure.inference.assembly import byte_rows
from aiprof.measure.inference.assembly_timing import Fill, engine_ways, time_ways

SLOTS = 64


def ways(inputs: torch.Tensor, max_batch: int, device: str) -> dict[str, Callable[[], Fill]]:
    """The engine's ways (``assembly_timing.engine_ways``) and three others to compare, each a
    maker of a fresh buffer set and the function that fills it with a batch."""
    pin = device.startswith("cuda")
    row = tuple(inputs.shape[1:])
    engine = engine_ways(inputs, max_batch, device)

    def host() -> torch.Tensor:
        return torch.zeros((max_batch, *row), dtype=inputs.dtype, pin_memory=pin)

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

    found: dict[str, Callable[[], Fill]] = {
        "gather": engine["gather"], "gather, 1 thread": engine["gather"],
        "copy_ rows": copy_rows, "numpy rows": numpy_rows, "take": engine["take"]}
    if "direct" in engine:
        found["direct"] = engine["direct"]
    return found


def run(shape: tuple[int, ...], dtype: torch.dtype, sizes: tuple[int, ...], batches: int,
        gap_us: float, device: str) -> dict[str, Any]:
    """Every way, both conditions, every size: {way: {"alone"|"loaded": {size: stats}}} (or
    {way: {"error": why}})."""
    torch.manual_seed(0)
    inputs = torch.randn(SLOTS, *shape).to(dtype)
    if device.startswith("cuda"):
        inputs = inputs.pin_memory()
    found = ways(inputs, max(sizes), device)
    one_thread = {"gather, 1 thread": found.pop("gather, 1 thread")}
    out = time_ways(found, sizes, SLOTS, batches, gap_us)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out.update(time_ways(one_thread, sizes, SLOTS, batches, gap_us))
    finally:
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
