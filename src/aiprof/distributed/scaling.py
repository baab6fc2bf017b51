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
from dataclasses import dataclass
from typing import Any

import numpy as np

from aiprof.distributed.collectives import model_collective
from aiprof.distributed.links import LinkParams
from aiprof.errors import InputError

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


@dataclass(frozen=True, kw_only=True)
class ScalingReport:
    """Result of ``predict_scaling`` (schema ``aiprof.scaling/1``)."""

    schema: str
    inputs: ScalingInputs
    link: LinkParams
    bucket_bytes: int
    points: list[ScalingPoint]


def predict_scaling(
    inputs: ScalingInputs,
    ranks: Sequence[int],
    link: LinkParams,
    bucket_bytes: int = DDP_BUCKET_BYTES,
    ring_only: bool = False,
) -> ScalingReport:
    """Step time, efficiency and speed-up at each rank count."""
    if inputs.base_step_us <= 0 or inputs.backward_us < 0 or inputs.grad_bytes < 0:
        raise InputError(
            "need a positive step time and non-negative backward time and gradient bytes"
        )
    if bucket_bytes < 1 or any(n < 1 for n in ranks):
        raise InputError("bucket size and rank counts must be >= 1")
    full, rest = divmod(int(inputs.grad_bytes), bucket_bytes)
    sizes = [bucket_bytes] * full + ([rest] if rest else [])
    algorithms = ("ring",) if ring_only else None
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
    return ScalingReport(
        schema=SCHEMA, inputs=inputs, link=link, bucket_bytes=bucket_bytes, points=points
    )


def inputs_from_trace(
    trace: Any,
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
    return ScalingInputs(
        base_step_us=max(step_us - exposed, 1e-9),
        backward_us=backward_share * compute,
        grad_bytes=grad,
        grad_bytes_source=source,
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
