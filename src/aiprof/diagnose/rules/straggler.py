"""``straggler``: one rank is slower and the others wait for it in collectives (trace sets)."""

from __future__ import annotations

from aiprof.diagnose.finding import Finding
from aiprof.diagnose.rule import Rule
from aiprof.trace import TraceSet


def find_ranks(traces: TraceSet) -> list[Finding]:
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


RULE = Rule(
    category="straggler",
    meaning="one rank is slower and the others wait for it in collectives",
    find_ranks=find_ranks,
    order=110,
)
