"""Layout and alignment lints on a trace: the ops recorded with shapes and their kernels' time.

The conversion kernels cuDNN runs around an NCHW half-precision convolution are named
``nchwToNhwcKernel`` / ``nhwcToNchwKernel``; their device time, summed per launching op, is the
measured cost the layout lint reports next to its prediction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiprof.tensor.alignment import AlignmentFinding, lint_alignment
from aiprof.tensor.ceilings_model import Ceilings
from aiprof.tensor.layout import CONVERSION_KERNEL, LayoutReport, lint_layout
from aiprof.tensor.trace_ops import launching_ops

if TYPE_CHECKING:
    from aiprof.trace import Trace


@dataclass(frozen=True)
class TraceLints:
    """Both lints over one trace."""

    layout: LayoutReport
    alignment: tuple[AlignmentFinding, ...]
    conversion_kernels_us: float
    """Device time of every NCHW<->NHWC conversion kernel in the trace."""


def conversion_time_by_op(trace: Trace) -> dict[int, float]:
    """Conversion-kernel device time per launching CPU op row."""
    kernels = trace.kernels
    mask = trace.strings.mask(kernels.name_id, CONVERSION_KERNEL) & (kernels.op_row >= 0)
    times: dict[int, float] = {}
    for row, dur in zip(kernels.op_row[mask].tolist(), kernels.dur_us[mask].tolist(), strict=True):
        times[row] = times.get(row, 0.0) + dur
    return times


def trace_lints(trace: Trace, ceilings: Ceilings | None = None) -> TraceLints:
    """Layout and alignment lints of ``trace``, with measured times where the trace has them."""
    ops = launching_ops(trace)
    calls = [op.call for op in ops]
    device_us = [op.device_us for op in ops]
    conversion = conversion_time_by_op(trace)
    layout = lint_layout(calls, ceilings, device_us, [conversion.get(op.row) for op in ops])
    alignment = lint_alignment(calls, ceilings, device_us, check_pointers=False)
    return TraceLints(layout, alignment, sum(conversion.values()))
