"""Step times an aiprof capture measured without the profiler, carried inside the trace.

``aiprof run`` and ``aiprof.profile`` time the steps they leave unprofiled (before the
profiler warms up) and write them into the trace's top-level metadata under ``KEY``::

    "aiprofStepTiming": {"schema": 1, "clock": "cuda_events", "unprofiled_step_us": [...]}

``clock`` is ``cuda_events`` (events recorded on the current stream at each step boundary:
GPU time between boundaries) or ``host`` (``time.perf_counter_ns`` between boundaries, for
CPU-only runs). The diagnosis fits the profiler's per-event cost to their median
(``aiprof.diagnose.calibration``). Traces without the key are read as before.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from aiprof.errors import TraceFormatError
from aiprof.trace.model import Trace

KEY = "aiprofStepTiming"
SCHEMA = 1
CLOCKS = ("cuda_events", "host")


def timing_document(clock: str, unprofiled_step_us: list[float]) -> dict[str, Any]:
    """The metadata value a capture writes (``KEY``)."""
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {CLOCKS}, got {clock!r}")
    return {"schema": SCHEMA, "clock": clock,
            "unprofiled_step_us": [round(float(t), 3) for t in unprofiled_step_us]}


def unprofiled_steps_us(trace: Trace) -> list[float]:
    """The unprofiled step times the capture wrote into ``trace`` (empty when none)."""
    value = trace.metadata.get(KEY)
    if value is None:
        return []
    times = value.get("unprofiled_step_us") if isinstance(value, dict) else None
    if not isinstance(times, list) or not all(
        isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t) and t > 0
        for t in times
    ):
        raise TraceFormatError(
            f"{trace.path}: '{KEY}' must be an object with 'unprofiled_step_us', a list of "
            "positive step times in µs; remove the key to read the trace without it"
        )
    return [float(t) for t in times]


def unprofiled_step_us(trace: Trace) -> float | None:
    """Median unprofiled step time (µs), or None when the trace carries none."""
    times = unprofiled_steps_us(trace)
    return statistics.median(times) if times else None
