"""``misaligned_shapes``: GEMM/conv dimensions off the multiples of 8/16, replayed at the padded
op's roof."""

from __future__ import annotations

import re

import numpy as np

from aiprof.analysis.gpu_window import gpu_window
from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change
from aiprof.diagnose.rule import Rule, per_step_ms

PADDING_COPY = re.compile(r"AddPadding|[Pp]adding[A-Z_]?\w*Kernel")
"""cuDNN's copy of a misaligned input into a channel-padded buffer (``nhwcAddPaddingKernel``,
seen on every misaligned convolution of the H200 suite), run on every call."""


def padding_rows(ctx: Context, op_rows: list[int]) -> np.ndarray:
    """GPU ops of ``op_rows`` that only exist because the shape is misaligned: cuDNN's padding
    copies and, in an op that has them, the memsets that zero the padded buffer."""
    gpu = ctx.trace.gpu_ops
    rows = gpu_window(ctx.trace).rows
    rows = rows[np.isin(gpu.op_row[rows], np.asarray(op_rows, dtype=np.int64))]
    if not len(rows):
        return rows
    names = gpu.name_id[rows]
    pads = ctx.trace.strings.mask(names, PADDING_COPY)
    memset = ctx.trace.strings.mask(names, re.compile(r"^Memset"))
    padded_ops = np.unique(gpu.op_row[rows[pads]])
    return np.asarray(rows[pads | (memset & np.isin(gpu.op_row[rows], padded_ops))])


def change(ctx: Context) -> Change | None:
    """Each misaligned op's kernels at the roofline time of its padded shape, and cuDNN's
    padding copies of its input gone (an aligned shape needs none)."""
    shapes = ctx.shapes
    if not shapes.ops:
        return None
    bandwidth = ctx.memory_bytes_per_s()
    if not bandwidth:
        return None
    dur = ctx.trace.gpu_ops.dur_us
    new: dict[int, float] = {}
    for op in shapes.ops:
        peak = ctx.peak_flops(op.precision)
        if not peak or op.kernel_us <= 0:
            continue
        roof_us = max(op.padded_flops / peak, op.bytes_total / bandwidth) * 1e6
        scale = min(1.0, roof_us / op.kernel_us)
        new.update({int(r): float(dur[r]) * scale for r in op.kernel_rows})
    new.update({int(r): 0.0 for r in padding_rows(ctx, [o.op_row for o in shapes.ops])})
    if not new:
        return None
    return Change(gpu_dur_us=_same_kernels(ctx, new))


def find(ctx: Context) -> Finding | None:
    """GEMM/conv dimensions off the multiples of 8/16: replayed at the padded op's roof."""
    shapes = ctx.shapes
    fix = change(ctx)
    if fix is None:
        return None
    gain = ctx.gain_pct(fix)
    top = [
        {"op": o.name, "dims": o.dims, "misaligned": list(o.misaligned),
         "multiple": o.required_multiple, "kernel_us": round(o.kernel_us, 1)}
        for o in shapes.ops[: ctx.options.max_items]
    ]
    return Finding(
        category="misaligned_shapes",
        title=f"{len(shapes.ops)} GEMM/conv calls have dimensions off the tensor-core multiple",
        estimated_gain_pct=gain,
        evidence={
            "misaligned_kernel_ms_per_step": per_step_ms(ctx, shapes.kernel_us),
            "num_checked_ops": shapes.num_checked_ops,
            "top_ops": top,
        },
        fix=(
            "Pad the dimensions to multiples of 8 (FP16/BF16; 16 for INT8/FP8): e.g. "
            "nn.Linear(4096, 4096) instead of 4095, vocabulary padded to a multiple of 64, "
            "channels padded to 8."
        ),
        model="replay with each op at the roofline time of its padded shape on the device",
        change=fix,
    )


def _same_kernels(ctx: Context, new: dict[int, float]) -> dict[int, float]:
    """Extend a change to the launches of the same kernels (name and grid) that the trace does
    not tie to an op (queued before the profiled window opened): same kernel, same fix."""
    gpu = ctx.trace.gpu_ops
    scale: dict[tuple[int, int, int, int], float] = {}
    for row, dur in new.items():
        if gpu.dur_us[row] > 0:
            key = (int(gpu.name_id[row]), int(gpu.grid_x[row]), int(gpu.grid_y[row]),
                   int(gpu.grid_z[row]))
            scale[key] = dur / float(gpu.dur_us[row])
    rows = ctx.timeline.gpu_row[ctx.timeline.gpu_row >= 0]
    orphans = rows[gpu.op_row[rows] < 0]
    extended = dict(new)
    for row in orphans.tolist():
        key = (int(gpu.name_id[row]), int(gpu.grid_x[row]), int(gpu.grid_y[row]),
               int(gpu.grid_z[row]))
        if key in scale and row not in extended:
            extended[row] = float(gpu.dur_us[row]) * scale[key]
    return extended


RULE = Rule(
    category="misaligned_shapes",
    meaning="GEMM/conv dimensions off the multiples of 8/16 that tensor cores need",
    find=find,
    change=change,
    order=80,
)
