"""Computation/communication overlap of one rank, per step.

Overlap as Holistic Trace Analysis defines it (``get_comm_comp_overlap``): the share of
communication time during which compute also runs, |compute ∩ comm| / |comm|, over the union of
each kind's spans. Exposed communication is the rest, |comm \\ compute|: time the step spends
communicating with nothing to hide it behind.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv


@dataclass(frozen=True, kw_only=True)
class StepOverlap:
    """One step of one rank."""

    step: int
    step_time_us: float
    compute_us: float
    comm_us: float
    overlapped_us: float
    exposed_comm_us: float


def step_overlaps(
    compute: tuple[np.ndarray, np.ndarray],
    comm: tuple[np.ndarray, np.ndarray],
    step_numbers: np.ndarray,
    step_starts: np.ndarray,
    step_ends: np.ndarray,
) -> list[StepOverlap]:
    """Per step: union lengths of compute and comm, their intersection and the exposed comm."""
    comp_set, comm_set = iv.union(*compute), iv.union(*comm)
    both = iv.intersect(comp_set, comm_set)
    out = []
    for number, lo, hi in zip(step_numbers, step_starts, step_ends, strict=True):
        comm_us = iv.length(iv.between(comm_set, lo, hi))
        shared = iv.length(iv.between(both, lo, hi))
        out.append(
            StepOverlap(
                step=int(number),
                step_time_us=float(hi - lo),
                compute_us=iv.length(iv.between(comp_set, lo, hi)),
                comm_us=comm_us,
                overlapped_us=shared,
                exposed_comm_us=comm_us - shared,
            )
        )
    return out


def overlap_pct(steps: list[StepOverlap]) -> float:
    """Σ overlapped / Σ comm × 100 over the steps (NaN without communication)."""
    comm = sum(s.comm_us for s in steps)
    return 100.0 * sum(s.overlapped_us for s in steps) / comm if comm > 0 else float("nan")
