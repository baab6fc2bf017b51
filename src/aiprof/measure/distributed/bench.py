"""``aiprof comm bench``: time collectives over torch.distributed like nccl-tests does.

Each size is run ``warmup`` times, then ``iters`` times back to back; the time of a call is the
average, taken as the maximum over ranks (the collective ends when the slowest rank ends). algbw
and busbw follow nccl-tests (``busbw.py``). torch is imported only inside the functions that run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiprof.distributed.busbw import algbw_gbps, busbw_factor
from aiprof.distributed.fit import AlphaBetaFit, fit_alpha_beta, fit_protocols
from aiprof.errors import InputError

SCHEMA = "aiprof.comm_bench/1"
BENCH_COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast")
_ELEM_BYTES = 4  # float32 buffers, as nccl-tests' default -d float


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    """What to sweep."""

    collectives: tuple[str, ...] = BENCH_COLLECTIVES
    """Collectives to time."""
    min_bytes: int = 8
    """Smallest nccl-tests size S."""
    max_bytes: int = 1 << 30
    """Largest size S (1 GiB, as the issue asks)."""
    step_factor: int = 2
    """Multiply the size by this between points (nccl-tests -f)."""
    iters: int = 20
    """Timed calls per size (fewer for big sizes, see ``iters_for``)."""
    warmup: int = 5
    """Untimed calls per size."""
    repeats: int = 5
    """Timed blocks of ``iters`` calls per size; the median block is reported, so that a
    one-off hiccup (a page fault, a busy CPU) does not become a point of the curve."""
    fit_min_bytes: int = 1 << 20
    """Fit α/β on sizes from here up (the bandwidth regime)."""

    def __post_init__(self) -> None:
        if self.min_bytes < 1 or self.max_bytes < self.min_bytes:
            raise InputError(
                f"bad size range {self.min_bytes}..{self.max_bytes}: need 1 <= min <= max"
            )
        if self.step_factor < 2 or self.iters < 1 or self.warmup < 0 or self.repeats < 1:
            raise InputError(
                "need --step-factor >= 2, --iters >= 1, --repeats >= 1 and --warmup >= 0"
            )


@dataclass(frozen=True, kw_only=True)
class BenchPoint:
    """One size of one collective."""

    collective: str
    num_bytes: int
    num_ranks: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    """A whole sweep, as written to JSON (schema ``aiprof.comm_bench/1``)."""

    schema: str = SCHEMA
    backend: str
    repeats: int = 1
    """Timed blocks per size (median reported); 1 in files written before repeats existed."""
    device: str
    num_ranks: int
    points: list[BenchPoint]
    fits: list[AlphaBetaFit] = field(default_factory=list)
    """One α/β line per collective (sizes from ``fit_min_bytes`` up)."""
    protocol_fits: list[AlphaBetaFit] = field(default_factory=list)
    """Up to three lines per collective, one per protocol regime; time = the cheapest line."""
    notes: list[str] = field(default_factory=list)


def size_sweep(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    """Sizes min, min·f, min·f², ... up to max (both ends included)."""
    sizes, size = [], min_bytes
    while size < max_bytes:
        sizes.append(size)
        size *= factor
    return sizes + [max_bytes]


def iters_for(num_bytes: int, options: BenchOptions) -> int:
    """Fewer iterations for big messages: at most ~256 MiB moved per size and at least 2 calls."""
    return max(2, min(options.iters, (256 << 20) // max(num_bytes, 1)))


def fit_points(
    points: list[BenchPoint], min_bytes: int, protocols: bool = False
) -> list[AlphaBetaFit]:
    """Per collective, over the points of at least ``min_bytes`` (else all): one α/β line, or
    with ``protocols`` one line per protocol regime (``fit_protocols``)."""
    fits: list[AlphaBetaFit] = []
    for name in sorted({p.collective for p in points}):
        rows = [p for p in points if p.collective == name]
        sizes, times = [p.num_bytes for p in rows], [p.time_us for p in rows]
        for low in (min_bytes, 0):
            try:
                if protocols:
                    fits.extend(fit_protocols(name, rows[0].num_ranks, sizes, times, min_bytes=low))
                else:
                    fits.append(
                        fit_alpha_beta(name, rows[0].num_ranks, sizes, times, min_bytes=low)
                    )
                break
            except InputError:
                continue
    return fits


def _call(name: str, dist: Any, buffers: dict[str, Any]) -> Callable[[], None]:
    if name == "allreduce":
        return lambda: dist.all_reduce(buffers["full"])
    if name == "allgather":
        return lambda: dist.all_gather_into_tensor(buffers["full"], buffers["shard"])
    if name == "reducescatter":
        return lambda: dist.reduce_scatter_tensor(buffers["shard"], buffers["full"])
    if name == "broadcast":
        return lambda: dist.broadcast(buffers["full"], 0)
    raise InputError(f"comm bench cannot time {name!r}; choose from {', '.join(BENCH_COLLECTIVES)}")


def _median_block_us(
    op: Callable[[], None],
    count: int,
    repeats: int,
    sync: Callable[[], None],
    clock: Callable[[], float],
) -> float:
    """Median over ``repeats`` blocks of the mean time of ``count`` back-to-back calls (µs)."""
    blocks = []
    for _ in range(repeats):
        start = clock()
        for _ in range(count):
            op()
        sync()
        blocks.append((clock() - start) / count * 1e6)
    return float(sorted(blocks)[len(blocks) // 2])


def bench_in_group(
    options: BenchOptions, clock: Callable[[], float] = time.perf_counter
) -> BenchResult:
    """Run the sweep inside an initialized process group; every rank returns the same result."""
    import torch
    import torch.distributed as dist

    world = dist.get_world_size()
    device = (
        torch.device("cuda", torch.cuda.current_device())
        if dist.get_backend() == "nccl"
        else torch.device("cpu")
    )
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    points, notes = [], []
    for name in options.collectives:
        for size in size_sweep(options.min_bytes, options.max_bytes, options.step_factor):
            shard_elems = max(1, size // (_ELEM_BYTES * world))
            elems = (
                shard_elems * world
                if name in ("allgather", "reducescatter")
                else max(1, size // _ELEM_BYTES)
            )
            buffers = {
                "full": torch.ones(elems, dtype=torch.float32, device=device),
                "shard": torch.ones(shard_elems, dtype=torch.float32, device=device),
            }
            op = _call(name, dist, buffers)
            try:
                for _ in range(options.warmup):
                    op()
                sync()
                dist.barrier()
                mean_us = _median_block_us(
                    op, iters_for(size, options), options.repeats, sync, clock
                )
            except RuntimeError as error:  # e.g. a backend without this collective
                notes.append(f"{name}: {str(error).splitlines()[0]}")
                break
            worst = torch.tensor([mean_us], dtype=torch.float64, device=device)
            dist.all_reduce(worst, op=dist.ReduceOp.MAX)
            actual = elems * _ELEM_BYTES
            t_us = float(worst.item())
            points.append(
                BenchPoint(
                    collective=name,
                    num_bytes=actual,
                    num_ranks=world,
                    time_us=t_us,
                    algbw_gbps=algbw_gbps(actual, t_us),
                    busbw_gbps=algbw_gbps(actual, t_us) * busbw_factor(name, world),
                )
            )
    label = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return BenchResult(
        backend=str(dist.get_backend()),
        repeats=options.repeats,
        device=label,
        num_ranks=world,
        points=points,
        fits=fit_points(points, options.fit_min_bytes),
        protocol_fits=fit_points(points, options.fit_min_bytes, protocols=True),
        notes=notes,
    )


def bench_torchrun(options: BenchOptions, backend: str | None = None) -> BenchResult:
    """Entry under torchrun (RANK/WORLD_SIZE in the environment): init, bench, tear down."""
    import torch
    import torch.distributed as dist

    chosen = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if chosen == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(chosen)
    try:
        return bench_in_group(options)
    finally:
        dist.destroy_process_group()


def _spawned(
    rank: int, world: int, port: int, options: BenchOptions, backend: str, out: Any
) -> None:
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    result = bench_torchrun(options, backend)
    if rank == 0:
        out.put(result)


def bench_spawn(options: BenchOptions, num_procs: int, backend: str = "gloo") -> BenchResult:
    """Start ``num_procs`` local processes (torch.multiprocessing) and return rank 0's result."""
    if num_procs < 2:
        raise InputError(f"comm bench needs at least 2 processes, got --nproc {num_procs}")
    import socket

    import torch.multiprocessing as mp
    from torch.multiprocessing.spawn import start_processes

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    context = mp.get_context("spawn")
    queue = context.SimpleQueue()
    start_processes(
        _spawned,
        args=(num_procs, port, options, backend, queue),
        nprocs=num_procs,
        start_method="spawn",
    )
    result: BenchResult = queue.get()
    return result
