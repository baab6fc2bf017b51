"""``allocator_churn``: cudaMalloc/cudaFree in the steady state (``empty_cache()``, changing
shapes)."""

from __future__ import annotations

import re

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change
from aiprof.diagnose.rule import Rule, ms
from aiprof.diagnose.scope import is_cold

CAPTURE_CHECK = re.compile(r"^(cuda|hip)StreamIsCapturing$")
MALLOC_CALL = re.compile(r"^(cuda|hip)Malloc$")


def slow_path_spans(ctx: Context) -> iv.Intervals:
    """The capture checks of the caching allocator's slow path: a ``cudaStreamIsCapturing``
    whose next runtime call on its thread is a ``cudaMalloc`` (the allocator asks whether the
    stream is being captured before it allocates; every cudaMalloc of the H200 suite's
    ``empty_cache`` recordings follows one within 1 µs). Without the churn there is none."""
    rt = ctx.trace.runtime
    if len(rt.ts_us) < 2:
        return iv.EMPTY
    order = np.lexsort((rt.ts_us, rt.tid))
    check = ctx.trace.strings.mask(rt.name_id[order], CAPTURE_CHECK)[:-1]
    malloc = ctx.trace.strings.mask(rt.name_id[order], MALLOC_CALL)[1:]
    same = rt.tid[order][:-1] == rt.tid[order][1:]
    pick = check & malloc & same
    rows, mallocs = order[:-1][pick], order[1:][pick]
    rows = rows[iv.contains(ctx.allocator.call_spans, rt.ts_us[mallocs])]  # the churn's mallocs
    return iv.union(rt.ts_us[rows], rt.end_us[rows])


def change(ctx: Context) -> Change | None:
    """The malloc/free calls' CPU time (with the allocator's capture check before each malloc)
    removed, and cudaFree's device sync."""
    al = ctx.allocator
    if al.num_mallocs + al.num_frees == 0:
        return None
    return Change(removed_cpu=iv.union_all(al.call_spans, slow_path_spans(ctx)),
                  unblocked=frozenset(al.free_rows.tolist()))


def find(ctx: Context) -> Finding | None:
    al = ctx.allocator
    fix = change(ctx)
    if fix is None or is_cold(ctx.trace):  # a first iteration's allocations are its warm-up
        return None
    steps = max(al.num_steady_steps, 1)
    return Finding(
        category="allocator_churn",
        title=f"{(al.num_mallocs + al.num_frees) / steps:.0f} cudaMalloc/cudaFree calls per "
              "step after warm-up",
        estimated_gain_pct=ctx.gain_pct(fix),
        evidence={
            "mallocs_per_step": round(al.num_mallocs / steps, 1),
            "frees_per_step": round(al.num_frees / steps, 1),
            "allocator_ms_per_step": ms((al.malloc_us + al.free_us) / steps),
            "reserved_memory_drops": al.num_reserved_drops,
            "steady_steps": al.num_steady_steps,
        },
        fix=(
            "Let the caching allocator keep its memory: remove torch.cuda.empty_cache() (and "
            "gc.collect()) from the loop, keep tensor shapes static (pad/bucket variable "
            "lengths), and try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."
        ),
        model="replay without the malloc/free calls' CPU time and without cudaFree's device sync",
        change=fix,
    )


RULE = Rule(
    category="allocator_churn",
    meaning="cudaMalloc/cudaFree (or empty_cache) inside the steady-state step",
    find=find,
    change=change,
    blocks_capture=True,
    order=90,
)
