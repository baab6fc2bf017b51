"""``communication_exposed``: collective time not hidden under compute (per rank).

The gain is bounded by what the step's compute can hide: overlapping a collective with compute
saves at most the compute time not already overlapping communication. On a GPU trace the
collectives are the NCCL/RCCL kernels (``analysis.classify``) against the other kernels; on a
CPU-only run (gloo) they are the collectives ``aiprof.distributed`` reads from the host side,
against the ``aten::`` CPU ops.
"""

from __future__ import annotations

from aiprof.analysis import intervals as iv
from aiprof.analysis.breakdown import step_window
from aiprof.analysis.classify import communication_kernels, spans
from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.rule import Rule, ms
from aiprof.trace import Trace

_FIX = (
    "Overlap gradients' all-reduce with backward: DDP(bucket_cap_mb=...) tuned to the "
    "model (larger buckets for many small layers), gradient_as_bucket_view=True, no "
    "sync between backward and optimizer; for FSDP, forward/backward prefetch."
)


def exposed_and_hideable_us(trace: Trace) -> tuple[float, float, float]:
    """(exposed communication, compute free of communication, window) over the steps, µs:
    GPU kernels when the trace has them, else the host-side collectives and CPU ops."""
    window = step_window(trace)
    if len(trace.kernels):
        comm_mask = communication_kernels(trace)
        compute = iv.intersect(spans(trace.kernels, ~comm_mask), window)
        comm = iv.intersect(spans(trace.kernels, comm_mask), window)
    else:
        from aiprof.distributed.commtrace import collective_calls, compute_spans

        calls = collective_calls(trace)
        compute = iv.intersect(iv.union(*compute_spans(trace)), window)
        comm = iv.intersect(iv.union(calls.ts_us, calls.ts_us + calls.dur_us), window)
    exposed = iv.length(iv.subtract(comm, compute))
    hideable = iv.length(iv.subtract(compute, comm))
    return exposed, hideable, iv.length(window)


def find(ctx: Context) -> Finding | None:
    """Collective time not hidden under compute, at most the compute that could hide it."""
    exposed, hideable, window = exposed_and_hideable_us(ctx.trace)
    if exposed <= 0 or window <= 0:
        return None
    gain = 100.0 * min(exposed, hideable) / window
    steps = max(len(ctx.trace.steps), 1)
    return Finding(
        category="communication_exposed",
        title=f"{100.0 * exposed / window:.0f}% of the step is communication not overlapped "
              f"with compute; compute can hide {ms(min(exposed, hideable) / steps)} ms of it",
        estimated_gain_pct=gain,
        evidence={
            "exposed_comm_ms_per_step": ms(exposed / steps),
            "compute_ms_per_step": ms(hideable / steps),
            "source": "NCCL/RCCL kernels" if len(ctx.trace.kernels) else "host collectives",
            "rank": ctx.trace.rank,
        },
        fix=_FIX,
        model=(
            "the exposed collective time hidden under compute, at most the compute time not "
            "already overlapping communication: min(exposed, that compute) / step (not a "
            "replay: the verdict applies it to the step the replay of the other fixes leaves)"
        ),
    )


RULE = Rule(
    category="communication_exposed",
    meaning="collective time not hidden under compute",
    find=find,
    without_gpu=True,
    order=100,
)
