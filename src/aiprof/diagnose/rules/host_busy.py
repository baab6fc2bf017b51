"""``host_busy``: the GPU idles while the host does work other than launching (preprocessing
outside a DataLoader, a long blocking runtime call or copy)."""

from __future__ import annotations

import numpy as np

from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change, combine
from aiprof.diagnose.rule import Rule, ms
from aiprof.diagnose.rules.h2d_transfer import copies_after, handed_over_pinned


def receiving_copies(ctx: Context) -> np.ndarray:
    """Rows of ``trace.gpu_ops`` of the blocking host-to-device copies of what the host work
    made (``h2d_transfer.copies_after``)."""
    return copies_after(ctx, ctx.host_work.spans)


def change(ctx: Context) -> Change | None:
    """The host work's CPU time removed (done elsewhere, while the GPU works), and the blocking
    host-to-device copies of what it made asynchronous from pinned memory: DataLoader workers
    hand their batches over pinned (``pin_memory=True``), so the copy that followed the work in
    the loop no longer waits for the GPU to drain."""
    work = ctx.host_work
    if work.overlap_us <= 0:
        return None
    return combine(Change(removed_cpu=work.spans), handed_over_pinned(ctx, receiving_copies(ctx)))


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
