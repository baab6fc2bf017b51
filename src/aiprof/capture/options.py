"""What to capture and when: the profiler schedule, duration mode and sampling."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from aiprof.capture.sampler import SamplerOptions
from aiprof.errors import InputError

DEFAULT_SKIP_STEPS = 5
"""Steps left out before the profiler warms up: start-up, first-iteration allocations and
torch.compile's first compilations happen there."""
DEFAULT_WARMUP_STEPS = 1
DEFAULT_ACTIVE_STEPS = 3
"""Recorded steps. The Kineto recipe keeps ``active`` at 3 or fewer: traces grow fast
(reference: kineto-trace-format.md, "Bounded capture recipe")."""


@dataclass(frozen=True, kw_only=True)
class CaptureOptions:
    """Capture settings shared by ``aiprof run`` and ``aiprof.profile``."""

    skip_steps: int = DEFAULT_SKIP_STEPS
    """Steps not profiled at all (``schedule(skip_first=...)``)."""
    warmup_steps: int = DEFAULT_WARMUP_STEPS
    """Steps profiled but discarded, so the recorded steps do not pay the start-up cost."""
    active_steps: int = DEFAULT_ACTIVE_STEPS
    """Steps recorded into the trace."""
    duration_s: float | None = None
    """Duration mode: record this many seconds of wall time instead of a step window."""
    delay_s: float = 0.0
    """Duration mode: seconds to wait after the script starts before recording."""
    steps_from: str | None = None
    """Steps end when a function or ``record_function`` range of this name ends."""
    record_shapes: bool = True
    profile_memory: bool = True
    with_stack: bool = False
    """Python stacks make traces much larger and slower to record; off by default."""
    sample_gpus: bool = True
    """Sample NVML (utilization, clocks, power, memory, temperature, PCIe) during the run."""
    sample_rate_hz: float = 20.0
    """NVML samples per second (1-50)."""

    def __post_init__(self) -> None:
        if self.skip_steps < 0 or self.warmup_steps < 0:
            raise InputError(f"skip and warmup must be >= 0 steps, got {self.skip_steps} "
                             f"and {self.warmup_steps}")
        if self.active_steps < 1:
            raise InputError(f"active must be >= 1 step, got {self.active_steps}")
        duration = self.duration_s
        if duration is not None and not (duration > 0 and math.isfinite(duration)):
            raise InputError(f"--duration must be a positive number of seconds, got {duration}")
        if not (self.delay_s >= 0 and math.isfinite(self.delay_s)):
            raise InputError(f"--delay must be >= 0 seconds, got {self.delay_s}")
        if self.delay_s > 0 and self.duration_s is None:
            raise InputError("--delay only applies with --duration")
        SamplerOptions(rate_hz=self.sample_rate_hz)  # validates the rate

    @property
    def duration_mode(self) -> bool:
        """True when recording a time window rather than a step window."""
        return self.duration_s is not None

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for ``meta.json``, with the mode spelled out."""
        return {"mode": "duration" if self.duration_mode else "steps", **asdict(self)}
