"""``diagnose(target)``: run every rule on every rank, rank the findings, write a verdict."""

from __future__ import annotations

import os
from dataclasses import replace

from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.explain import bounded_gain
from aiprof.diagnose.finding import Diagnosis, Finding
from aiprof.diagnose.rules import RULES
from aiprof.diagnose.scope import check_supported, scope_notes
from aiprof.diagnose.verdict import combined_gain_pct, verdict
from aiprof.errors import AiprofError
from aiprof.trace import Trace, TraceSet

UNKNOWN_GPU = "unknown GPU (no deviceProperties)"


def diagnose_trace(
    trace: Trace, options: DiagnoseOptions | None = None
) -> tuple[list[Finding], Context]:
    """Every rule's finding on one trace (unranked, gains within [0, 100] and explained) and
    the context they came from."""
    ctx = Context(trace, options or DiagnoseOptions())
    rules = [r for r in RULES if r.find and (trace.has_gpu or r.without_gpu)]
    found = [f for rule in rules if rule.find and (f := rule.find(ctx)) is not None]
    return [explained(ctx, f) for f in found], ctx


def explained(ctx: Context, finding: Finding) -> Finding:
    """The finding with its gain bounded to [0, 100], in ms per step too, and (for a replay
    change) the parts the replay removed in its evidence (``replay_removed``), which also
    bound it (``explain.bounded_gain``)."""
    gain = min(100.0, max(0.0, finding.estimated_gain_pct))
    if finding.change is None:  # a share of the measured step
        return replace(finding, estimated_gain_pct=gain,
                       estimated_gain_ms_per_step=gain / 100.0 * ctx.step_us / 1000.0)
    gain, parts = bounded_gain(ctx, finding.change, gain)
    evidence = {**finding.evidence, "replay_removed": parts}
    gain_ms = ctx.gain_ms_per_step(gain)
    return replace(finding, estimated_gain_pct=gain, evidence=evidence,
                   estimated_gain_ms_per_step=gain_ms)


def diagnose(
    target: Trace | TraceSet | str | os.PathLike[str], options: DiagnoseOptions | None = None
) -> Diagnosis:
    """Ranked findings of a trace, a trace set (all ranks) or a path (trace, directory, run)."""
    return diagnose_ranks(target, options)[0]


def diagnose_ranks(
    target: Trace | TraceSet | str | os.PathLike[str], options: DiagnoseOptions | None = None
) -> tuple[Diagnosis, list[Context]]:
    """The diagnosis and each rank's context (its passes, for the report's per-rank views)."""
    options = options or DiagnoseOptions()
    traces = _as_trace_set(target)
    check_supported(traces)
    per_rank = [diagnose_trace(t, options) for t in traces]
    kept = [[f for f in found if f.estimated_gain_pct >= options.min_gain_pct]
            for found, _ in per_rank]
    findings = _merge_ranks([(ctx.trace.rank, f) for found, (_, ctx) in zip(kept, per_rank,
                                                                            strict=True)
                             for f in found])
    notes = [n for _, ctx in per_rank for n in scope_notes(ctx)]
    across = _across_ranks(traces, notes)
    ranked = rank_findings([f for f in findings + across
                            if f.estimated_gain_pct >= options.min_gain_pct])
    combined = max((combined_gain_pct(ctx, found + across)
                    for found, (_, ctx) in zip(kept, per_rank, strict=True)), default=0.0)
    slowest = max((ctx for _, ctx in per_rank), key=lambda c: c.step_us)
    device = slowest.trace.device
    has_gpu = any(t.has_gpu for t in traces)
    return Diagnosis(
        findings=ranked,
        verdict=verdict(ranked, options, has_gpu or bool(ranked), slowest.step_us, combined),
        step_us=slowest.step_us,
        replay_step_us=slowest.as_recorded_us / max(len(slowest.trace.steps), 1)
        if has_gpu
        else 0.0,
        device=device.name if device else (UNKNOWN_GPU if has_gpu else None),
        num_ranks=len(traces),
        notes=notes + ([slowest.calibration.note] if has_gpu and slowest.calibration.note
                       else []),
        profiler=slowest.calibration if has_gpu else None,
        combined_gain_pct=combined,
    ), [ctx for _, ctx in per_rank]


def _across_ranks(traces: TraceSet, notes: list[str]) -> list[Finding]:
    """The findings of the rules across ranks (trace sets of several ranks)."""
    found: list[Finding] = []
    if len(traces) < 2:
        return found
    for rule in RULES:
        if rule.find_ranks is None:
            continue
        try:
            found.extend(replace(f, estimated_gain_pct=min(100.0, max(0.0, f.estimated_gain_pct)))
                         for f in rule.find_ranks(traces))
        except AiprofError as error:
            notes.append(f"{rule.category} analysis skipped: {error}")
    return found


def rank_findings(findings: list[Finding]) -> list[Finding]:
    """Sorted by estimated gain (highest first; equal gains by category), ranks 1..n.

    No reordering beyond that: a cause a CUDA graph cannot capture outranks ``cpu_bound``
    through the gains themselves (``cpu_bound`` then counts only what graphs add once such
    causes are fixed; rules/cpu_bound.py).
    """
    ordered = sorted(findings, key=lambda f: (-f.estimated_gain_pct, f.category))
    return [replace(f, rank=i + 1) for i, f in enumerate(ordered)]


def _merge_ranks(findings: list[tuple[int, Finding]]) -> list[Finding]:
    """One finding per category: the rank where it costs most, with the ranks affected."""
    if len({rank for rank, _ in findings}) <= 1:
        return [f for _, f in findings]
    best: dict[str, Finding] = {}
    ranks: dict[str, list[int]] = {}
    for rank, f in findings:
        f = replace(f, evidence={**f.evidence, "rank": rank})
        ranks.setdefault(f.category, []).append(rank)
        if f.category not in best or f.estimated_gain_pct > best[f.category].estimated_gain_pct:
            best[f.category] = f
    return [
        replace(f, evidence={**f.evidence, "ranks_affected": sorted(ranks[c])})
        for c, f in best.items()
    ]


def _as_trace_set(target: Trace | TraceSet | str | os.PathLike[str]) -> TraceSet:
    if isinstance(target, TraceSet):
        return target
    if isinstance(target, Trace):
        return TraceSet((target,), "single trace")
    from aiprof.record.targets import load_traces

    return load_traces(target)
