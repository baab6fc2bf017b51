"""``allocator_churn``: cudaMalloc/cudaFree in the steady state (``empty_cache()``, changing
shapes)."""

from __future__ import annotations

import re

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.diagnose.allocation_replay import replayed
from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change, covered_between
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


def malloc_ops(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """The CPU ops (rows) that call the churn's ``cudaMalloc`` and the end of each op's last
    such call."""
    rt = ctx.trace.runtime
    calls = np.flatnonzero(ctx.trace.strings.mask(rt.name_id, MALLOC_CALL))
    calls = calls[iv.contains(ctx.allocator.call_spans, rt.ts_us[calls]) & (rt.op_row[calls] >= 0)]
    if len(calls) == 0 or len(ctx.trace.cpu_ops.ts_us) == 0:
        return calls[:0], np.zeros(0)
    ops, last = np.unique(rt.op_row[calls], return_inverse=True)
    ends = np.full(len(ops), -np.inf)
    np.maximum.at(ends, last, rt.end_us[calls])
    return ops, ends


def slow_path_excess(ctx: Context, calls: iv.Intervals) -> iv.Intervals:
    """CPU time the caching allocator's slow path adds inside an op that calls ``cudaMalloc``,
    beyond its allocator ``calls``: the op's time minus the median time of its twins (the same
    op with the same input shapes, recorded without a ``cudaMalloc``), placed right after its
    last ``cudaMalloc``. On a cache miss the allocator searches its pools, tries to free cached
    blocks and records the new segment before and after the call (c10/cuda/
    CUDACachingAllocator.cpp, ``malloc``); with the cache kept, the twin's path is the op's.
    None without recorded shapes (twins by name alone differ in size)."""
    ops = ctx.trace.cpu_ops
    rows, after = malloc_ops(ctx)
    rows_ok = ops.input_dims_id[rows] >= 0
    rows, after = rows[rows_ok], after[rows_ok]
    if len(rows) == 0:
        return iv.EMPTY
    key = ops.name_id.astype(np.int64) * (1 << 32) + ops.input_dims_id.astype(np.int64)
    twins = np.setdiff1d(np.flatnonzero(ops.input_dims_id >= 0), rows)
    order = np.argsort(key[twins], kind="stable")
    twin_keys, twin_us = key[twins][order], ops.dur_us[twins][order]
    keys, of_row = np.unique(key[rows], return_inverse=True)  # a median per kind of op
    lo = np.searchsorted(twin_keys, keys, side="left")
    hi = np.searchsorted(twin_keys, keys, side="right")
    typical = np.array([float(np.median(twin_us[a:b])) if b > a else np.inf
                        for a, b in zip(lo.tolist(), hi.tolist(), strict=True)])[of_row]
    inside = covered_between(calls, ops.ts_us[rows], ops.end_us[rows])
    excess = np.maximum(ops.dur_us[rows] - inside - typical, 0.0)
    end = np.minimum(after + excess, ops.end_us[rows])
    keep = np.isfinite(typical) & (end > after)
    return iv.union(after[keep], end[keep])


def change(ctx: Context) -> Change | None:
    """The malloc/free calls' CPU time (with the allocator's capture check before each malloc
    and its slow path inside the op) removed, and cudaFree's device sync."""
    al = ctx.allocator
    if al.num_mallocs + al.num_frees == 0:
        return None
    calls = iv.union_all(al.call_spans, slow_path_spans(ctx))
    return Change(removed_cpu=iv.union_all(calls, slow_path_excess(ctx, calls)),
                  unblocked=frozenset(al.free_rows.tolist()))


def replayed_mallocs(ctx: Context) -> dict[str, float]:
    """What the caching allocator's replay of the ``[memory]`` events (``allocation_replay``)
    says: new segments per step as the trace made them, and per steady step without
    ``empty_cache()`` (none where the churn is the emptied cache; some where shapes change).
    Empty without the events, or where the replay does not make the trace's own segments."""
    if ctx.allocations is None:
        return {}
    events = ctx.allocations.events
    kept = replayed(events, releases=False).new_segment
    steps = ctx.trace.steps
    later = ctx.trace.memory.ts_us[events.rows] >= steps.cpu_start_us[min(1, len(steps) - 1)]
    return {"replayed_mallocs_per_step": round(events.num_mallocs / max(len(steps), 1), 1),
            "mallocs_per_step_without_empty_cache": round(
                float(kept[later].sum()) / max(len(steps) - 1, 1), 1)}


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
            "slow_path_ms_per_step": ms(
                iv.length(slow_path_excess(ctx, al.call_spans)) / max(len(ctx.trace.steps), 1)),
            "reserved_memory_drops": al.num_reserved_drops,
            "steady_steps": al.num_steady_steps,
            **replayed_mallocs(ctx),
        },
        fix=(
            "Let the caching allocator keep its memory: remove torch.cuda.empty_cache() (and "
            "gc.collect()) from the loop, keep tensor shapes static (pad/bucket variable "
            "lengths), and try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."
        ),
        model=("replay without the malloc/free calls' CPU time, the allocator's slow path in "
               "the ops that call cudaMalloc (their time beyond the calls and beyond their "
               "same-shape twins'), and cudaFree's device sync"),
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
