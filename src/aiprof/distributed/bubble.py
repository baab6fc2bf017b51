"""Pipeline bubble of GPipe, 1F1B and interleaved 1F1B schedules.

GPipe: Huang et al. 2019 (arXiv:1811.06965); 1F1B and interleaved 1F1B: Narayanan et al., SC'21
(arXiv:2104.04473) §2.2; summarized in ../shared/reference/serving-and-distributed.md §B4.
With p stages, m micro-batches and v chunks per device, the idle time is (p−1)/v stage-slots:
bubble / ideal = (p−1)/(v·m), bubble / total = (p−1)/(v·m + p − 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiprof.errors import InputError

SCHEDULES = ("gpipe", "1f1b", "interleaved")


@dataclass(frozen=True, kw_only=True)
class BubbleResult:
    """Bubble of one schedule. Both denominators are given: say which one you quote."""

    schedule: str
    num_stages: int
    num_microbatches: int
    num_chunks: int
    bubble_over_ideal: float
    """(p−1)/(v·m): idle time as a share of the ideal (bubble-free) time."""
    bubble_over_total: float
    """(p−1)/(v·m + p − 1): idle time as a share of the whole step."""
    textbook_ratio: float
    """The chapter's 1/(m/p) = p/m, kept to show how far it is off."""
    inflight_microbatches_stage0: int
    """Micro-batches whose activations stage 0 holds at peak: m for GPipe, min(p, m) for 1F1B."""
    activation_factor_stage0: float
    """Stage-0 activation memory in units of one full model's activations for one micro-batch."""
    step_time_us: float
    """(v·m + p − 1)·t_chunk when a per-micro-batch stage time is given, else 0."""


def pipeline_bubble(
    schedule: str,
    num_stages: int,
    num_microbatches: int,
    num_chunks: int = 1,
    stage_time_us: float = 0.0,
) -> BubbleResult:
    """Bubble and stage-0 memory of one schedule (``stage_time_us`` = forward + backward of one
    micro-batch on one stage)."""
    kind = schedule.lower()
    if kind not in SCHEDULES:
        raise InputError(f"unknown schedule {schedule!r}; choose one of {', '.join(SCHEDULES)}")
    p, m, v = num_stages, num_microbatches, num_chunks if kind == "interleaved" else 1
    if p < 1 or m < 1 or v < 1:
        raise InputError(f"stages, micro-batches and chunks must be >= 1, got p={p}, m={m}, v={v}")
    if kind == "interleaved" and m % p != 0:
        raise InputError(
            f"interleaved 1F1B needs micro-batches ({m}) to be a multiple of stages ({p})"
        )
    if stage_time_us < 0:
        raise InputError(f"stage time cannot be negative, got {stage_time_us}")
    inflight = m if kind == "gpipe" else min(p, m)
    factor = inflight / p
    if kind == "interleaved":
        factor *= 1 + (p - 1) / (p * v)
    return BubbleResult(
        schedule=kind,
        num_stages=p,
        num_microbatches=m,
        num_chunks=v,
        bubble_over_ideal=(p - 1) / (v * m),
        bubble_over_total=(p - 1) / (v * m + p - 1),
        textbook_ratio=p / m,
        inflight_microbatches_stage0=inflight,
        activation_factor_stage0=factor,
        step_time_us=(v * m + p - 1) * stage_time_us / v,
    )
