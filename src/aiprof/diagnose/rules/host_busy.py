"""``host_busy``: the GPU idles while the host does work other than launching (preprocessing
outside a DataLoader, a long blocking runtime call or copy)."""

from __future__ import annotations

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change, covered_between
from aiprof.diagnose.rule import Rule, ms
from aiprof.diagnose.rules.h2d_transfer import (
    blocking_h2d_rows,
    copy_syncs,
    pinned_durations,
)
from aiprof.trace.links import gather


def receiving_copies(ctx: Context) -> np.ndarray:
    """Rows of ``trace.gpu_ops`` of the blocking host-to-device copies that upload what the host
    work made: the first launch after host work is a blocking host-to-device copy, and that
    host work (between the previous launch call's end and the CPU op that issues the copy) lasts
    at least as long as the op blocks (the preparation, not the copy, is what the step waits for
    there; a copy that blocks longer than the host work before it is ``h2d_transfer``'s)."""
    rows = blocking_h2d_rows(ctx)
    gpu, rt, ops = ctx.trace.gpu_ops, ctx.trace.runtime, ctx.trace.cpu_ops
    rows = rows[gpu.launch_row[rows] >= 0]
    if len(rows) == 0 or iv.length(ctx.host_work.spans) <= 0:
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
    return np.asarray(rows[covered_between(ctx.host_work.spans, lo, issued) >= blocked])


def change(ctx: Context) -> Change | None:
    """The host work's CPU time removed (done elsewhere, while the GPU works), and the blocking
    host-to-device copies of what it made asynchronous from pinned memory: DataLoader workers
    hand their batches over pinned (``pin_memory=True``), so the copy that followed the work in
    the loop no longer waits for the GPU to drain."""
    work = ctx.host_work
    if work.overlap_us <= 0:
        return None
    copies = receiving_copies(ctx)
    gpu = ctx.trace.gpu_ops
    return Change(removed_cpu=work.spans, gpu_dur_us=pinned_durations(ctx, copies),
                  unblocked=frozenset(gpu.launch_row[copies].tolist())
                  | frozenset(copy_syncs(ctx, copies).tolist()))


def find(ctx: Context) -> Finding | None:
    work = ctx.host_work
    fix = change(ctx)
    if fix is None:
        return None
    steps = max(len(ctx.trace.steps), 1)
    window = max(ctx.idle.window_us, 1e-9)
    top = work.items[0]
    return Finding(
        category="host_busy",
        title=f"The GPU waits {100.0 * work.overlap_us / window:.0f}% of the step while the host "
              f"does other work than launching (most: {top.name[:60]}, "
              f"{ms(top.gpu_idle_us / steps)} ms per step)",
        estimated_gain_pct=ctx.gain_pct(fix),
        evidence={
            "host_work_while_gpu_idle_ms_per_step": ms(work.overlap_us / steps),
            "gpu_idle_ms_per_step": ms(work.gpu_idle_us / steps),
            "host_work_ms_per_step": ms(sum(i.total_us for i in work.items) / steps),
            "copies_made_asynchronous_per_step": round(len(receiving_copies(ctx)) / steps, 1),
            "host_ops": [
                {"name": i.name, "kind": i.kind, "count": i.count,
                 "ms_per_step": ms(i.total_us / steps),
                 "gpu_idle_ms_per_step": ms(i.gpu_idle_us / steps)}
                for i in work.items[: ctx.options.max_items]
            ],
        },
        fix=(
            "Take the host work off the step's critical path: preprocess in DataLoader workers "
            "(the transforms in Dataset.__getitem__ or collate_fn, num_workers > 0) or on the "
            "GPU (torchvision.transforms.v2 on CUDA tensors), prepare the next batch while the "
            "GPU runs this one, and replace blocking calls in the loop (synchronous copies from "
            "pageable memory, file I/O, logging) by asynchronous ones. A first CUDA call that "
            "creates the context or loads modules blocks for up to seconds: run warm-up "
            "steps before the profiled ones."
        ),
        model=("replay with the CPU time of these host ops and calls removed, and the blocking "
               "host-to-device copies of what they made asynchronous from pinned memory"),
        change=fix,
    )


RULE = Rule(
    category="host_busy",
    meaning="the GPU idles while the host does work other than launching (preprocessing "
            "outside a DataLoader, a long blocking runtime call or copy)",
    find=find,
    change=change,
    host_side=True,
    order=15,
)
