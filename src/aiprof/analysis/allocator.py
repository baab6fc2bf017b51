"""Allocator calls in the steady state: ``cudaMalloc`` / ``cudaFree`` after the first step.

PyTorch's caching allocator calls ``cudaMalloc`` only when its cache cannot serve a request
and ``cudaFree`` only when it releases memory (``torch.cuda.empty_cache()``, or an
out-of-memory retry): in a steady training loop both should be absent after warm-up
(PyTorch docs, "CUDA semantics: memory management"). ``cudaFree`` also synchronizes the
device (CUDA Runtime API, "API synchronization behavior"). Drops of the reserved total in
the ``[memory]`` events show releases even when runtime calls were not recorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.breakdown import step_window
from aiprof.analysis.gpu_window import steady_window
from aiprof.analysis.step_breakdown import in_window
from aiprof.trace import Trace

MALLOC = re.compile(r"^(cuda|hip)Malloc(Async|Managed|Host)?$|^cuMemAlloc|^cuMemCreate")
FREE = re.compile(r"^(cuda|hip)Free(Async|Host)?$|^cuMemFree|^cuMemRelease")


@dataclass(frozen=True)
class AllocatorResult:
    """Allocator activity in the steady-state steps."""

    num_steady_steps: int
    num_mallocs: int
    num_frees: int
    malloc_us: float
    free_us: float
    num_reserved_drops: int
    """``[memory]`` events where the reserved total went down (memory given back)."""
    call_spans: iv.Intervals
    """CPU intervals of the malloc/free calls (for the replay)."""
    free_rows: np.ndarray
    """Rows of ``trace.runtime`` of the ``cudaFree`` calls (they synchronize)."""


def allocator_calls(trace: Trace) -> AllocatorResult:
    """Count and time the malloc/free calls inside the steady-state steps.

    Counts and times are of the steady state; ``call_spans`` and ``free_rows`` cover every step
    when the steady state has such calls (the first step then repeats the same churn).
    """
    window = steady_window(trace)
    rt = trace.runtime
    is_malloc = trace.strings.mask(rt.name_id, MALLOC)
    is_free = trace.strings.mask(rt.name_id, FREE)
    inside = in_window(rt.ts_us, window)
    mallocs = np.flatnonzero(inside & is_malloc)
    frees = np.flatnonzero(inside & is_free)
    churn = np.flatnonzero(in_window(rt.ts_us, step_window(trace)) & (is_malloc | is_free))
    both = churn if len(mallocs) + len(frees) else churn[:0]
    mem = trace.memory
    gpu_mem = (mem.device_type == 1) & in_window(mem.ts_us, window)
    reserved = mem.total_reserved[gpu_mem]
    drops = int(np.sum(np.diff(reserved) < 0)) if len(reserved) > 1 else 0
    return AllocatorResult(
        num_steady_steps=max(len(trace.steps) - 1, 1) if len(trace.steps) else 0,
        num_mallocs=len(mallocs),
        num_frees=len(frees),
        malloc_us=float(rt.dur_us[mallocs].sum()),
        free_us=float(rt.dur_us[frees].sum()),
        num_reserved_drops=drops,
        call_spans=iv.union(rt.ts_us[both], rt.end_us[both]),
        free_rows=both[is_free[both]],
    )
