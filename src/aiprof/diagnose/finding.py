"""Findings and the diagnosis: what ``aiprof diagnose`` returns (schema ``aiprof.diagnosis/1``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiprof.diagnose.calibration import Calibration
from aiprof.display import html_of

if TYPE_CHECKING:
    from aiprof.diagnose.replay import Change

SCHEMA = "aiprof.diagnosis/1"


def severity(gain_pct: float) -> str:
    """``high`` from 20% of the step, ``medium`` from 5%, else ``low`` (aiprof's bands)."""
    return "high" if gain_pct >= 20.0 else "medium" if gain_pct >= 5.0 else "low"


@dataclass(frozen=True)
class Finding:
    """One cause, with the numbers that triggered it and what fixing it would gain."""

    category: str
    title: str
    estimated_gain_pct: float
    """Step time saved by the fix, in % of the step, from the rule's replay model."""
    evidence: dict[str, Any]
    fix: str
    model: str
    """The replay change behind ``estimated_gain_pct`` (docs/diagnose.md)."""
    rank: int = 0
    """Position in the ranking (1 = largest gain of a fix that applies as recorded), set by
    ``rank_findings``."""
    estimated_gain_ms_per_step: float = 0.0
    """The same gain in ms per step (of the replayed step; set by the engine)."""
    change: Change | None = field(default=None, repr=False, compare=False)
    """The replay change behind the gain (None for gains not from the replay); not in JSON."""
    needs_first: tuple[str, ...] = ()
    """The categories whose fixes this one cannot be applied before (a CUDA graph cannot
    capture a sync, a steady-state cudaMalloc/cudaFree or a pageable copy): its gain is what
    it adds once they are fixed, and it ranks after them."""
    includes: tuple[str, ...] = ()
    """The categories whose fixes this one performs too (torch.compile pads misaligned GEMMs:
    Inductor's pad_mm): where it gains no more than such a finding, that narrower finding
    ranks first (``rank_findings``)."""
    withheld: str = ""
    """Why the rule cannot estimate this fix from the trace (its gain is then 0): the engine
    does not list the finding and gives this line as a note instead."""

    @property
    def severity(self) -> str:
        return severity(self.estimated_gain_pct)

    @property
    def label(self) -> str:
        """The category, with what must be fixed first: ``cpu_bound (after host_sync)``."""
        first = f" (after {', '.join(self.needs_first)})" if self.needs_first else ""
        return self.category + first


@dataclass(frozen=True)
class Diagnosis:
    """Ranked findings of one trace (or of every rank of a trace set) and a verdict."""

    findings: list[Finding]
    verdict: str
    step_us: float
    """Measured mean step time (of the slowest rank for a trace set)."""
    replay_step_us: float
    """The replay model's step time with nothing changed (its fidelity check)."""
    device: str | None
    num_ranks: int = 1
    notes: list[str] = field(default_factory=list)
    combined_gain_pct: float = 0.0
    """Every finding's fix at once: one replay with all their changes (of the rank where it is
    largest), within [0, 100]; ``verdict.combined_gain_pct``."""
    profiler: Calibration | None = None
    """The profiler's per-event cost the replay took out (of the slowest rank); None without
    GPU activity. Why a fit was refused goes to ``notes`` too."""

    def document(self) -> dict[str, Any]:
        """The ``aiprof.diagnosis/1`` JSON document."""
        return {
            "schema": SCHEMA,
            "findings": [
                {
                    "rank": f.rank,
                    "category": f.category,
                    "title": f.title,
                    "severity": f.severity,
                    "estimated_gain_pct": round(f.estimated_gain_pct, 2),
                    "estimated_gain_ms_per_step": round(f.estimated_gain_ms_per_step, 3),
                    "needs_first": list(f.needs_first),
                    "includes": list(f.includes),
                    "evidence": f.evidence,
                    "fix": f.fix,
                    "model": f.model,
                }
                for f in self.findings
            ],
            "verdict": self.verdict,
            "device": self.device,
            "num_ranks": self.num_ranks,
            "step_us": self.step_us,
            "replay_step_us": self.replay_step_us,
            "combined_gain_pct": round(self.combined_gain_pct, 2),
            "profiler": self.profiler.document() if self.profiler else {},
            "notes": self.notes,
        }

    def _repr_html_(self) -> str | None:
        """The notebook view, drawn by the renderer the package face registered."""
        return html_of(self)
