"""``dataloader``: the step waits for the input pipeline (DataLoader spans on the main thread)."""

from __future__ import annotations

from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change, combine
from aiprof.diagnose.rule import Rule, ms
from aiprof.diagnose.rules.h2d_transfer import copies_after, handed_over_pinned


def change(ctx: Context) -> Change | None:
    """The DataLoader spans' CPU time removed, and the blocking copy of each batch made
    asynchronous from pinned memory (workers with ``pin_memory=True`` hand the batch over
    pinned; ``h2d_transfer.copies_after``)."""
    if ctx.dataloader.mean_us <= 0:
        return None
    batches = handed_over_pinned(ctx, copies_after(ctx, ctx.dataloader.spans))
    return combine(Change(removed_cpu=ctx.dataloader.spans), batches)


def find(ctx: Context) -> Finding | None:
    dl = ctx.dataloader
    fix = change(ctx)
    if fix is None:
        return None
    return Finding(
        category="dataloader",
        title=f"The training loop waits {ms(dl.mean_us)} ms per step for the next batch",
        estimated_gain_pct=ctx.gain_pct(fix),
        evidence={
            "dataloader_ms_per_step": ms(dl.mean_us),
            "dataloader_pct_of_step": round(100.0 * dl.mean_us / max(ctx.step_us, 1e-9), 1),
            "num_dataloader_spans": dl.num_spans,
            "step_ms": ms(ctx.step_us),
        },
        fix=(
            "Load in worker processes: DataLoader(..., num_workers=8, pin_memory=True, "
            "persistent_workers=True, prefetch_factor=4); move heavy transforms into the "
            "dataset (they then run in the workers) or onto the GPU."
        ),
        model=("replay with the DataLoader spans' CPU time removed and each batch's blocking "
               "copy asynchronous from pinned memory"),
        change=fix,
    )


RULE = Rule(
    category="dataloader",
    meaning="the step waits for input data on the host",
    find=find,
    change=change,
    host_side=True,
    order=10,
)
