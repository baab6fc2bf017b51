"""``h2d_transfer``: synchronous (pageable) host-to-device copies on the critical path."""

from __future__ import annotations

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change, covered_between
from aiprof.diagnose.rule import Rule, ms
from aiprof.trace.links import gather


def blocking_h2d_rows(ctx: Context) -> np.ndarray:
    """Rows of ``trace.gpu_ops`` of the host-to-device copies the CPU waited for."""
    cp = ctx.copies
    pick = [i for i, d in enumerate(cp.direction) if d == "HtoD" and cp.synchronous[i]]
    return cp.rows[pick]


def copy_syncs(ctx: Context, rows: np.ndarray) -> np.ndarray:
    """Rows of ``trace.runtime`` of the synchronize calls that belong to the copies ``rows``:
    issued by the same CPU op as the copy's launch. A copy from pageable memory without
    ``non_blocking`` is a ``cudaMemcpyAsync`` then a ``cudaStreamSynchronize`` inside one
    ``aten::copy_`` (PyTorch's ``memcpy_and_sync``, aten/src/ATen/native/cuda/Copy.cu): the
    asynchronous copy from pinned memory drops both."""
    syncs, rt = ctx.syncs, ctx.trace.runtime
    calls = syncs.call_row[syncs.gpu_row < 0]
    launches = ctx.trace.gpu_ops.launch_row[rows]
    ops = rt.op_row[launches[launches >= 0]]
    ops = ops[ops >= 0]
    if len(calls) == 0 or len(ops) == 0:
        return calls[:0]
    return calls[np.isin(rt.op_row[calls], ops)]


def copies_after(ctx: Context, spans: iv.Intervals) -> np.ndarray:
    """Rows of ``trace.gpu_ops`` of the blocking host-to-device copies that upload what the host
    made in ``spans`` (a DataLoader's batch, preprocessing in the loop): the first launch after
    such host work is a blocking host-to-device copy, and the host work (between the previous
    launch call's end and the CPU op that issues the copy) lasts at least as long as that op
    blocks (the preparation, not the copy, is what the step waits for there; a copy that
    blocks longer than the host work before it is this rule's)."""
    rows = blocking_h2d_rows(ctx)
    gpu, rt, ops = ctx.trace.gpu_ops, ctx.trace.runtime, ctx.trace.cpu_ops
    rows = rows[gpu.launch_row[rows] >= 0]
    if len(rows) == 0 or iv.length(spans) <= 0:
        return np.asarray(rows[:0])
    calls = np.unique(gpu.launch_row[gpu.launch_row >= 0])
    calls = calls[np.argsort(rt.ts_us[calls], kind="stable")]
    launch = gpu.launch_row[rows]
    op = rt.op_row[launch] if len(ops.ts_us) else np.full(len(launch), -1)
    issued = np.where(op >= 0, gather(ops.ts_us, op, 0.0), rt.ts_us[launch])
    blocked = np.where(op >= 0, gather(ops.dur_us, op, 0.0), rt.dur_us[launch])
    before = np.searchsorted(rt.ts_us[calls], rt.ts_us[launch], side="left") - 1
    start = float(ctx.trace.steps.cpu_start_us.min()) if len(ctx.trace.steps) else -np.inf
    lo = np.where(before >= 0, rt.end_us[calls[np.maximum(before, 0)]], start)
    lo = np.minimum(lo, issued)
    return np.asarray(rows[covered_between(spans, lo, issued) >= blocked])


def handed_over_pinned(ctx: Context, rows: np.ndarray) -> Change:
    """The copies ``rows`` asynchronous from pinned memory, their stream synchronize gone, on
    their stream: what DataLoader workers with ``pin_memory=True`` and ``non_blocking=True``
    copies do to the batch they hand over (no prefetch a step ahead)."""
    gpu = ctx.trace.gpu_ops
    return Change(gpu_dur_us=pinned_durations(ctx, rows),
                  unblocked=frozenset(gpu.launch_row[rows].tolist())
                  | frozenset(copy_syncs(ctx, rows).tolist()))


def change(ctx: Context) -> Change | None:
    """Blocking host-to-device copies (with the stream synchronize of a pageable copy) made
    asynchronous, at the pinned bandwidth, and issued a step ahead on a side stream (the fix
    named: prefetch): the compute no longer waits for them, and the step lasts at least as long
    as they do."""
    rows = blocking_h2d_rows(ctx)
    if len(rows) == 0:
        return None
    gpu = ctx.trace.gpu_ops
    return Change(gpu_dur_us=pinned_durations(ctx, rows),
                  unblocked=frozenset(gpu.launch_row[rows].tolist())
                  | frozenset(copy_syncs(ctx, rows).tolist()),
                  side_stream_rows=frozenset(int(r) for r in rows.tolist()))


def pinned_durations(ctx: Context, rows: np.ndarray) -> dict[int, float]:
    """Per copy of ``rows``: its duration from pinned memory (its bytes at the pinned
    host-to-device bandwidth, never longer than recorded; none without a bandwidth)."""
    gpu = ctx.trace.gpu_ops
    pinned_bps = ctx.pinned_h2d_bytes_per_s()
    if not pinned_bps:
        return {}
    return {r: min(float(gpu.dur_us[r]), max(float(gpu.bytes[r]), 0.0) / pinned_bps * 1e6)
            for r in rows.tolist()}


def find(ctx: Context) -> Finding | None:
    fix = change(ctx)
    if fix is None:
        return None
    gpu = ctx.trace.gpu_ops
    rows = blocking_h2d_rows(ctx)
    pinned_bps = ctx.pinned_h2d_bytes_per_s()
    nbytes = int(np.maximum(gpu.bytes[rows], 0).sum())
    total = float(gpu.dur_us[rows].sum())
    steps = max(len(ctx.trace.steps), 1)
    return Finding(
        category="h2d_transfer",
        title=f"{len(rows) / steps:.0f} blocking host-to-device copies per step "
              f"({nbytes / steps / 1e6:.1f} MB at {nbytes / max(total, 1e-9) / 1e3:.1f} GB/s)",
        estimated_gain_pct=ctx.gain_pct(fix),
        evidence={
            "copies_per_step": round(len(rows) / steps, 1),
            "mb_per_step": round(nbytes / steps / 1e6, 2),
            "achieved_gbps": round(nbytes / max(total, 1e-9) / 1e3, 2),
            "copy_ms_per_step": ms(total / steps),
            "pinned_model_gbps": round(pinned_bps / 1e9, 1) if pinned_bps else None,
            "groups": [g.__dict__ for g in ctx.copies.groups if g.direction == "HtoD"],
        },
        fix=(
            "Copy from pinned memory without blocking: DataLoader(pin_memory=True) or "
            "tensor.pin_memory(), then x.to('cuda', non_blocking=True); prefetch the next "
            "batch on a side torch.cuda.Stream so the copy overlaps compute."
        ),
        model=(
            "replay with these copies asynchronous and at the pinned host-to-device bandwidth "
            "(measured ceilings, else the datasheet host link's per-direction half)"
        ),
        change=fix,
    )


RULE = Rule(
    category="h2d_transfer",
    meaning="host-to-device copies (pageable, synchronous, not overlapped) on the critical path",
    find=find,
    change=change,
    host_side=True,
    blocks_capture=True,
    order=40,
)
