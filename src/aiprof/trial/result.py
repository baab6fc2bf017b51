"""The outcome of ``aiprof try``: one row per fix, and the ``aiprof.try/1`` document."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from aiprof.trial import stats
from aiprof.trial.catalog import CODE_CHANGES
from aiprof.trial.numerics import DEFAULT_RTOL, NumericsCheck, check_numerics
from aiprof.trial.orchestrate import TrialRuns, first_problem, paired_rounds
from aiprof.trial.plan import AA, BASE, Protocol, VariantSpec

SCHEMA = "aiprof.try/1"
MEASURED, SKIPPED = "measured", "skipped"


@dataclass(frozen=True, kw_only=True)
class FixResult:
    """One fix (or hand-edited copy) against the base."""

    name: str
    edited: bool = False
    status: str
    """measured, not_applicable, failed, timeout, or skipped (no round paired with a base)."""
    estimated_gain_pct: float | None = None
    """The diagnosis's estimate for the findings this fix answers (None: no diagnosis)."""
    comparison: stats.Comparison | None = None
    median_step_us: float | None = None
    step_time_us: float | None = None
    """The median over rounds of the protocol's statistic (== median_step_us for "median")."""
    peak_memory_bytes: int | None = None
    numerics: NumericsCheck | None = None
    compile_s: float | None = None
    """torch.compile only: the warm-up steps' excess over the measured median."""
    reason: str = ""
    tail: tuple[str, ...] = ()
    facts: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TrialResult:
    """Everything ``aiprof try`` prints and records."""

    command: tuple[str, ...]
    protocol: Protocol
    clock: str
    base_median_step_us: float | None
    base_round_us: tuple[float, ...]
    """Each round's base step time by the protocol's statistic."""
    base_step_time_us: float | None
    base_round_median_us: tuple[float, ...] = ()
    """Each round's base median step (the same as ``base_round_us`` for "median")."""
    base_peak_memory_bytes: int | None
    memory_kind: str
    fixes: tuple[FixResult, ...]
    not_applied: tuple[tuple[str, str], ...] = ()
    """(category, what to change in the code) for findings no fix here answers."""
    interrupted: bool = False
    stopped: str = ""
    wall_s: float = 0.0
    num_processes: int = 0
    spawn: dict[str, Any] = field(default_factory=dict)
    """How variants were started: forked from a server that preloaded modules, or exec."""
    runs: tuple[dict[str, Any], ...] = ()
    """Every process in run order: label, round, status, median step, wall time."""
    noise: dict[str, Any] | None = None
    """With ``--aa``: the unfixed script against itself, the noise a fix must exceed."""
    host_probe: dict[str, Any] | None = None
    """The host-speed probe over every process (``host_probe_document``)."""

    def document(self) -> dict[str, Any]:
        """The ``aiprof.try/1`` JSON document."""
        return {
            "schema": SCHEMA,
            "command": list(self.command),
            "protocol": {**asdict(self.protocol), "clock": self.clock,
                         "test": f"percentile bootstrap over rounds of the median paired "
                                 f"fix/base ratio, {stats.RESAMPLES} resamples",
                         "confidence": stats.CONFIDENCE, "min_rounds": stats.MIN_ROUNDS},
            "base": {"median_step_us": _round(self.base_median_step_us),
                     "step_time_us": _round(self.base_step_time_us),
                     "round_median_step_us": [_round(t) for t in self.base_round_median_us],
                     "round_step_time_us": [_round(t) for t in self.base_round_us],
                     "peak_memory_bytes": self.base_peak_memory_bytes,
                     "memory_kind": self.memory_kind},
            "fixes": [_fix_document(f) for f in self.fixes],
            "not_applied": [{"category": c, "change": why} for c, why in self.not_applied],
            "interrupted": self.interrupted,
            "stopped": self.stopped,
            "wall_s": round(self.wall_s, 2),
            "num_processes": self.num_processes,
            "spawn": self.spawn,
            "runs": list(self.runs),
            "noise": self.noise,
            "host_probe": self.host_probe,
        }


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _fix_document(f: FixResult) -> dict[str, Any]:
    c = f.comparison
    return {
        "name": f.name, "edited": f.edited, "status": f.status,
        "estimated_gain_pct": _round(f.estimated_gain_pct, 2),
        "measured_gain_pct": _round(c.gain_pct, 2) if c else None,
        "interval_pct": [round(v, 2) for v in c.interval_pct] if c else None,
        "round_gains_pct": [round(v, 2) for v in c.round_gains_pct] if c else [],
        "verdict": c.verdict if c else None,
        "median_step_us": _round(f.median_step_us),
        "step_time_us": _round(f.step_time_us),
        "peak_memory_bytes": f.peak_memory_bytes,
        "numerics": asdict(f.numerics) if f.numerics else None,
        "compile_s": _round(f.compile_s, 2),
        "reason": f.reason, "tail": list(f.tail), "facts": f.facts, "notes": list(f.notes),
    }


def _compile_s(pairs: list[Any], warmup_steps: int) -> float:
    excesses = []
    for _, run in pairs:
        host = list(run.host_step_us)
        warm_steps = run.warmup_steps or warmup_steps
        warm, measured = host[:warm_steps - 1], host[warm_steps - 1:]
        excesses.append(stats.excess_s(warm, measured))
    return float(statistics.median(excesses)) if excesses else 0.0


