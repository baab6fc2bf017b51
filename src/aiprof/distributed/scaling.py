"""Data-parallel scaling what-if: one rank's trace + the collective model -> step time at N ranks.

Model (weak scaling, fixed per-GPU batch): the step's compute does not change with N; DDP splits
the gradients into buckets (``bucket_cap_mb=25`` by default, reference §B5) all-reduced one after
another, each as soon as backward has produced it. Communication hides under the rest of backward
except the last bucket, which is only ready when backward ends:
    exposed(N) = max(t_last_bucket(N), Σ t_bucket(N) − T_backward)
    step(N) = T_base + exposed(N),    efficiency(N) = T_base / step(N),    speedup = N·efficiency.
T_base is the measured step without its own exposed communication. Backward is 2/3 of compute
unless given (backward ≈ 2 × forward, Narayanan et al. 2021; reference §B8).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from aiprof.distributed.collectives import model_collective
from aiprof.distributed.links import LinkParams
from aiprof.errors import InputError

if TYPE_CHECKING:
    from aiprof.trace import Trace

SCHEMA = "aiprof.scaling/1"
DDP_BUCKET_BYTES = 25 * 1024 * 1024  # torch DDP bucket_cap_mb default (MiB)


@dataclass(frozen=True, kw_only=True)
class ScalingPoint:
    """Prediction at one rank count."""

    num_ranks: int
    comm_us: float
    exposed_comm_us: float
    step_time_us: float
    efficiency_pct: float
    speedup: float


@dataclass(frozen=True, kw_only=True)
class ScalingInputs:
    """What the model needs from the measured rank."""

    base_step_us: float
    """Step time without exposed communication."""
    backward_us: float
    grad_bytes: float
    """Bytes all-reduced per step."""
    grad_bytes_source: str
    measured_ranks: int = 0
    """World size of the measured rank's job (0: unknown or one rank)."""
    measured_allreduce_us: float = 0.0
    """All-reduce kernel time per step the trace measured at ``measured_ranks``."""


@dataclass(frozen=True, kw_only=True)
class ScalingReport:
    """Result of ``predict_scaling`` (schema ``aiprof.scaling/1``)."""

    schema: str
    inputs: ScalingInputs
    link: LinkParams
    bucket_bytes: int
    points: list[ScalingPoint]
    assumptions: list[str] = field(default_factory=list)
    """Every assumption the prediction rests on, in words (the link's source first)."""
    model_at_measured_us: float = 0.0
    """The model's all-reduce time per step at the trace's own rank count, to compare with
    ``inputs.measured_allreduce_us`` (0 when the trace ran on one rank)."""


def predict_scaling(
    inputs: ScalingInputs,
    ranks: Sequence[int],
    link: LinkParams,
    bucket_bytes: int = DDP_BUCKET_BYTES,
    ring_only: bool = False,
    link_source: str = "",
) -> ScalingReport:
    """Step time, efficiency and speed-up at each rank count; ``link_source`` says where the
    link's α and β come from (the first of the report's assumptions)."""
    if inputs.base_step_us <= 0 or inputs.backward_us < 0 or inputs.grad_bytes < 0:
        raise InputError(
            "need a positive step time and non-negative backward time and gradient bytes"
        )
    if bucket_bytes < 1 or any(n < 1 for n in ranks):
        raise InputError("bucket size and rank counts must be >= 1")
    full, rest = divmod(int(inputs.grad_bytes), bucket_bytes)
    sizes = [bucket_bytes] * full + ([rest] if rest else [])
    algorithms = ("ring",) if ring_only else None

    def comm_us(n: int) -> float:
        return float(sum(model_collective("allreduce", s, n, link, algorithms).time_us
                         for s in sizes))

    points = []
    for n in ranks:
        times = [model_collective("allreduce", s, n, link, algorithms).time_us for s in sizes]
        comm = float(sum(times))
        exposed = max(times[-1] if times else 0.0, comm - inputs.backward_us)
        step = inputs.base_step_us + exposed
        eff = inputs.base_step_us / step
        points.append(
            ScalingPoint(
                num_ranks=n,
                comm_us=comm,
                exposed_comm_us=exposed,
                step_time_us=step,
                efficiency_pct=100.0 * eff,
                speedup=n * eff,
            )
        )
    assumptions = [
        link_source or f"link: {link.name} (α {link.alpha_us:g} µs, {link.bandwidth_gbps:g} GB/s)",
        "weak scaling: the per-GPU batch and the compute per step stay as measured",
        f"gradients: {inputs.grad_bytes_source}, all-reduced in DDP buckets of "
        f"{bucket_bytes / 2**20:g} MiB, each hidden under the rest of backward but the last",
        f"backward is {inputs.backward_us / 1e3:.2f} ms of the step's compute (--backward-share)",
        "algorithm: " + ("ring only (the fit is a ring model)" if ring_only
                         else "the fastest the model knows per bucket (ring, tree)"),
    ]
    at_measured = comm_us(inputs.measured_ranks) if inputs.measured_ranks >= 2 else 0.0
    return ScalingReport(
        schema=SCHEMA, inputs=inputs, link=link, bucket_bytes=bucket_bytes, points=points,
        assumptions=assumptions, model_at_measured_us=at_measured,
    )


