"""``communication_exposed``: collective time not hidden under compute (per rank)."""

from __future__ import annotations

from aiprof.analysis.breakdown import temporal_breakdown
from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.rule import Rule


def find(ctx: Context) -> Finding | None:
    """Collective time not hidden under compute (``breakdown``'s exposed communication)."""
    temporal = temporal_breakdown(ctx.trace)
    if temporal.communication_us <= 0 or temporal.window_us <= 0:
        return None
    gain = 100.0 * temporal.communication_us / temporal.window_us
    steps = max(len(ctx.trace.steps), 1)
    return Finding(
        category="communication_exposed",
        title=f"{gain:.0f}% of the step is communication not overlapped with compute",
        estimated_gain_pct=gain,
        evidence={
            "exposed_comm_ms_per_step": round(temporal.communication_us / steps / 1000.0, 3),
            "compute_ms_per_step": round(temporal.compute_us / steps / 1000.0, 3),
            "rank": ctx.trace.rank,
        },
        fix=(
            "Overlap gradients' all-reduce with backward: DDP(bucket_cap_mb=...) tuned to the "
            "model (larger buckets for many small layers), gradient_as_bucket_view=True, no "
            "sync between backward and optimizer; for FSDP, forward/backward prefetch."
        ),
        model="the step with the exposed collective time hidden under compute (subtracted)",
    )


RULE = Rule(
    category="communication_exposed",
    meaning="collective time not hidden under compute",
    find=find,
    order=100,
)
