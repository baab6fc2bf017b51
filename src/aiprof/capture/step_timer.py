"""Times the steps the profiler leaves out, so the diagnosis can tell its own cost apart.

At each step boundary before the profiler warms up, a CUDA event is recorded on the current
stream (GPU time between boundaries: the step as the device sees it, syncs and launch gaps
included), or, without CUDA, the host clock is read. Recording an event needs no
synchronization; the events are read once, when the profiler starts, after one
synchronization on the last of them (outside the recorded steps).
"""

from __future__ import annotations

import time
from typing import Any

DISCARDED_STEPS = 2
"""Steps not timed at the start of the run: first-iteration allocations, cuDNN autotuning,
lazy module loading and compilation happen in them."""


class StepTimer:
    """Boundary marks of unprofiled steps and the step times between them."""

    def __init__(self, torch: Any, discarded: int = DISCARDED_STEPS) -> None:
        self._torch = torch
        self._discarded = max(1, discarded)
        self.clock = "cuda_events" if torch.cuda.is_available() else "host"
        self._marks: list[Any] = []

    def discard_through(self, steps: int) -> None:
        """Time only the steps after the first ``steps`` (decided while the run goes on)."""
        self._discarded = max(1, steps)

    def mark(self) -> None:
        """A step just ended (called at each boundary while the profiler is off)."""
        if self.clock == "cuda_events":
            event = self._torch.cuda.Event(enable_timing=True)
            event.record()
            self._marks.append(event)
        else:
            self._marks.append(time.perf_counter_ns())

    def step_times_us(self) -> list[float]:
        """Time of each marked step after the first ``discarded`` ones (µs).

        The mark at the end of step ``k`` is ``marks[k - 1]``; step ``k`` lasts from the
        previous mark to its own, so the first step (no mark before it) is never timed.
        """
        marks = self._marks[self._discarded - 1:]
        if len(marks) < 2:
            return []
        if self.clock == "cuda_events":
            marks[-1].synchronize()
            return [1000.0 * a.elapsed_time(b) for a, b in zip(marks, marks[1:], strict=False)]
        return [(b - a) / 1000.0 for a, b in zip(marks, marks[1:], strict=False)]
