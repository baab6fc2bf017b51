"""``h2d_transfer``: synchronous (pageable) host-to-device copies on the critical path."""

from __future__ import annotations

import numpy as np

from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change
from aiprof.diagnose.rule import Rule, ms


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
