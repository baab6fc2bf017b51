"""``diagnose(target)``: run every rule on every rank, rank the findings, write a verdict."""

from __future__ import annotations

import os
from dataclasses import replace

from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.finding import Diagnosis, Finding
from aiprof.diagnose.rules import RULES
from aiprof.errors import AiprofError
from aiprof.trace import Trace, TraceSet

UNKNOWN_GPU = "unknown GPU (no deviceProperties)"


def diagnose_trace(
    trace: Trace, options: DiagnoseOptions | None = None
) -> tuple[list[Finding], Context]:
    """Every rule's finding on one trace (unranked) and the context they came from."""
    ctx = Context(trace, options or DiagnoseOptions())
    if not trace.has_gpu:
        return [], ctx
    found = [f for rule in RULES if rule.find and (f := rule.find(ctx)) is not None]
    return found, ctx


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
    per_rank = [diagnose_trace(t, options) for t in traces]
    findings = _merge_ranks([(ctx.trace.rank, f) for found, ctx in per_rank for f in found])
    notes = []
    if len(traces) > 1:
        for rule in RULES:
            if rule.find_ranks is None:
                continue
            try:
                findings.extend(rule.find_ranks(traces))
            except AiprofError as error:
                notes.append(f"{rule.category} analysis skipped: {error}")
    ranked = rank_findings([f for f in findings if f.estimated_gain_pct >= options.min_gain_pct])
    slowest = max((ctx for _, ctx in per_rank), key=lambda c: c.step_us)
    device = slowest.trace.device
    has_gpu = any(t.has_gpu for t in traces)
    diagnosis = Diagnosis(
        findings=ranked,
        verdict=verdict(ranked, options, has_gpu, slowest.step_us),
        step_us=slowest.step_us,
        replay_step_us=slowest.as_recorded_us / max(len(slowest.trace.steps), 1)
        if has_gpu
        else 0.0,
        device=device.name if device else (UNKNOWN_GPU if has_gpu else None),
        num_ranks=len(traces),
        notes=notes + ([slowest.calibration.note] if slowest.calibration.note else []),
        profiler=slowest.calibration if has_gpu else None,
    )
    return diagnosis, [ctx for _, ctx in per_rank]


def rank_findings(findings: list[Finding]) -> list[Finding]:
    """Sorted by estimated gain (highest first; equal gains by category), ranks 1..n.

    No reordering beyond that: a cause a CUDA graph cannot capture outranks ``cpu_bound``
    through the gains themselves (``cpu_bound`` then counts only what graphs add once such
    causes are fixed; rules/cpu_bound.py).
    """
    ordered = sorted(findings, key=lambda f: (-f.estimated_gain_pct, f.category))
    return [replace(f, rank=i + 1) for i, f in enumerate(ordered)]


def verdict(
    findings: list[Finding], options: DiagnoseOptions, has_gpu: bool, step_us: float
) -> str:
    """One sentence: the top cause, or that nothing is worth fixing."""
    if not has_gpu:
        return "No GPU activity in the trace: nothing to diagnose on the device side."
    worth = [f for f in findings if f.estimated_gain_pct >= options.worth_fixing_pct]
    if not worth:
        largest = (
            f" (largest: {findings[0].category}, {findings[0].estimated_gain_pct:.1f}%)"
            if findings
            else ""
        )
        return (f"Nothing worth fixing: no cause would save {options.worth_fixing_pct:g}% or "
                f"more of the {step_us / 1000:.2f} ms step{largest}.")
    top = worth[0]
    return (f"Step {step_us / 1000:.2f} ms; fix {top.category} first: up to "
            f"{top.estimated_gain_pct:.0f}% of the step ({len(worth)} finding(s) above "
            f"{options.worth_fixing_pct:g}%).")


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
