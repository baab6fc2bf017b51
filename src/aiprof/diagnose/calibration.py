"""The profiler's own cost per recorded event, fitted so the replay reproduces the run unprofiled.

A profiled step is slower than the same step unprofiled: every CPU op and runtime call the
profiler records costs CPU time. How much changes with the machine and the process (0 to 6.1
µs per event fitted on one H200 in one morning, 13.5 µs in a recording of the day before;
docs/diagnose.md), so a constant is only a fallback. When the step time *without* the
profiler is known (``aiprof run`` and ``aiprof.profile`` time the unprofiled steps before
recording, ``capture_timing``; or the user gives it), the cost is the one that makes the
replay of nothing changed last that long: the replay is monotone in it, so a bisection finds
it.

The fit is refused, and the default kept, when no per-event cost can explain the difference:
the unprofiled step is at or below the replay with every event costing ``MAX_OVERHEAD_US``
(the step is GPU-bound, or its GPU work itself was slower under the profiler).
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

    def document(self) -> dict[str, object]:
        """The ``profiler`` object of ``aiprof.diagnosis/1``."""
        unprofiled = self.unprofiled_step_us
        return {"overhead_us": round(self.overhead_us, 3), "source": self.source,
                "unprofiled_step_us": round(unprofiled, 3) if unprofiled is not None else None}


def fit_overhead(timeline: Timeline, num_steps: int, unprofiled_step_us: float) -> Calibration:
    """The per-event cost at which the replay's step equals ``unprofiled_step_us``."""
    from aiprof.diagnose.replay import replay  # lazily: the CLI's parsers read the default

    steps = max(num_steps, 1)

    def step_us(overhead_us: float) -> float:
        return replay(replace(timeline, profiler_overhead_us=overhead_us)) / steps

    as_recorded = step_us(0.0)
    if unprofiled_step_us >= as_recorded:
        return Calibration(0.0, "fitted", unprofiled_step_us,
                           "the unprofiled step is no shorter than the profiled one")
    if unprofiled_step_us <= step_us(MAX_OVERHEAD_US):
        return Calibration(
            DEFAULT_OVERHEAD_US, "default", unprofiled_step_us,
            f"the unprofiled step ({unprofiled_step_us / 1000:.3f} ms) is shorter than any "
            "CPU-side profiler cost explains (a GPU-bound step, or GPU work slower under the "
            "profiler): default per-event cost kept",
        )
    low, high = 0.0, MAX_OVERHEAD_US
    while high - low > TOLERANCE_US:
        middle = (low + high) / 2
        low, high = (middle, high) if step_us(middle) > unprofiled_step_us else (low, middle)
    return Calibration((low + high) / 2, "fitted", unprofiled_step_us)