def fix_result(spec: VariantSpec, trial: TrialRuns, protocol: Protocol,
               estimate: float | None, rtol: float) -> FixResult:
    """Compare one variant's rounds with the base's."""
    pairs = paired_rounds(trial.runs, spec.label)
    problem = first_problem(trial.runs, spec.label)
    common: dict[str, Any] = {"name": spec.label, "edited": spec.edited,
                              "estimated_gain_pct": estimate}
    if not pairs:
        if problem is None:
            return FixResult(status=SKIPPED, reason=trial.stopped or "not run", **common)
        return FixResult(status=problem.status, reason=problem.reason, tail=problem.tail,
                         facts=problem.facts, notes=problem.notes, **common)
    base_us = [b.step_time_us(protocol.statistic) or 0.0 for b, _ in pairs]
    fix_us = [f.step_time_us(protocol.statistic) or 0.0 for _, f in pairs]
    peaks = [f.peak_memory_bytes for _, f in pairs if f.peak_memory_bytes is not None]
    base_loss = [r.loss for r in trial.runs if r.label == BASE and r.loss]
    return FixResult(
        status=MEASURED, comparison=stats.compare(base_us, fix_us),
        median_step_us=float(statistics.median([f.median_step_us or 0.0 for _, f in pairs])),
        step_time_us=float(statistics.median(fix_us)),
        peak_memory_bytes=max(peaks) if peaks else None,
        numerics=check_numerics(base_loss, [f.loss for _, f in pairs], rtol),
        compile_s=_compile_s(pairs, protocol.warmup_steps) if spec.fix == "compile" else None,
        facts=pairs[0][1].facts, notes=pairs[0][1].notes, **common)


def summarize(command: tuple[str, ...], variants: list[VariantSpec], trial: TrialRuns,
              protocol: Protocol, *, estimates: dict[str, float] | None = None,
              code_categories: list[str] | None = None,
              rtol: float = DEFAULT_RTOL,
              spawn: dict[str, Any] | None = None) -> TrialResult:
    """The result table from the runs."""
    estimates = estimates or {}
    base = [r for r in trial.runs if r.label == BASE and r.status == "ok"]
    base_peaks = [r.peak_memory_bytes for r in base if r.peak_memory_bytes is not None]
    rows = tuple(fix_result(spec, trial, protocol, estimates.get(spec.fix), rtol)
                 for spec in variants if spec.label != BASE)
    aa = next((row for row in rows if row.name == AA and row.comparison), None)
    return TrialResult(
        command=command, protocol=protocol, clock=base[0].clock if base else "",
        base_median_step_us=(float(statistics.median([r.median_step_us or 0.0 for r in base]))
                             if base else None),
        base_round_us=tuple(r.step_time_us(protocol.statistic) or 0.0 for r in base),
        base_round_median_us=tuple(r.median_step_us or 0.0 for r in base),
        base_step_time_us=(float(statistics.median(
            [r.step_time_us(protocol.statistic) or 0.0 for r in base])) if base else None),
        base_peak_memory_bytes=max(base_peaks) if base_peaks else None,
        memory_kind=base[0].memory_kind if base else "",
        fixes=rows,
        not_applied=tuple((c, CODE_CHANGES[c]) for c in dict.fromkeys(code_categories or [])
                          if c in CODE_CHANGES),
        interrupted=trial.interrupted, stopped=trial.stopped, wall_s=trial.wall_s,
        num_processes=len(trial.runs), spawn=dict(spawn or {"mode": "exec"}),
        runs=tuple({"label": r.label, "round": r.round, "status": r.status,
                    "median_step_us": _round(r.median_step_us),
                    "step_time_us": _round(r.step_time_us(protocol.statistic)),
                    "wall_s": round(r.wall_s, 2),
                    "warmup_steps": r.warmup_steps, "phases_s": r.phases_s,
                    "step_us": [round(t, 1) for t in r.step_us],
                    "host_probe_us": list(r.host_probe_us)}
                   for r in trial.runs),
        noise=noise_document(aa) if aa is not None else None,
        host_probe=host_probe_document([t for r in trial.runs for t in r.host_probe_us]))


HOST_SPEED_VARIES = 1.3
"""The slowest probe over the fastest beyond which the host is said to have changed speed.
A judgement between two measurements of 2026-12-01: 1.17 over 6 probes of a 3-process trial on
the 2-core CPU VM (shared with other jobs), 2.2 over the H200 host's 96 (its cores run the same
Python at two speeds: tests/data/trial/h200_try_noise.json)."""


def host_probe_document(probes_us: list[float]) -> dict[str, Any] | None:
    """The fixed pure-Python probe over every process: fastest, slowest, their ratio, and
    whether the host changed speed during the trial (ratio > ``HOST_SPEED_VARIES``)."""
    if not probes_us:
        return None
    fastest, slowest = min(probes_us), max(probes_us)
    ratio = slowest / fastest if fastest > 0 else 1.0
    return {"fastest_us": round(fastest, 1), "slowest_us": round(slowest, 1),
            "ratio": round(ratio, 2), "varies": ratio > HOST_SPEED_VARIES}


def noise_document(aa: FixResult) -> dict[str, Any]:
    """What the A/A rounds say: their gains and interval, and the half-width a fix's gain must
    exceed to be told from process noise (the largest A/A round gain in absolute value)."""
    assert aa.comparison is not None
    gains = list(aa.comparison.round_gains_pct)
    return {"round_gains_pct": [round(g, 2) for g in gains],
            "interval_pct": [round(v, 2) for v in aa.comparison.interval_pct],
            "verdict": aa.comparison.verdict,
            "half_width_pct": round(max(abs(g) for g in gains), 2) if gains else None}
