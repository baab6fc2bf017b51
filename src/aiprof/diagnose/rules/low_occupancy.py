"""``low_occupancy``: kernels whose grid has fewer blocks than the GPU has SMs."""

from __future__ import annotations

import numpy as np

from aiprof.analysis.classify import communication_kernels
from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.nhwc import nchw_batch_norm_rows
from aiprof.diagnose.replay import Change
from aiprof.diagnose.rule import Rule, per_step_ms


def small_grids(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """Rows (of ``gpu_ops``) and block counts of the small-grid kernels that do compute:
    NCCL/RCCL kernels are left out (few blocks by design; a larger batch or split-K does not
    apply to them, ``analysis.classify``), and so are the NCHW BatchNorm kernels, one block
    per channel whatever the batch (``nhwc.nchw_batch_norm_rows``): their fix is
    ``channels_last``, which ``layout_conversion`` estimates."""
    occ = ctx.occupancy
    rows = np.asarray(occ.small_grid_rows, dtype=np.int64)
    comm = communication_kernels(ctx.trace)  # over trace.kernels, which come first in gpu_ops
    keep = ~comm[rows] if len(comm) else np.ones(len(rows), dtype=bool)
    keep &= ~np.isin(rows, nchw_batch_norm_rows(ctx.trace))
    return rows[keep], np.asarray(occ.small_grid_blocks)[keep]


def change(ctx: Context) -> Change | None:
    """Each small-grid kernel spread over every SM, not below the trace's shortest kernel."""
    occ = ctx.occupancy
    if not occ.supported or len(occ.small_grid_rows) == 0 or not occ.num_sms:
        return None
    rows, blocks = small_grids(ctx)
    if len(rows) == 0:
        return None
    dur = ctx.trace.gpu_ops.dur_us
    kernels = ctx.trace.kernels.dur_us
    floor = float(np.min(kernels[kernels > 0])) if np.any(kernels > 0) else 0.0
    scale = blocks / occ.num_sms
    new = {
        int(r): max(float(dur[r]) * float(s), floor)
        for r, s in zip(rows, scale, strict=True)
    }
    return Change(gpu_dur_us=new)


def find(ctx: Context) -> Finding | None:
    """Kernels whose grid has fewer blocks than the GPU has SMs."""
    occ = ctx.occupancy
    fix = change(ctx)
    if fix is None:
        return None
    gain = ctx.gain_pct(fix)
    rows, _ = small_grids(ctx)
    small_us = float(ctx.trace.gpu_ops.dur_us[rows].sum())
    return Finding(
        category="low_occupancy",
        title=f"{per_step_ms(ctx, small_us)} ms per step in kernels with fewer blocks "
              f"than the {occ.num_sms} SMs",
        estimated_gain_pct=gain,
        evidence={
            "small_grid_ms_per_step": per_step_ms(ctx, small_us),
            "num_sms": occ.num_sms,
            "time_weighted_occupancy_pct": round(occ.time_weighted_occupancy_pct, 1),
            "limiter_ms": {k: round(v / 1000.0, 3) for k, v in sorted(occ.limiter_us.items())},
            "top_kernels": ctx.top_kernels(rows),
        },
        fix=(
            "Give the GPU more parallel work: a larger batch, fused or batched small ops "
            "(torch.compile, torch._foreach_*), split-K/stream-K GEMMs for skinny shapes; for "
            "custom kernels, more blocks per launch and fewer registers/shared memory per block."
        ),
        model=(
            "replay with each small-grid kernel spread over every SM: duration x blocks / SMs, "
            "not below the trace's shortest kernel"
        ),
        change=fix,
    )


RULE = Rule(
    category="low_occupancy",
    meaning="kernels that cannot fill the GPU: grids smaller than the SM count, occupancy "
            "limited by registers/shared memory",
    find=find,
    change=change,
    order=120,
)
