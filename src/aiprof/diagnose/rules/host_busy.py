"""``host_busy``: the GPU idles while the host does work other than launching (preprocessing
outside a DataLoader, a long blocking runtime call or copy)."""

from __future__ import annotations

from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change
from aiprof.diagnose.rule import Rule, ms


def change(ctx: Context) -> Change | None:
    """The host work's CPU time removed (done elsewhere, while the GPU works)."""
    work = ctx.host_work
    return Change(removed_cpu=work.spans) if work.overlap_us > 0 else None


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
        model="replay with the CPU time of these host ops and calls removed",
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
