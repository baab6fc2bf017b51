"""The profiler's cost per recorded event, read off the trace itself (no unprofiled timing).

Mechanism (aiprof's model). When the profiler records an op, its enter hook runs between the
op's start timestamp and the start of whatever the op calls next. So the time from a CPU op's
start to the start of its first child op (``aten::linear`` -> ``aten::t``, ``aten::conv2d`` ->
``aten::convolution``) is the dispatcher's hop, which is well under a microsecond unprofiled,
plus the profiler's enter cost of the parent and of the child. Its lower quartile over the
trace (the hops with the least real work between them) scales with what the profiler costs per
event in that process: the host's speed and the profiler's settings (record_shapes,
profile_memory, with_stack) move both together.

The cost per event is ``NESTING_TO_EVENT_COST`` x that quartile. The factor is the median of
``fitted cost / quartile`` over the H200 recordings whose cost could be fitted to their
unprofiled steps (``tests/data/diagnose``, 26 recordings of 2026-12-01;
``tests/diagnose/test_profiler_cost.py`` recomputes it). On them the estimate's median error
is a factor 1.23 (the single default 2.3 µs: 1.57); the worst is the DataLoader case, whose
fitted cost is 0.16 µs (its step is 145 ms of transforms, which the per-event cost hardly
moves), estimated at 2.1 µs.
"""

from __future__ import annotations

import numpy as np

from aiprof.diagnose.calibration import MAX_OVERHEAD_US
from aiprof.trace import Trace

NESTING_TO_EVENT_COST = 2.41
"""Per-event profiler cost / lower quartile of parent-to-first-child start gaps: the median
ratio over the 26 fitted H200 recordings in tests/data/diagnose (see the module docstring)."""
MIN_SAMPLES = 50
"""Fewer parent-child pairs than this: no estimate (the quartile of a handful is noise)."""


def first_child_gaps_us(trace: Trace) -> np.ndarray:
    """Per CPU op that has a child op on its thread: the child's start minus its own start."""
    ops = trace.cpu_ops
    if len(ops) < 2:
        return np.zeros(0)
    starts, ends, tids = ops.ts_us, ops.ts_us + ops.dur_us, ops.tid
    order = np.lexsort((-ends, starts, tids))
    s, e, t = starts[order], ends[order], tids[order]
    nested = (t[1:] == t[:-1]) & (s[1:] >= s[:-1]) & (e[1:] <= e[:-1])
    return np.asarray((s[1:] - s[:-1])[nested])


def estimated_overhead_us(trace: Trace) -> float | None:
    """The profiler's cost per recorded event estimated from the trace's nesting, or None;
    never above the fit's own ceiling ``MAX_OVERHEAD_US``."""
    gaps = first_child_gaps_us(trace)
    if len(gaps) < MIN_SAMPLES:
        return None
    return float(min(NESTING_TO_EVENT_COST * np.percentile(gaps, 25), MAX_OVERHEAD_US))
