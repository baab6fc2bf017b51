"""How the suite measures: interleaved blocks without the profiler, then traces.

Every variant (the planted base and each fix) is built and warmed up first (compilations,
cuDNN autotuning, a loader's first batches). Then ``rounds`` rounds (3, more for fast steps:
``interleaved``), each a block of the base and one block of every fix, in an order rotated
from round to round; a block is ``warmup`` steps then ``measure`` steps, each
timed with CUDA events around it (host work such as a DataLoader is inside the events: the GPU
reaches the end event only after the step's launches). A block's time is the median of its
steps, or their mean where steps alternate (a starving loader: a median would hide the starved
steps). A fix's time is the median of its blocks; its gain is against the base's median; the
per-round gains (each against the base block of the same round) give the spread.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from counterfactual.knobs import Ctx, Knobs, Step, set_tf32

MEASURE = 6
ROUNDS = 3
"""The fewest rounds; fast steps get more (``interleaved``'s ``timed_s``)."""
MAX_ROUNDS = 15
TIMED_S = 4.0
"""Rounds continue, up to ``MAX_ROUNDS``, until a workload's rounds took this long."""
TRACE_ACTIVE = 2
"""Steps recorded by ``aiprof.profile``: two show the step's boundaries twice."""
PLAIN_ACTIVE = 1
"""Steps in the plain torch.profiler trace: one, so that 26 workloads' traces of both kinds
stay near 8 MB (the diagnose suite's 3-step trace of a 12-layer GPT-2 is 1.08 MB gzipped)."""


def with_tf32(mode: str, step: Step) -> Step:
    def run() -> None:
        set_tf32(mode)
        step()
    return run


def graphed(step: Step, tf32: str) -> Step:
    """The whole step captured once (after 3 warm-up steps on a side stream) and replayed.

    The replay keeps ``step`` alive: the graph reads and writes the memory of the tensors the
    step holds (the model's parameters, the optimizer's state, the inputs), which the caching
    allocator would otherwise hand to the next variant built. Until 2026-12-03 it returned
    ``graph.replay`` alone: two workloads' replays then read another variant's memory as token
    ids and class targets (an illegal memory access, a device-side assert); the others' graphs,
    timed again with their step kept, took what they had taken (``docs/diagnose.md``)."""
    set_tf32(tf32)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    torch.cuda.synchronize()

    def replay() -> None:
        graph.replay()
    replay.captured = step  # type: ignore[attr-defined]  # the memory the graph uses
    return replay


def build_variant(build: Callable[[Ctx], Step], knobs: Knobs, device: str,
                  smoke: bool) -> Step:
    step = build(Ctx(knobs, device, smoke))
    if knobs.cuda_graph:
        return graphed(step, knobs.tf32)
    return with_tf32(knobs.tf32, step)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def block_ms(step: Step, warmup: int, measure: int, device: str) -> list[float]:
    """Each step's time (ms) in one block, after ``warmup`` untimed steps."""
    for _ in range(warmup):
        step()
    sync(device)
    if device != "cuda":
        times = []
        for _ in range(measure):
            began = time.perf_counter()
            step()
            times.append(1e3 * (time.perf_counter() - began))
        return times
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(measure)]
    for start, end in events:
        start.record()
        step()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in events]


def warm(step: Step, steps: int, device: str) -> float:
    """Run ``steps`` steps; the seconds they took (a compile's first call is most of it)."""
    began = time.monotonic()
    for _ in range(steps):
        step()
    sync(device)
    return time.monotonic() - began


def interleaved(variants: dict[str, tuple[Step, int]], rounds: int, measure: int,
                device: str, mean: bool, timed_s: float = 0.0,
                max_rounds: int = 0) -> dict[str, list[float]]:
    """Each variant's block times (ms), one per round, blocks interleaved within a round;
    ``variants`` maps a name to its step and its warm-up steps before each block.

    At least ``rounds`` rounds; then more, up to ``max_rounds``, while the rounds so far took
    less than ``timed_s`` seconds: a fast step gets more rounds for the same wall time, so a
    burst of host contention (seen to slow a launch-bound step's blocks 2.5x, 2026-12-02) moves
    its median less. Round ``r`` starts at the ``r``-th variant (rotated order), so no variant
    always runs first in a round."""
    out: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    began, done = time.monotonic(), 0
    while done < rounds or (done < max_rounds and time.monotonic() - began < timed_s):
        shift = done % len(names)
        for name in names[shift:] + names[:shift]:
            step, warmup = variants[name]
            times = block_ms(step, warmup, measure, device)
            out[name].append(statistics.fmean(times) if mean else statistics.median(times))
        done += 1
    return out


def torch_trace(step: Step, warmup: int, path: Path, device: str) -> None:
    """A plain torch.profiler trace of ``PLAIN_ACTIVE`` steps after ``warmup`` steps."""
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    warm(step, warmup, device)
    with tempfile.TemporaryDirectory() as folder:
        raw = Path(folder) / "trace.json"
        with profile(activities=activities, record_shapes=True,
                     schedule=schedule(wait=0, warmup=1, active=PLAIN_ACTIVE, repeat=1),
                     on_trace_ready=lambda prof: prof.export_chrome_trace(str(raw))) as prof:
            for _ in range(1 + PLAIN_ACTIVE):
                step()
                prof.step()
        sync(device)
        gzip_to(raw, path)


def gzip_to(src: Path, dst: Path) -> None:
    import gzip

    with src.open("rb") as fin, gzip.open(dst, "wb", compresslevel=9) as fout:
        shutil.copyfileobj(fin, fout)


def aiprof_record(step: Step, warmup: int, folder: Path, name: str, device: str) -> list[float]:
    """An ``aiprof.profile`` record (default schedule, ``TRACE_ACTIVE`` recorded steps) in
    ``folder``; returns the unprofiled step times (ms) the capture measured."""
    from aiprof.capture.api import profile as aiprof_profile
    from aiprof.capture.options import CaptureOptions

    warm(step, warmup, device)
    options = CaptureOptions(active_steps=TRACE_ACTIVE, sample_gpus=False)
    steps = options.skip_steps + options.warmup_steps + options.active_steps
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        with aiprof_profile(out=run_dir, name=name, active_steps=TRACE_ACTIVE,
                            sample_gpus=False) as capture:
            for _ in range(steps):
                step()
                capture.step()
        sync(device)
        folder.mkdir(parents=True, exist_ok=True)
        for item in run_dir.iterdir():
            if item.is_file():
                shutil.copyfile(item, folder / item.name)
        meta = json.loads((run_dir / "meta.json").read_text())
    return [t / 1000.0 for t in meta["capture"].get("unprofiled_step_us", [])]
