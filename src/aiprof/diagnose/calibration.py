"""The profiler's own cost per recorded event, fitted so the replay reproduces the run unprofiled.

A profiled step is slower than the same step unprofiled: every CPU op and runtime call the
profiler records costs CPU time. How much changes with the machine and the process (0 to 6.1
µs per event fitted on one H200 in one morning, 13.5 µs in a recording of the day before;
docs/diagnose.md), so a constant is only a fallback. When the step time *without* the
profiler is known (``aiprof run`` and ``aiprof.profile`` time the unprofiled steps before
recording, ``capture_timing``; or the user gives it), the cost is the one that makes the
replay of nothing changed last that long: the replay is monotone in it, so a bisection finds
it.

When no per-event cost can explain the difference (the unprofiled step is at or below the
replay with every event costing ``MAX_OVERHEAD_US``), the GPU itself ran slower under the
profiler: the fp32 conv case of the H200 suite is 11.1 ms profiled and 9.1 ms unprofiled with
its GPU busy throughout. The host's cost is then the estimate (``profiler_cost.py``, else the
default) and the GPU ops' durations are scaled (``gpu_scale``) so the replay lasts the
unprofiled step. Keeping the default host cost alone left such a replay host-bound where the
run was not, and a CUDA graph was credited with the GPU's own slowdown. That explanation holds
only where the GPU fills the replayed step (``GPU_BOUND_SHARE``): where the host's calls
between syncs pace it, a faster GPU shortens it little, and scaling the ops until it fits
would shrink every GPU-side fix with them; the estimate is kept there, and the note says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiprof.diagnose.replay import Timeline

DEFAULT_OVERHEAD_US = 2.3
"""Per recorded CPU op or runtime call, when the trace has no unprofiled step time: the median
of the costs fitted on the H200 suite's recordings (docs/diagnose.md; checked by
tests/diagnose/test_calibration.py against the committed data)."""
MAX_OVERHEAD_US = 25.0
"""Upper end of the search: above every cost fitted on the H200 recordings (13.5 µs at most)."""
TOLERANCE_US = 0.01


@dataclass(frozen=True)
class Calibration:
    """The per-event profiler cost the replay takes out, and where it came from."""

    overhead_us: float
    source: str
    """``fitted`` (to the unprofiled step), ``given`` (``DiagnoseOptions``), ``default``."""
    unprofiled_step_us: float | None = None
    note: str = ""
    gpu_scale: float = 1.0
    """Factor on the GPU ops' durations (below 1: the GPU was slower under the profiler)."""

    def document(self) -> dict[str, object]:
        """The ``profiler`` object of ``aiprof.diagnosis/1``."""
        unprofiled = self.unprofiled_step_us
        return {"overhead_us": round(self.overhead_us, 3), "source": self.source,
                "unprofiled_step_us": round(unprofiled, 3) if unprofiled is not None else None,
                "gpu_scale": round(self.gpu_scale, 4)}


def fit_overhead(
    timeline: Timeline, num_steps: int, unprofiled_step_us: float,
    fallback_us: float = DEFAULT_OVERHEAD_US, fallback_source: str = "default",
) -> Calibration:
    """The per-event cost at which the replay's step equals ``unprofiled_step_us``; when none
    can, ``fallback_us`` with the GPU ops scaled to fit (``fit_gpu_scale``)."""
    from aiprof.diagnose.replay import replay  # lazily: the CLI's parsers read the default

    steps = max(num_steps, 1)

    def step_us(overhead_us: float) -> float:
        return replay(replace(timeline, profiler_overhead_us=overhead_us)) / steps

    as_recorded = step_us(0.0)
    if unprofiled_step_us >= as_recorded:
        return Calibration(0.0, "fitted", unprofiled_step_us,
                           "the unprofiled step is no shorter than the profiled one")
    if unprofiled_step_us <= step_us(MAX_OVERHEAD_US):
        busy = gpu_busy_share(replace(timeline, profiler_overhead_us=fallback_us))
        if busy < GPU_BOUND_SHARE:  # the host's calls pace the step, not the GPU's work
            return Calibration(
                fallback_us, fallback_source, unprofiled_step_us,
                f"the unprofiled step ({unprofiled_step_us / 1000:.3f} ms) is shorter than "
                f"any CPU-side profiler cost explains, and the GPU is busy {100 * busy:.0f}% "
                f"of the replayed step, so a GPU slower under the profiler cannot explain it "
                f"either: the {fallback_source} per-event cost is kept and the replay may be "
                f"longer than the run")
        scale = fit_gpu_scale(replace(timeline, profiler_overhead_us=fallback_us), steps,
                              unprofiled_step_us)
        return Calibration(
            fallback_us, fallback_source, unprofiled_step_us,
            f"the unprofiled step ({unprofiled_step_us / 1000:.3f} ms) is shorter than any "
            f"CPU-side profiler cost explains: the GPU ran slower under the profiler; its ops "
            f"are replayed {scale:.3f}x as long, with the {fallback_source} per-event cost",
            gpu_scale=scale,
        )
    low, high = 0.0, MAX_OVERHEAD_US
    while high - low > TOLERANCE_US:
        middle = (low + high) / 2
        low, high = (middle, high) if step_us(middle) > unprofiled_step_us else (low, middle)
    return Calibration((low + high) / 2, "fitted", unprofiled_step_us)


GPU_BOUND_SHARE = 0.9
"""The busiest stream's share of the replayed step above which a GPU slower under the profiler
can explain an unprofiled step shorter than any CPU-side cost does (aiprof's threshold: the
suite's GPU-bound steps that reach ``fit_gpu_scale``, ViT-S, hand-written attention, FCN, the
wide MLP and the misaligned convolution, are busy 97-100% of their replayed step, recorded
2026-12-03; the UNet with ``empty_cache`` of the same recording, 75%, is paced by its
serialized cudaFree calls)."""


def gpu_busy_share(timeline: Timeline) -> float:
    """The busiest stream's GPU time in the replay of the unchanged step, as a share of it
    (the ops queued before the steps left out)."""
    from aiprof.diagnose.replay import simulate

    replayed = simulate(timeline)
    queued = timeline.gpu_row[:timeline.num_queued] >= 0
    backlog_us = float(timeline.gpu_dur_us[:timeline.num_queued][queued].sum())
    busy_us = max(max(replayed.busy_us, default=0.0) - backlog_us, 0.0)
    return min(busy_us / max(replayed.step_us, 1e-9), 1.0)


MIN_GPU_SCALE = 0.05
"""Lower end of the GPU scale's search (a GPU 20x slower under the profiler: none seen)."""


def fit_gpu_scale(timeline: Timeline, num_steps: int, unprofiled_step_us: float) -> float:
    """The factor on GPU durations at which the replay's step equals ``unprofiled_step_us``
    (the replay is monotone in it); 1 when the replay is already no longer than that."""
    from aiprof.diagnose.replay import replay

    steps = max(num_steps, 1)

    def step_us(scale: float) -> float:
        return replay(replace(timeline, gpu_scale=scale)) / steps

    if step_us(1.0) <= unprofiled_step_us:
        return 1.0
    low, high = MIN_GPU_SCALE, 1.0
    while high - low > 1e-4:
        middle = (low + high) / 2
        low, high = (middle, high) if step_us(middle) < unprofiled_step_us else (low, middle)
    return (low + high) / 2
