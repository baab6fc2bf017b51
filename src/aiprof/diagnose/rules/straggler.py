"""``straggler``: one rank is slower and the others wait for it in collectives (trace sets)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from aiprof.diagnose.finding import Finding
from aiprof.diagnose.rule import Rule

if TYPE_CHECKING:
    from aiprof.distributed.analysis import DistributedReport, Straggler


def find_ranks(report: DistributedReport) -> list[Finding]:
    """One finding per straggler rank of a trace set's cross-rank analysis (``aiprof
    distributed``)."""
    longest_step = max((r.step_time_us for r in report.ranks), default=0.0)
    findings = []
    for s in report.stragglers:
        # the step ends when the slowest rank does: each waiting rank's step shortens by at most
        # its own wait, so the job's step by at most the largest single rank's wait
        largest = max((r.wait_us_per_step for r in report.ranks if r.rank != s.rank), default=0.0)
        saved = min(s.others_wait_us_per_step, largest)
        gain = 100.0 * saved / longest_step if longest_step > 0 else 0.0
        finding = _finding(s, report.compute_imbalance_pct, gain, largest)
        findings.append(replace(finding, estimated_gain_ms_per_step=saved / 1000.0))
    return findings


def _finding(s: Straggler, imbalance_pct: float, gain: float, largest_wait_us: float) -> Finding:
    return Finding(
        category="straggler",
        title=f"Rank {s.rank} is late ({s.reason}); the others wait "
              f"{s.others_wait_us_per_step / 1000.0:.2f} ms per step in all, at most "
              f"{largest_wait_us / 1000.0:.2f} ms on one rank",
        estimated_gain_pct=gain,
        evidence={
            "rank": s.rank,
            "reason": s.reason,
            "others_wait_ms_per_step": round(s.others_wait_us_per_step / 1000.0, 3),
            "largest_single_rank_wait_ms_per_step": round(largest_wait_us / 1000.0, 3),
            "compute_ms_per_step": round(s.compute_us_per_step / 1000.0, 3),
            "last_arrival_share_pct": round(s.last_arrival_share_pct, 1),
            "compute_imbalance_pct": round(imbalance_pct, 1),
        },
        fix=(
            "Balance the ranks: equal work per rank (uneven batches, sequence lengths or "
            "pipeline stages), the same input pipeline speed, no extra logging/eval on one "
            "rank; check that rank's GPU clocks and thermals."
        ),
        model=(
            "the others' wait in collectives removed (the straggler arrives on time): "
            "the step shortens by the largest single rank's wait at most, as a share of "
            "the longest rank's step"
        ),
    )


RULE = Rule(
    category="straggler",
    meaning="one rank is slower and the others wait for it in collectives",
    find_ranks=find_ranks,
    order=110,
)
