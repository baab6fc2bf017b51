"""The ``aiprof.summary/1`` JSON document (the contract tests and tools rely on)."""

from __future__ import annotations

from typing import Any

from aiprof.analysis.step_breakdown import CATEGORIES
from aiprof.analysis.summary import SCHEMA, RankSummary
from aiprof.analysis.top import NameTotal


def summary_document(summaries: list[RankSummary]) -> dict[str, Any]:
    return {"schema": SCHEMA, "ranks": [_rank(s) for s in summaries]}


def _rank(s: RankSummary) -> dict[str, Any]:
    t = s.temporal
    return {
        "rank": s.rank,
        "path": s.path,
        "device": s.device,
        "num_events": s.num_events,
        "num_steps": s.num_steps,
        "step_source": s.step_source,
        "step_time_us": {
            "mean": s.step_time.mean_us,
            "median": s.step_time.median_us,
            "min": s.step_time.min_us,
            "max": s.step_time.max_us,
        },
        "gpu_busy_pct": s.gpu_busy_pct,
        "temporal_breakdown": {
            "window_us": t.window_us,
            "compute_us": t.compute_us,
            "communication_us": t.communication_us,
            "memory_us": t.memory_us,
            "idle_us": t.idle_us,
            "compute_pct": t.pct(t.compute_us),
            "communication_pct": t.pct(t.communication_us),
            "memory_pct": t.pct(t.memory_us),
            "idle_pct": t.pct(t.idle_us),
        },
        "step_breakdown": {
            c: {"us_per_step": s.steps.per_step_us[c], "pct": s.steps.pct(c)} for c in CATEGORIES
        },
        "top_kernels": [_total(k) for k in s.top_kernels],
        "top_ops": [_total(o) for o in s.top_ops],
    }


def _total(item: NameTotal) -> dict[str, Any]:
    return {
        "name": item.name,
        "count": item.count,
        "total_us": item.total_us,
        "mean_us": item.mean_us,
        "pct": item.pct,
    }
