"""Rules across ranks: exposed communication (per rank) and stragglers (trace sets)."""

from __future__ import annotations

from typing import Any

from aiprof.analysis.breakdown import temporal_breakdown
from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding


def communication_rule(ctx: Context) -> Finding | None:
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


def straggler_findings(traces: Any) -> list[Finding]:
    """One finding per straggler rank of a trace set (``aiprof.distributed``)."""
    from aiprof.distributed.analysis import analyze_distributed

    report = analyze_distributed(traces)
    return [
        Finding(
            category="straggler",
            title=f"Rank {s.rank} is late ({s.reason}); the others wait "
                  f"{s.others_wait_us_per_step / 1000.0:.2f} ms per step",
            estimated_gain_pct=float(s.others_wait_pct_of_step),
            evidence={
                "rank": s.rank,
                "reason": s.reason,
                "others_wait_ms_per_step": round(s.others_wait_us_per_step / 1000.0, 3),
                "compute_ms_per_step": round(s.compute_us_per_step / 1000.0, 3),
                "last_arrival_share_pct": round(s.last_arrival_share_pct, 1),
                "compute_imbalance_pct": round(report.compute_imbalance_pct, 1),
            },
            fix=(
                "Balance the ranks: equal work per rank (uneven batches, sequence lengths or "
                "pipeline stages), the same input pipeline speed, no extra logging/eval on one "
                "rank; check that rank's GPU clocks and thermals."
            ),
            model="the others' wait in collectives removed (the straggler arrives on time)",
        )
        for s in report.stragglers
    ]
