"""What the rules see: one trace, its analysis passes (computed once), and the replay."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property, wraps
from typing import TypeVar

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.allocator import AllocatorResult, allocator_calls
from aiprof.analysis.copies import CopiesResult, copies
from aiprof.analysis.dataloader import DataloaderResult, dataloader_time
from aiprof.analysis.fusion_chains import FusionChainsResult, fusion_chains
from aiprof.analysis.host_work import HostWorkResult, host_work
from aiprof.analysis.idle import IdleResult, stream_idle
from aiprof.analysis.launch import LaunchResult, launch_overhead
from aiprof.analysis.layout import LayoutResult, layout_conversions
from aiprof.analysis.occupancy import OccupancyResult, occupancy_pass
from aiprof.analysis.shapes import ShapesResult, misaligned_shapes
from aiprof.analysis.sync import SyncPoints, sync_points
from aiprof.analysis.tensor_cores import TensorCoreResult, tensor_core_usage
from aiprof.diagnose.allocation_replay import ReproducedAllocations, reproduced_allocations
from aiprof.diagnose.calibration import DEFAULT_OVERHEAD_US, Calibration, fit_overhead
from aiprof.diagnose.profiler_cost import estimated_overhead_us
from aiprof.diagnose.replay import (
    WAITING_CALL_FACTOR,
    Change,
    Replayed,
    Timeline,
    replay,
    simulate,
)
from aiprof.diagnose.timeline import build_timeline
from aiprof.errors import AiprofError, InputError
from aiprof.gpu.trace_occupancy import trace_spec
from aiprof.hardware import GpuSpec
from aiprof.tensor.ceilings_model import Ceilings
from aiprof.trace import Trace
from aiprof.trace.capture_timing import unprofiled_step_us
from aiprof.trace.heap import release_freed

T = TypeVar("T")


def _releasing(compute: Callable[[Context], T]) -> Callable[[Context], T]:
    """``compute``, then the heap its temporaries freed given back (``heap.release_freed``):
    a pass over every event frees arrays of the trace's length in glibc's heap, which holds
    them in the process's memory; the next pass's peak came on top of them (the replays of a
    2.5 GB trace peaked at 1,187-1,227 MiB without it, 1,136 with it; docs/scale.md)."""

    @wraps(compute)
    def computed(ctx: Context) -> T:
        try:
            return compute(ctx)
        finally:
            release_freed()

    return computed


DEFAULT_LAUNCH_CALL_US = 5.0
"""A kernel launch call's CPU time when the trace has none to measure: the median kernel launch
call is 4.0-16.0 µs on the public traces (47.8 µs on the Triton example), 5.2 µs on the V100
``ns_resolution_trace`` (measured 2026-12-01, docs/diagnose.md "Limitations")."""


@dataclass(frozen=True, kw_only=True)
class DiagnoseOptions:
    """Thresholds of the diagnosis and the replay's profiler correction."""

    min_gain_pct: float = 1.0
    """Findings whose estimated gain is below this are dropped."""
    worth_fixing_pct: float = 5.0
    """Below this for every finding, the verdict says there is nothing worth fixing."""
    max_items: int = 5
    """Offending kernels/ops listed per finding."""
    ceilings: Ceilings | None = None
    """Measured roofs of the device (``aiprof ceilings --save``): they replace the datasheet
    peaks, DRAM bandwidth and host-link bandwidth in the rules' models."""
    profiler_overhead_us: float | None = None
    """CPU time the profiler adds per recorded CPU op or runtime call, removed from the
    replay's CPU time. None: fitted to the step time measured without the profiler
    (``unprofiled_step_us``, or the capture's timing in the trace), else
    ``calibration.DEFAULT_OVERHEAD_US``. 0 replays the trace as recorded."""
    unprofiled_step_us: float | None = None
    """The step's time without the profiler (µs), measured by the user; overrides the one an
    aiprof capture wrote into the trace."""

    def __post_init__(self) -> None:
        for name in ("min_gain_pct", "worth_fixing_pct"):
            if not 0.0 <= getattr(self, name) <= 100.0:
                raise InputError(f"{name} must be between 0 and 100, got {getattr(self, name)}")
        if self.max_items < 1:
            raise InputError(f"max_items must be at least 1, got {self.max_items}")
        overhead = self.profiler_overhead_us
        if overhead is not None and not 0.0 <= overhead < 1000.0:
            raise InputError(f"profiler_overhead_us must be in [0, 1000) µs, got {overhead}")
        step = self.unprofiled_step_us
        if step is not None and not (0.0 < step < 1e12):
            raise InputError(f"unprofiled_step_us must be a positive time in µs, got {step}")


