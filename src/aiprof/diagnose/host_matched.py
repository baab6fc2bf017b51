"""The suite's estimates replayed at the host speed its truths were timed at.

A diagnostic, not the score. The score compares each trace's estimates, made at the host speed
of the trace's own session and moment, with gains timed in rounds whose host ran up to 1.3
times faster or slower (the same process's capture against its rounds; more between sessions:
docs/diagnose.md). Here each trace's step is replayed on a host whose CPU work and calls take
the factor ``f`` of the trace's (``diagnose.host_speed``) at which the replayed unchanged step
lasts the median of the truths' base blocks, and every finding's gain is replayed at that
``f``. Where the models are right and the host's speed is what differs, these gains meet the
truths; what they still miss is the models'. The factor is read off the truths' bases, so this
never replaces the trace's own estimate. Only the trace's reported findings are replayed: one
under the minimum gain at the trace's host stays out at any other.
"""

from __future__ import annotations

from dataclasses import replace

from aiprof.diagnose.context import Context
from aiprof.diagnose.engine import rank_findings
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.host_speed import gains_on_hosts, on_host
from aiprof.diagnose.replay import combine
from aiprof.diagnose.rules import cpu_bound

FACTOR_RANGE = (0.5, 2.0)
"""The host factors searched: beyond the 0.75-1.34 the suite's captures ran at against their
own rounds, with room to spare."""
SAME_BASE = 0.02
"""A base within this share of the replayed unchanged step is the trace's host (the base
blocks of one workload spread by more within a session)."""
BISECTIONS = 30


def host_factor(ctx: Context, step_us: float) -> float | None:
    """The factor on the trace's host time nearest 1 at which the replayed unchanged step lasts
    ``step_us`` (per step): 1.0 where it already does within ``SAME_BASE``; None where no
    factor of ``FACTOR_RANGE`` gets there (a GPU-bound step whose truths ran faster than its
    GPU work in the trace: not the host's speed)."""
    steps = max(len(ctx.trace.steps), 1)

    def replayed(factor: float) -> float:
        return ctx.replay_us(on_host(None, factor)) / steps

    at_trace = replayed(1.0)
    if abs(step_us - at_trace) <= SAME_BASE * at_trace:
        return 1.0
    lo, hi = (FACTOR_RANGE[0], 1.0) if step_us < at_trace else (1.0, FACTOR_RANGE[1])
    if not replayed(lo) <= step_us <= replayed(hi):
        return None
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2.0
        if replayed(mid) < step_us:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def raw_gain_at(ctx: Context, finding: Finding, factor: float) -> float | None:
    """``finding``'s replayed gain on a host ``factor`` times the trace's (unbounded by its
    rule); None for a finding that is not a replay of one change."""
    change = finding.change
    if change is None:
        return None
    if finding.category == "cpu_bound":
        graphs = cpu_bound.change(ctx)
        if graphs is None:
            return None
        blockers = cpu_bound.capture_blockers(ctx)
        first = combine(*blockers.values()) if blockers else None
        return cpu_bound.gains_at_host_times(ctx, first, graphs, (factor,))[0]
    if change.launch_work_scale != 1.0:
        return None
    return gains_on_hosts(ctx, change, (factor,))[0]


def at_host(ctx: Context, findings: list[Finding], factor: float) -> list[Finding]:
    """``findings`` with their gains replayed at ``factor``, ranked again. A finding its rule
    held below its replay (a bound, the parts it removes) keeps that share of the replay."""
    moved = []
    for finding in findings:
        at, at_trace = raw_gain_at(ctx, finding, factor), raw_gain_at(ctx, finding, 1.0)
        if at is None or at_trace is None:
            moved.append(finding)
            continue
        share = min(1.0, finding.estimated_gain_pct / at_trace) if at_trace > 0 else 1.0
        moved.append(replace(finding, estimated_gain_pct=at * share))
    return rank_findings(moved)
