"""``diagnose(target)``: run every rule on every rank, rank the findings, write a verdict."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial

from aiprof.diagnose.calibration import Calibration
from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.explain import bounded_gain
from aiprof.diagnose.finding import Diagnosis, Finding
from aiprof.diagnose.host_speed import with_host_speeds
from aiprof.diagnose.rules import RULES
from aiprof.diagnose.scope import (
    DeviceFacts,
    check_facts,
    check_supported,
    device_facts,
    rank_prefix,
    scope_notes,
)
from aiprof.diagnose.verdict import combine_gains, replayed_gain_pct, verdict
from aiprof.distributed.analysis import RankPart, analyze_parts, rank_part
from aiprof.errors import AiprofError
from aiprof.trace import Trace, TraceSet
from aiprof.trace.devices import DeviceProperties
from aiprof.trace.stream import TraceStream

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
    target: Trace | TraceSet | TraceStream | str | os.PathLike[str],
    options: DiagnoseOptions | None = None,
) -> Diagnosis:
    """Ranked findings of a trace, a trace set (all ranks), a ``TraceStream`` (each rank
    diagnosed where it is read) or a path (trace, directory, run)."""
    if isinstance(target, TraceStream):
        return diagnose_stream(target, options)
    return diagnose_ranks(target, options)[0]


@dataclass(frozen=True)
class RankDiagnosis:
    """One rank's diagnosis, everything the job's diagnosis needs of it (no trace)."""

    rank: int
    findings: list[Finding]
    """Its findings of at least ``min_gain_pct``, unranked."""
    notes: list[str]
    step_us: float
    replay_step_us: float
    device: DeviceProperties | None
    has_gpu: bool
    calibration: Calibration
    replayed_pct: float
    """The replay of all its findings' changes at once (``verdict.combined_gain_pct``)."""
    part: RankPart | None = None
    """Its part of the cross-rank analysis (trace sets of several ranks), or the reason why
    there is none (``part_error``)."""
    part_error: str | None = None
    facts: DeviceFacts | None = None
    """What ``check_supported`` needs of it (ranks diagnosed in workers)."""


def diagnose_rank(
    trace: Trace, options: DiagnoseOptions,
    diagnosed: tuple[list[Finding], Context] | None = None, *, part: bool = False,
) -> RankDiagnosis:
    """``RankDiagnosis`` of one trace (``diagnosed``: its ``diagnose_trace`` when done already;
    ``part``: with its part of the cross-rank analysis)."""
    found, ctx = diagnose_trace(trace, options) if diagnosed is None else diagnosed
    kept = [with_host_speeds(ctx, f) for f in found
            if f.estimated_gain_pct >= options.min_gain_pct and not f.withheld]
    cross, error = None, None
    if part:
        try:
            cross = rank_part(trace)
        except AiprofError as failure:
            error = str(failure)
    return RankDiagnosis(
        rank=trace.rank,
        findings=kept,
        notes=scope_notes(ctx) + [rank_prefix(trace) + f.withheld for f in found if f.withheld],
        step_us=ctx.step_us,
        replay_step_us=ctx.as_recorded_us / max(len(trace.steps), 1),
        device=trace.device,
        has_gpu=trace.has_gpu,
        calibration=ctx.calibration,
        replayed_pct=replayed_gain_pct(ctx, kept),
        part=cross,
        part_error=error,
    )


def diagnose_ranks(
    target: Trace | TraceSet | str | os.PathLike[str], options: DiagnoseOptions | None = None
) -> tuple[Diagnosis, list[Context]]:
    """The diagnosis and each rank's context (its passes, for the report's per-rank views)."""
    options = options or DiagnoseOptions()
    traces = _as_trace_set(target)
    check_supported(traces)
    per_rank = [diagnose_trace(t, options) for t in traces]
    several = len(traces) > 1
    ranks = [diagnose_rank(ctx.trace, options, (found, ctx), part=several)
             for found, ctx in per_rank]
    return assemble(ranks, options, traces.alignment), [ctx for _, ctx in per_rank]


def diagnose_stream(stream: TraceStream, options: DiagnoseOptions | None = None) -> Diagnosis:
    """The diagnosis of a ``TraceStream``: each rank diagnosed in its worker (or Ray task)."""
    options = options or DiagnoseOptions()
    work = partial(stream_rank, options=options, part=len(stream) > 1)
    mapped = stream.map(work)
    return assemble(shifted_parts(list(mapped.results), mapped.shifts_us), options,
                    mapped.alignment)


def stream_rank(
    trace: Trace, options: DiagnoseOptions, part: bool,
    diagnosed: tuple[list[Finding], Context] | None = None,
) -> RankDiagnosis:
    """A worker's share of ``diagnose_stream``: one rank, with what ``check_supported`` needs
    of it (``assemble`` checks the ranks together, as ``diagnose_ranks`` does first)."""
    diagnosis = diagnose_rank(trace, options, diagnosed, part=part)
    return replace(diagnosis, facts=device_facts(trace))


