"""The verdict: the top cause, and what every fix at once would gain (one replay, not a sum)."""

from __future__ import annotations

import math
from dataclasses import replace

from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change, combine


def all_fixes(changes: list[Change]) -> Change:
    """One change applying every fix; an op two fixes shorten gets the shorter duration."""
    merged = combine(*changes)
    durations: dict[int, float] = {}
    for change in changes:
        for row, dur in change.gpu_dur_us.items():
            durations[row] = min(dur, durations.get(row, dur))
    return replace(merged, gpu_dur_us=durations)


def combined_gain_pct(ctx: Context | None, findings: list[Finding]) -> float:
    """Every finding's fix applied at once: one replay of all their changes; the gains that do
    not come from the replay (communication on a CPU-only run, stragglers) then come off the
    step it leaves. Never above the sum of the parts, nor 100, nor below the largest fix alone:
    applying that one alone is always open to the user, where the replay finds another fix
    harmful on top of it (as ``torch.compile``'s host cost can be once TF32 shortened the GPU's
    work)."""
    return combine_gains(replayed_gain_pct(ctx, findings), findings)


def replayed_gain_pct(ctx: Context | None, findings: list[Finding]) -> float:
    """The replay of every finding's change at once (0 without a change or a context)."""
    changes = [f.change for f in findings if f.change is not None]
    return ctx.gain_pct(all_fixes(changes)) if ctx is not None and changes else 0.0


def combine_gains(replayed: float, findings: list[Finding]) -> float:
    """``combined_gain_pct`` from the replay of the findings' changes (``replayed_gain_pct``)
    and the gains that are not replay changes (cross-rank findings have none)."""
    outside = [f.estimated_gain_pct for f in findings if f.change is None]
    remaining = (100.0 - replayed) * math.prod(1.0 - min(g, 100.0) / 100.0 for g in outside)
    total = sum(f.estimated_gain_pct for f in findings)
    largest = max((f.estimated_gain_pct for f in findings), default=0.0)
    return float(max(0.0, largest, min(100.0 - remaining, total, 100.0)))


def verdict(findings: list[Finding], options: DiagnoseOptions, analysed: bool, step_us: float,
            combined_pct: float) -> str:
    """One sentence: the top cause and all fixes together, or that nothing is worth fixing."""
    if not analysed:
        return "No GPU activity in the trace: nothing to diagnose on the device side."
    worth = [f for f in findings if f.estimated_gain_pct >= options.worth_fixing_pct]
    if not worth:
        best = max(findings, key=lambda f: f.estimated_gain_pct, default=None)
        largest = f" (largest: {best.category}, {best.estimated_gain_pct:.1f}%)" if best else ""
        return (f"Nothing worth fixing: no cause would save {options.worth_fixing_pct:g}% or "
                f"more of the {step_us / 1000:.2f} ms step{largest}.")
    top = worth[0]
    outside = sorted({f.category for f in findings if f.change is None})
    how = "one replay with every fix applied" + (
        f", then {' and '.join(outside)} on the step it leaves" if outside else "")
    together = (f"; all {len(findings)} fixes together: {combined_pct:.0f}% ({how})"
                if len(findings) > 1 else "")
    first = [f.category for f in findings if f.category in top.needs_first]
    what = (f"fix {' and '.join(first)} first, then {top.category}" if first
            else f"fix {top.category} first")
    return (f"Step {step_us / 1000:.2f} ms; {what}: up to "
            f"{top.estimated_gain_pct:.0f}% of the step ({len(worth)} finding(s) above "
            f"{options.worth_fixing_pct:g}%{together}).")
