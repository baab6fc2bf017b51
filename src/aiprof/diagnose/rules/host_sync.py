"""``host_sync``: synchronizations (``.item()``, ``.cpu()``, sync calls, device-to-host copies)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.launch import launched_in
from aiprof.analysis.mask_gathers import backward_nodes, mask_gathers
from aiprof.analysis.read_feeders import read_feeders
from aiprof.analysis.sync import scalar_reads
from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change
from aiprof.diagnose.rule import Rule, ms
from aiprof.diagnose.rules.h2d_transfer import blocking_h2d_rows, copy_syncs
from aiprof.diagnose.sync_sites import outermost_ops, remedies, sync_callers


def chosen_syncs(ctx: Context) -> np.ndarray:
    """Sync points other than blocking host-to-device copies and the stream synchronize of a
    pageable copy's own op (those are ``h2d_transfer``'s)."""
    h2d = np.array(["HtoD" in k for k in ctx.syncs.kind], dtype=bool)
    h2d |= np.isin(ctx.syncs.call_row, copy_syncs(ctx, blocking_h2d_rows(ctx)))
    return np.flatnonzero(~h2d)


def sync_op_spans(ctx: Context) -> iv.Intervals:
    """CPU spans of the ops that issued sync points (``aten::_local_scalar_dense`` ...).

    A CUDA graph cannot capture a synchronization: the op around it runs eagerly between
    graph replays, so its CPU time stays when the launches are collapsed.
    """
    rt, ops = ctx.trace.runtime, ctx.trace.cpu_ops
    rows = rt.op_row[ctx.syncs.call_row]
    rows = rows[rows >= 0]
    return iv.union(ops.ts_us[rows], ops.end_us[rows])


def change(ctx: Context) -> Change | None:
    """The syncs stop making the CPU wait; a scalar read (``.item()``) goes altogether, its
    CPU time and its device-to-host copy, and so do the ops that only fed it (the reduction
    of ``x.mean().item()``, with their kernels): the fix keeps the value on the GPU. A
    boolean-mask gather that synchronized (``x[mask]``) goes with its backward node: the fix
    folds the mask into the op that consumed it (``analysis/mask_gathers.py``)."""
    fix = _fix(ctx)
    return None if fix is None else fix.change


@dataclass(frozen=True)
class _Fix:
    """The fix's change and what it removes besides the syncs' waits and the reads."""

    change: Change
    feeders: np.ndarray
    """``cpu_ops`` rows of the ops that only fed the reads."""
    gathers: np.ndarray
    """``cpu_ops`` rows of the boolean-mask gathers that synchronized."""
    backward: np.ndarray
    """``cpu_ops`` rows of the gathers' backward nodes (``evaluate_function`` spans)."""


def _fix(ctx: Context) -> _Fix | None:
    chosen = chosen_syncs(ctx)
    if len(chosen) == 0:
        return None
    syncs, ops, gpu = ctx.syncs, ctx.trace.cpu_ops, ctx.trace.gpu_ops
    at_us = syncs.cpu_start_us[chosen]
    reads = scalar_reads(ctx.trace, at_us)
    copies = syncs.gpu_row[chosen][(syncs.gpu_row[chosen] >= 0) & iv.contains(reads, at_us)]
    feeders = read_feeders(ctx.trace, reads)
    gathers = mask_gathers(ctx.trace, outermost_ops(ctx.trace, syncs.call_row[chosen]))
    backward = backward_nodes(ctx.trace, gathers)
    gone = np.concatenate([feeders, gathers, backward])
    spans = iv.union(ops.ts_us[gone], ops.end_us[gone])
    every = np.arange(len(gpu.ts_us))
    kernels = every[launched_in(ctx.trace, every, spans)]
    return _Fix(Change(
        unblocked=frozenset(syncs.call_row[chosen].tolist()),
        removed_cpu=iv.union_all(reads, spans),
        gpu_dur_us={int(row): 0.0 for row in np.concatenate([copies, kernels]).tolist()},
    ), feeders, gathers, backward)


def find(ctx: Context) -> Finding | None:
    syncs = ctx.syncs
    chosen = chosen_syncs(ctx)
    found = _fix(ctx)
    if found is None:
        return None
    fix, fed = found.change, found.feeders
    steps = max(syncs.num_steps, 1)
    sites = Counter(syncs.site[i] for i in chosen).most_common(ctx.options.max_items)
    kinds = Counter(syncs.kind[i] for i in chosen).most_common(ctx.options.max_items)
    blocked = float(np.sum(syncs.cpu_end_us[chosen] - syncs.cpu_start_us[chosen]))
    feeding = Counter(ctx.trace.name(int(ctx.trace.cpu_ops.name_id[r])) for r in fed)
    callers = sync_callers(ctx.trace, syncs.call_row[chosen], ctx.options.max_items)
    specific = "".join(f" Here: {r}." for r in remedies(callers))
    return Finding(
        category="host_sync",
        title=f"{len(chosen) / steps:.0f} host-device syncs per step drain the GPU queue",
        estimated_gain_pct=ctx.gain_pct(fix),
        evidence={
            "syncs_per_step": round(len(chosen) / steps, 1),
            "item_calls_per_step": round(syncs.num_scalar_ops / steps, 1),
            "cpu_blocked_ms_per_step": ms(blocked / steps),
            "gpu_idle_after_syncs_ms_per_step": ms(
                float(syncs.idle_after_us[chosen].sum()) / steps
            ),
            "kinds": [{"kind": k, "count": c} for k, c in kinds],
            "call_sites": [{"op": s, "count": c} for s, c in sites],
            "callers": callers,
            # the ops whose outputs only the reads used (allocator events: read_feeders)
            "feeding_ops_per_step": round(len(fed) / steps, 1),
            "feeding_ops": [{"op": op, "count": c}
                            for op, c in feeding.most_common(ctx.options.max_items)],
            # x[mask] gathers that synchronized, removed with their backward nodes
            "mask_gathers_per_step": round(len(found.gathers) / steps, 1),
            "mask_gather_backward_nodes_per_step": round(len(found.backward) / steps, 1),
            # what the syncs cost given the queue: the replay (profiler taken out) waits this
            # long for queued GPU work to drain, and the GPU then idles while the host refills
            "replayed_drain_wait_ms_per_step": ms(ctx.base_replayed.sync_wait_us / steps),
        },
        fix=(
            "Keep values on the GPU inside the loop: remove .item() / .cpu() / print(tensor) "
            "and Python `if` on tensors from the step (accumulate losses as tensors, read them "
            "every N steps), avoid torch.cuda.synchronize() outside timing code, and use "
            "non_blocking=True copies into pinned buffers when the host needs the data."
            + specific
        ),
        model=(
            "replay with these sync points no longer making the CPU wait, and the scalar reads "
            "(.item()) that issued them gone with their CPU time and device-to-host copies, "
            "and with them the ops whose outputs only those reads used (found from the "
            "allocator's events: each output freed right after the read) and their kernels "
            "(the value stays on the GPU); each boolean-mask gather x[mask] that synchronized "
            "gone with its backward node, CPU time and kernels (the mask folded into the op "
            "that consumed the gather, at that op's cost)"
        ),
        change=fix,
    )


RULE = Rule(
    category="host_sync",
    meaning="host-device synchronizations (`.item()`, `.cpu()`, `cudaDeviceSynchronize`, sync "
            "copies) stall the queue",
    find=find,
    change=change,
    host_side=True,
    blocks_capture=True,
    order=30,
)