def shifted_parts(ranks: list[RankDiagnosis], shifts_us: Sequence[float]) -> list[RankDiagnosis]:
    """Each rank's cross-rank part moved onto the common clock."""
    return [replace(r, part=r.part.shifted(s)) if r.part is not None else r
            for r, s in zip(ranks, shifts_us, strict=True)]


def assemble(
    ranks: list[RankDiagnosis], options: DiagnoseOptions, alignment: str = ""
) -> Diagnosis:
    """The job's diagnosis from its ranks' (in rank order): findings merged across ranks, the
    cross-rank rules' findings, the verdict."""
    facts = [r.facts for r in ranks if r.facts is not None]
    if facts:
        check_facts(facts)
    findings = _merge_ranks([(r.rank, f) for r in ranks for f in r.findings])
    notes = [n for r in ranks for n in r.notes]
    across = _across_ranks(ranks, alignment, notes)
    ranked = rank_findings([f for f in findings + across
                            if f.estimated_gain_pct >= options.min_gain_pct])
    combined = max((combine_gains(r.replayed_pct, r.findings + across) for r in ranks),
                   default=0.0)
    slowest = max(ranks, key=lambda r: r.step_us)
    device = slowest.device
    has_gpu = any(r.has_gpu for r in ranks)
    return Diagnosis(
        findings=ranked,
        verdict=verdict(ranked, options, has_gpu or bool(ranked), slowest.step_us, combined),
        step_us=slowest.step_us,
        replay_step_us=slowest.replay_step_us if has_gpu else 0.0,
        device=device.name if device else (UNKNOWN_GPU if has_gpu else None),
        num_ranks=len(ranks),
        notes=notes + ([slowest.calibration.note] if has_gpu and slowest.calibration.note
                       else []),
        profiler=slowest.calibration if has_gpu else None,
        combined_gain_pct=combined,
    )


def _across_ranks(ranks: list[RankDiagnosis], alignment: str, notes: list[str]) -> list[Finding]:
    """The findings of the rules across ranks (trace sets of several ranks)."""
    found: list[Finding] = []
    if len(ranks) < 2:
        return found
    rules = [rule for rule in RULES if rule.find_ranks is not None]
    errors = [r.part_error for r in ranks if r.part_error is not None]
    report = None
    if not errors:
        try:
            report = analyze_parts([r.part for r in ranks if r.part is not None], alignment)
        except AiprofError as error:
            errors.append(str(error))
    for rule in rules:
        if report is None or rule.find_ranks is None:
            notes.append(f"{rule.category} analysis skipped: {errors[0]}")
            continue
        try:
            found.extend(replace(f, estimated_gain_pct=min(100.0, max(0.0, f.estimated_gain_pct)))
                         for f in rule.find_ranks(report))
        except AiprofError as error:
            notes.append(f"{rule.category} analysis skipped: {error}")
    return found


def rank_findings(findings: list[Finding]) -> list[Finding]:
    """Ranks 1..n by estimated gain (equal gains by category); a finding whose fix a broader
    one performs too, at a gain within ``SAME_GAIN_PCT`` of it, ranks before it
    (``_narrower_first``).

    A fix that needs another first (``needs_first``: a whole-step CUDA graph behind a sync,
    an ``empty_cache`` or a pageable copy) ranks by its own gain, which counts what it adds
    once the other is made (rules/cpu_bound.py); its label and the verdict name the fix to
    make first. Rank 1 is so the largest gain of the fixes, as the suite's truths measure
    them: a graph is timed on the step with its prerequisite fixed (docs/diagnose.md,
    "Ranking by gain again").
    """
    ordered = _narrower_first(sorted(findings, key=lambda f: (-f.estimated_gain_pct,
                                                              f.category)))
    return [replace(f, rank=i + 1) for i, f in enumerate(ordered)]


SAME_GAIN_PCT = 1.0
"""Gains this close (points of the step) are the same gain to the replay: the unchanged step's
replay lands within about 1% of the measured step on the GPU-bound H200 suite workloads once
the backlog queued before the steps is left out (docs/diagnose.md)."""


def _narrower_first(ordered: list[Finding]) -> list[Finding]:
    """``ordered`` (by gain) with a finding placed before a broader one that performs its fix
    too (``Finding.includes``) and claims no more than ``SAME_GAIN_PCT`` above it: the
    narrower fix (pad the shapes) is the one to make; the broader (torch.compile, which pads
    them too) adds nothing the replay can tell apart."""
    out = list(ordered)
    for i in range(1, len(out)):
        j = i
        while j > 0 and (out[j].category in out[j - 1].includes
                         and out[j - 1].estimated_gain_pct - out[j].estimated_gain_pct
                         <= SAME_GAIN_PCT):
            out[j - 1], out[j] = out[j], out[j - 1]
            j -= 1
    return out


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
