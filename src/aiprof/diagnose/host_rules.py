"""Rules for causes on the host side: input pipeline, launch overhead, syncs, copies, allocator.

Each rule reads pass results from the ``Context``, builds the replay ``Change`` that removes
its cause (docs/diagnose.md gives each model) and returns a ``Finding``, or None.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.sync import scalar_reads
from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change, combine


def _ms(us: float) -> float:
    return round(us / 1000.0, 3)


def dataloader_rule(ctx: Context) -> Finding | None:
    """The step waits for the input pipeline (DataLoader spans on the main thread)."""
    dl = ctx.dataloader
    if dl.mean_us <= 0:
        return None
    gain = ctx.gain_pct(Change(removed_cpu=dl.spans))
    return Finding(
        category="dataloader",
        title=f"The training loop waits {_ms(dl.mean_us)} ms per step for the next batch",
        estimated_gain_pct=gain,
        evidence={
            "dataloader_ms_per_step": _ms(dl.mean_us),
            "dataloader_pct_of_step": round(100.0 * dl.mean_us / max(ctx.step_us, 1e-9), 1),
            "num_dataloader_spans": dl.num_spans,
            "step_ms": _ms(ctx.step_us),
        },
        fix=(
            "Load in worker processes: DataLoader(..., num_workers=8, pin_memory=True, "
            "persistent_workers=True, prefetch_factor=4); move heavy transforms into the "
            "dataset (they then run in the workers) or onto the GPU."
        ),
        model="replay with the DataLoader spans' CPU time removed",
    )


def cpu_bound_rule(ctx: Context) -> Finding | None:
    """The GPU waits for kernels the CPU launches slower than they run."""
    host_wait = sum(s.host_wait_us for s in ctx.idle.streams)
    if host_wait <= 0 or ctx.launch.num_launches == 0:
        return None
    protected = iv.union_all(ctx.dataloader.spans, ctx.allocator.call_spans, _sync_op_spans(ctx))
    busiest = ctx.idle.streams[0]
    # launches can only close the gaps where the GPU waited for the host: the bound
    bound = 100.0 * busiest.host_wait_us / max(ctx.idle.window_us, 1e-9)
    graphs = Change(launch_work_scale=0.0, protected_cpu=protected)
    blockers = capture_blockers(ctx)
    if blockers:  # a graph cannot capture them: the gain is what graphs add once they are gone
        first = combine(*blockers.values())
        gain = ctx.gain_pct(combine(first, graphs)) - ctx.gain_pct(first)
    else:
        gain = ctx.gain_pct(graphs)
    gain = max(0.0, min(gain, bound))
    launch = ctx.launch
    return Finding(
        category="cpu_bound",
        title=(
            f"The GPU waits for kernel launches {bound:.0f}% of the step "
            f"({round(launch.launches_per_step)} launches per step, median kernel "
            f"{launch.median_kernel_us:.1f} µs)"
        ),
        estimated_gain_pct=gain,
        evidence={
            "gpu_idle_pct": round(busiest.idle_pct, 1),
            "host_wait_ms_per_step": _ms(host_wait / max(len(ctx.trace.steps), 1)),
            "launches_per_step": round(launch.launches_per_step, 1),
            "median_launch_us": round(launch.median_launch_us, 2),
            "median_kernel_us": round(launch.median_kernel_us, 2),
            "kernels_shorter_than_launch_pct": round(launch.shorter_than_launch_pct, 1),
            "launch_cpu_ms_per_step": _ms(launch.launch_us / max(len(ctx.trace.steps), 1)),
            "gpu_ms_per_step": _ms(launch.gpu_us / max(len(ctx.trace.steps), 1)),
            "after_fixing_first": sorted(blockers),
        },
        fix=(
            ("Once " + ", ".join(sorted(blockers)) + " is fixed (a CUDA graph cannot capture "
             "it): " if blockers else "")
            + "Launch less from Python: capture the step with CUDA graphs "
            "(torch.compile(model, mode=\"reduce-overhead\") or torch.cuda.graphs), use a "
            "larger batch so each kernel does more work, and replace loops of small ops by "
            "batched or fused ones (torch._foreach_*, fused optimizers: Adam(fused=True))."
        ),
        model=(
            "replay with the CPU work between launches set to zero (every launch issued as "
            "soon as the previous event); DataLoader and allocator time, sync waits and the "
            "CPU time of the ops that synchronize kept. When syncs, steady-state "
            "cudaMalloc/cudaFree or pageable copies are present (a CUDA graph cannot capture "
            "them), the gain is what graphs add to the step with those fixed first"
        ),
    )


def capture_blockers(ctx: Context) -> dict[str, Change]:
    """The changes of the causes a CUDA graph cannot capture, by category: those present and
    worth reporting (their own gain at least ``min_gain_pct``)."""
    changes = {
        "host_sync": _sync_change(ctx),
        "h2d_transfer": _copy_change(ctx),
        "allocator_churn": _allocator_change(ctx),
    }
    return {
        category: change
        for category, change in changes.items()
        if change is not None and ctx.gain_pct(change) >= ctx.options.min_gain_pct
    }


def _sync_op_spans(ctx: Context) -> iv.Intervals:
    """CPU spans of the ops that issued sync points (``aten::_local_scalar_dense`` ...).

    A CUDA graph cannot capture a synchronization: the op around it runs eagerly between
    graph replays, so its CPU time stays when the launches are collapsed.
    """
    rt, ops = ctx.trace.runtime, ctx.trace.cpu_ops
    rows = rt.op_row[ctx.syncs.call_row]
    rows = rows[rows >= 0]
    return iv.union(ops.ts_us[rows], ops.end_us[rows])


def _chosen_syncs(ctx: Context) -> np.ndarray:
    """Sync points other than host-to-device copies (those are ``h2d_transfer``'s)."""
    h2d = np.array(["HtoD" in k for k in ctx.syncs.kind], dtype=bool)
    return np.flatnonzero(~h2d)


def _sync_change(ctx: Context) -> Change | None:
    """The syncs stop making the CPU wait; a scalar read (``.item()``) goes altogether, its
    CPU time and its device-to-host copy: the fix keeps the value on the GPU."""
    chosen = _chosen_syncs(ctx)
    if len(chosen) == 0:
        return None
    syncs = ctx.syncs
    at_us = syncs.cpu_start_us[chosen]
    reads = scalar_reads(ctx.trace, at_us)
    copies = syncs.gpu_row[chosen][(syncs.gpu_row[chosen] >= 0) & iv.contains(reads, at_us)]
    return Change(
        unblocked=frozenset(syncs.call_row[chosen].tolist()),
        removed_cpu=reads,
        gpu_dur_us={int(row): 0.0 for row in copies.tolist()},
    )


def host_sync_rule(ctx: Context) -> Finding | None:
    """Synchronizations (``.item()``, ``.cpu()``, sync calls, device-to-host copies)."""
    syncs = ctx.syncs
    chosen = _chosen_syncs(ctx)
    change = _sync_change(ctx)
    if change is None:
        return None
    gain = ctx.gain_pct(change)
    steps = max(syncs.num_steps, 1)
    sites = Counter(syncs.site[i] for i in chosen).most_common(ctx.options.max_items)
    kinds = Counter(syncs.kind[i] for i in chosen).most_common(ctx.options.max_items)
    blocked = float(np.sum(syncs.cpu_end_us[chosen] - syncs.cpu_start_us[chosen]))
    return Finding(
        category="host_sync",
        title=f"{len(chosen) / steps:.0f} host-device syncs per step drain the GPU queue",
        estimated_gain_pct=gain,
        evidence={
            "syncs_per_step": round(len(chosen) / steps, 1),
            "item_calls_per_step": round(syncs.num_scalar_ops / steps, 1),
            "cpu_blocked_ms_per_step": _ms(blocked / steps),
            "gpu_idle_after_syncs_ms_per_step": _ms(
                float(syncs.idle_after_us[chosen].sum()) / steps
            ),
            "kinds": [{"kind": k, "count": c} for k, c in kinds],
            "call_sites": [{"op": s, "count": c} for s, c in sites],
        },
        fix=(
            "Keep values on the GPU inside the loop: remove .item() / .cpu() / print(tensor) "
            "and Python `if` on tensors from the step (accumulate losses as tensors, read them "
            "every N steps), avoid torch.cuda.synchronize() outside timing code, and use "
            "non_blocking=True copies into pinned buffers when the host needs the data."
        ),
        model=(
            "replay with these sync points no longer making the CPU wait, and the scalar reads "
            "(.item()) that issued them gone with their CPU time and device-to-host copies "
            "(the value stays on the GPU)"
        ),
    )


def _blocking_h2d_rows(ctx: Context) -> np.ndarray:
    cp = ctx.copies
    pick = [i for i, d in enumerate(cp.direction) if d == "HtoD" and cp.synchronous[i]]
    return cp.rows[pick]


def _copy_change(ctx: Context) -> Change | None:
    """Blocking host-to-device copies made asynchronous, at the pinned bandwidth."""
    rows = _blocking_h2d_rows(ctx)
    if len(rows) == 0:
        return None
    gpu = ctx.trace.gpu_ops
    pinned_bps = ctx.pinned_h2d_bytes_per_s()
    new_dur = {}
    if pinned_bps:
        for r in rows.tolist():
            new_dur[r] = min(float(gpu.dur_us[r]), max(float(gpu.bytes[r]), 0.0) / pinned_bps * 1e6)
    return Change(gpu_dur_us=new_dur, unblocked=frozenset(gpu.launch_row[rows].tolist()))


def h2d_transfer_rule(ctx: Context) -> Finding | None:
    """Synchronous (pageable) host-to-device copies on the critical path."""
    change = _copy_change(ctx)
    if change is None:
        return None
    gpu = ctx.trace.gpu_ops
    rows = _blocking_h2d_rows(ctx)
    pinned_bps = ctx.pinned_h2d_bytes_per_s()
    gain = ctx.gain_pct(change)
    nbytes = int(np.maximum(gpu.bytes[rows], 0).sum())
    total = float(gpu.dur_us[rows].sum())
    steps = max(len(ctx.trace.steps), 1)
    return Finding(
        category="h2d_transfer",
        title=f"{len(rows) / steps:.0f} blocking host-to-device copies per step "
              f"({nbytes / steps / 1e6:.1f} MB at {nbytes / max(total, 1e-9) / 1e3:.1f} GB/s)",
        estimated_gain_pct=gain,
        evidence={
            "copies_per_step": round(len(rows) / steps, 1),
            "mb_per_step": round(nbytes / steps / 1e6, 2),
            "achieved_gbps": round(nbytes / max(total, 1e-9) / 1e3, 2),
            "copy_ms_per_step": _ms(total / steps),
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
    )


def _allocator_change(ctx: Context) -> Change | None:
    al = ctx.allocator
    if al.num_mallocs + al.num_frees == 0:
        return None
    return Change(removed_cpu=al.call_spans, unblocked=frozenset(al.free_rows.tolist()))


def allocator_rule(ctx: Context) -> Finding | None:
    """cudaMalloc/cudaFree in the steady state (``empty_cache()``, changing shapes)."""
    al = ctx.allocator
    change = _allocator_change(ctx)
    if change is None:
        return None
    gain = ctx.gain_pct(change)
    steps = max(al.num_steady_steps, 1)
    return Finding(
        category="allocator_churn",
        title=f"{(al.num_mallocs + al.num_frees) / steps:.0f} cudaMalloc/cudaFree calls per "
              "step after warm-up",
        estimated_gain_pct=gain,
        evidence={
            "mallocs_per_step": round(al.num_mallocs / steps, 1),
            "frees_per_step": round(al.num_frees / steps, 1),
            "allocator_ms_per_step": _ms((al.malloc_us + al.free_us) / steps),
            "reserved_memory_drops": al.num_reserved_drops,
            "steady_steps": al.num_steady_steps,
        },
        fix=(
            "Let the caching allocator keep its memory: remove torch.cuda.empty_cache() (and "
            "gc.collect()) from the loop, keep tensor shapes static (pad/bucket variable "
            "lengths), and try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."
        ),
        model="replay without the malloc/free calls' CPU time and without cudaFree's device sync",
    )