def inputs_from_trace(
    trace: Trace,
    *,
    params: float | None = None,
    grad_elem_bytes: int = 4,
    backward_share: float = 2 / 3,
) -> ScalingInputs:
    """Step and compute time from the trace; gradient bytes from ``params`` or its all-reduces."""
    from aiprof.distributed.commtrace import collective_calls, compute_spans
    from aiprof.distributed.overlap import step_overlaps

    if not 0 <= backward_share <= 1:
        raise InputError(f"backward share must be in [0, 1], got {backward_share}")
    steps = trace.steps
    if len(steps.start_us) == 0:
        raise InputError(f"{trace.path}: no steps found")
    calls = collective_calls(trace)
    per_step = step_overlaps(
        compute_spans(trace),
        (calls.ts_us, calls.ts_us + calls.dur_us),
        steps.number,
        steps.start_us,
        steps.end_us,
    )
    step_us = float(np.mean([s.step_time_us for s in per_step]))
    exposed = float(np.mean([s.exposed_comm_us for s in per_step]))
    compute = float(np.mean([s.compute_us for s in per_step]))
    if params is not None:
        if params <= 0:
            raise InputError(f"--params must be > 0, got {params}")
        grad, source = params * grad_elem_bytes, f"{params:g} parameters × {grad_elem_bytes} B"
    else:
        rows = [i for i, k in enumerate(calls.kind) if k == "allreduce" and calls.num_bytes[i] >= 0]
        if not rows:
            raise InputError(f"{trace.path}: no sized all-reduce in the trace; give --params")
        grad = float(calls.num_bytes[rows].sum()) / max(len(per_step), 1)
        source = f"all-reduces in the trace ({len(rows)} calls over {len(per_step)} steps)"
    info = trace.distributed
    allreduce = [i for i, k in enumerate(calls.kind) if k == "allreduce"]
    return ScalingInputs(
        base_step_us=max(step_us - exposed, 1e-9),
        backward_us=backward_share * compute,
        grad_bytes=grad,
        grad_bytes_source=source,
        measured_ranks=int(info.world_size) if info is not None and info.world_size else 0,
        measured_allreduce_us=float(calls.dur_us[allreduce].sum()) / max(len(per_step), 1),
    )


def parse_ranks(text: str) -> list[int]:
    """``'2,4,8'`` or ``'2-64'`` (powers of two in the range) -> rank counts."""
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-"))
            return [
                2**k
                for k in range(int(math.log2(max(lo, 1))), int(math.log2(max(hi, 1))) + 1)
                if lo <= 2**k <= hi
            ]
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(
            f"cannot read rank counts from {text!r}; write e.g. 2,4,8 or 2-64"
        ) from None
