"""Kernels that cannot fill the GPU: grids smaller than the SM count, low occupancy.

Per-kernel theoretical occupancy, its limiter and the small-grid flag come from the GPU
models (``aiprof.gpu.trace_occupancy``: the CUDA occupancy calculator's rules applied to
each kernel's launch arguments and the trace's device). A kernel with fewer blocks than
SMs leaves ``SMs - blocks`` SMs idle for its whole duration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.analysis.gpu_window import gpu_window
from aiprof.errors import AiprofError
from aiprof.gpu.kernel_occupancy import LIMITER_NAMES
from aiprof.gpu.trace_occupancy import trace_kernel_occupancy
from aiprof.trace import Trace


@dataclass(frozen=True)
class OccupancyResult:
    """Occupancy of the kernels inside the steps (unsupported: no model for the device)."""

    supported: bool
    num_sms: int | None
    small_grid_rows: np.ndarray
    """Rows of ``trace.gpu_ops`` (kernels) whose grid has fewer blocks than SMs."""
    small_grid_blocks: np.ndarray
    small_grid_us: float
    kernel_us: float
    time_weighted_occupancy_pct: float
    """Mean theoretical occupancy weighted by kernel time (NaN: unknown)."""
    limiter_us: dict[str, float]
    """Kernel time per binding limit (registers, shared memory, block count, warps...)."""


def occupancy_pass(trace: Trace) -> OccupancyResult:
    """Evaluate the occupancy model on every kernel that starts inside the steps."""
    win = gpu_window(trace)
    rows = win.rows[win.rows < len(trace.kernels)]
    dur = trace.kernels.dur_us[rows]
    empty = np.zeros(0, dtype=np.int64)
    try:
        occ = trace_kernel_occupancy(trace)
    except AiprofError:
        occ = None
    if occ is None or not occ.supported or occ.num_sms is None:
        return OccupancyResult(False, None, empty, empty, 0.0, float(dur.sum()), float("nan"), {})
    small = occ.grid_below_sm_count[rows]
    config = occ.config[rows]  # each kernel's launch configuration: the results are per one
    value = occ.config_occupancy[config]
    known = ~np.isnan(value)
    weighted = (
        100.0 * float(np.sum(value[known] * dur[known]) / dur[known].sum())
        if known.any() and dur[known].sum() > 0
        else float("nan")
    )
    del value, known
    limiters: dict[str, float] = {}
    codes = occ.config_limiter_code[config]
    del config
    for code in sorted(np.unique(codes).tolist(), key=LIMITER_NAMES.__getitem__):
        limiters[LIMITER_NAMES[code]] = float(dur[codes == code].sum())
    return OccupancyResult(
        supported=True,
        num_sms=occ.num_sms,
        small_grid_rows=rows[small],
        small_grid_blocks=occ.num_blocks[rows][small],
        small_grid_us=float(dur[small].sum()),
        kernel_us=float(dur.sum()),
        time_weighted_occupancy_pct=weighted,
        limiter_us=limiters,
    )