class Context:
    """Lazily computed passes of one trace and the gain of a replay change."""

    def __init__(self, trace: Trace, options: DiagnoseOptions) -> None:
        self.trace = trace
        self.options = options

    @cached_property
    def spec(self) -> GpuSpec:
        return trace_spec(self.trace)

    def peak_flops(self, dtype: str) -> float | None:
        """Matrix-path peak of ``dtype``: measured ceilings first, else the datasheet."""
        measured = self.options.ceilings
        if measured is not None:
            return measured.matmul_flops_per_s.get(dtype)
        try:
            return self.spec.peak_flops(dtype) if self.spec.has_peak(dtype) else None
        except AiprofError:
            return None

    def memory_bytes_per_s(self) -> float | None:
        """DRAM bandwidth: measured ceilings first, else the datasheet."""
        if self.options.ceilings is not None:
            return self.options.ceilings.memory_bytes_per_s
        try:
            return self.spec.mem_bandwidth_bytes_per_s
        except AiprofError:
            return None

    def pinned_h2d_bytes_per_s(self) -> float | None:
        """Pinned host-to-device bandwidth: measured, else the datasheet host link's per-direction
        half (``host_link_bytes_per_s`` counts both directions)."""
        measured = self.options.ceilings
        if measured is not None and "h2d_pinned_bytes_per_s" in measured.extra:
            return measured.extra["h2d_pinned_bytes_per_s"]
        product = self.spec.product
        if product is None or not product.host_link_bytes_per_s:
            return None
        return product.host_link_bytes_per_s / 2

    @cached_property
    @_releasing
    def idle(self) -> IdleResult:
        return stream_idle(self.trace)

    @cached_property
    def launch(self) -> LaunchResult:
        return launch_overhead(self.trace)

    @cached_property
    def syncs(self) -> SyncPoints:
        return sync_points(self.trace)

    @cached_property
    def copies(self) -> CopiesResult:
        return copies(self.trace)

    @cached_property
    def dataloader(self) -> DataloaderResult:
        return dataloader_time(self.trace)

    @cached_property
    def allocator(self) -> AllocatorResult:
        return allocator_calls(self.trace)

    @cached_property
    def allocations(self) -> ReproducedAllocations | None:
        """The steps' ``[memory]`` events and the caching allocator's replay of them, where it
        makes the trace's own new segments (``allocation_replay``); read once for the rules."""
        return reproduced_allocations(self.trace) if self.allocator.num_mallocs else None

    @cached_property
    @_releasing
    def host_work(self) -> HostWorkResult:
        """Host work other than launching (ops that launch nothing, long calls) of at least
        ``WAITING_CALL_FACTOR`` median kernel launch calls (``DEFAULT_LAUNCH_CALL_US`` without
        any),
        the DataLoader's and the allocator's spans left to their rules."""
        launches = self.trace.kernels.launch_row[self.trace.kernels.launch_row >= 0]
        calls = self.trace.runtime.dur_us[launches]  # kernel launches: a copy's call may block
        median = float(np.median(calls)) if len(calls) else DEFAULT_LAUNCH_CALL_US
        min_us = WAITING_CALL_FACTOR * median
        owned = iv.union_all(self.dataloader.spans, self.allocator.call_spans)
        syncs = self.syncs.call_row[self.syncs.gpu_row < 0]  # synchronize calls, not copies
        return host_work(self.trace, min_us, owned, syncs)

    @cached_property
    def layout(self) -> LayoutResult:
        return layout_conversions(self.trace)

    @cached_property
    def tensor_cores(self) -> TensorCoreResult:
        return tensor_core_usage(self.trace)

    @cached_property
    def shapes(self) -> ShapesResult:
        return misaligned_shapes(self.trace)

    @cached_property
    def chains(self) -> FusionChainsResult:
        return fusion_chains(self.trace)

    @cached_property
    @_releasing
    def occupancy(self) -> OccupancyResult:
        return occupancy_pass(self.trace)

    @cached_property
    @_releasing
    def recorded_timeline(self) -> Timeline:
        """The replay's timeline of the trace as recorded (no profiler correction)."""
        return build_timeline(self.trace, self.syncs, self.allocator)

    @cached_property
    def calibration(self) -> Calibration:
        """The profiler's per-event cost: given, fitted to the unprofiled step, or default."""
        given = self.options.profiler_overhead_us
        if given is not None:
            return Calibration(given, "given")
        estimate = estimated_overhead_us(self.trace)
        fallback, source = ((estimate, "estimated") if estimate is not None
                            else (DEFAULT_OVERHEAD_US, "default"))
        unprofiled = self.options.unprofiled_step_us or unprofiled_step_us(self.trace)
        if unprofiled is None:
            return Calibration(fallback, source)
        return fit_overhead(self.recorded_timeline, len(self.trace.steps), unprofiled,
                            fallback, source)

    @cached_property
    def timeline(self) -> Timeline:
        cal = self.calibration
        return replace(self.recorded_timeline, profiler_overhead_us=cal.overhead_us,
                       gpu_scale=cal.gpu_scale)

    @cached_property
    @_releasing
    def base_replayed(self) -> Replayed:
        """The replay of the unchanged step with its queues' host-wait (profiler taken out)."""
        return simulate(self.timeline)

    @cached_property
    def base_us(self) -> float:
        return self.base_replayed.step_us

    @cached_property
    @_releasing
    def as_recorded_us(self) -> float:
        """The replay without the profiler-overhead correction (to compare with the trace)."""
        return replay(self.recorded_timeline)

    @property
    def step_us(self) -> float:
        steps = max(len(self.trace.steps), 1)
        return self.timeline.measured_us / steps

    def replay_us(self, change: Change) -> float:
        """The steps replayed with ``change`` (µs, all steps)."""
        replayed = replay(self.timeline, change)
        release_freed()  # the replay's columns (see ``_releasing``)
        return float(replayed)

    def gain_pct(self, change: Change) -> float:
        """Step time saved by ``change``, in % of the replayed step (0 when nothing to replay),
        within [0, 100]."""
        if self.base_us <= 0:
            return 0.0
        saved = 100.0 * (1.0 - self.replay_us(change) / self.base_us)
        return float(min(100.0, max(0.0, saved)))

    def gain_ms_per_step(self, gain_pct: float) -> float:
        """``gain_pct`` of the replayed step (the profiler's cost taken out), in ms per step;
        the measured step when there is nothing to replay."""
        steps = max(len(self.trace.steps), 1)
        step_us = self.base_us / steps if self.base_us > 0 else self.step_us
        return gain_pct / 100.0 * step_us / 1000.0

    def remaining_step_us(self, gain_pct: float) -> float:
        """The measured step time scaled by the replay's ratio."""
        return self.step_us * (1.0 - gain_pct / 100.0)

    def top_kernels(self, rows: object, limit: int | None = None) -> list[dict[str, object]]:
        """The kernels of ``rows`` grouped by name, most time first (evidence)."""
        import numpy as np

        gpu = self.trace.gpu_ops
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) == 0:
            return []
        ids, inverse = np.unique(gpu.name_id[rows], return_inverse=True)
        totals = np.bincount(inverse, weights=gpu.dur_us[rows])
        counts = np.bincount(inverse)
        order = np.argsort(-totals, kind="stable")[: limit or self.options.max_items]
        return [
            {"name": self.trace.name(int(ids[i])), "count": int(counts[i]),
             "total_us": round(float(totals[i]), 1)}
            for i in order
        ]
