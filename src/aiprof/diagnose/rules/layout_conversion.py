"""``layout_conversion``: NCHW<->NHWC conversions, transposes and permuted ``.contiguous()``
copies."""

from __future__ import annotations

from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.nhwc import (
    NHWC_BATCH_NORM_BANDWIDTH_FRACTION,
    NHWC_BATCH_NORM_US_PER_KERNEL,
    aten_depthwise_rows,
    nhwc_batch_norm_durations,
)
from aiprof.diagnose.replay import Change
from aiprof.diagnose.rule import Rule, per_step_ms
from aiprof.diagnose.segment_change import SegmentShift, without_scratch


def _batch_norm(ctx: Context) -> dict[int, float]:
    """NCHW BatchNorm kernels at the time PyTorch's NHWC kernels take (``diagnose/nhwc.py``)."""
    bandwidth = ctx.memory_bytes_per_s()
    return nhwc_batch_norm_durations(ctx.trace, bandwidth) if bandwidth else {}


def _segments(ctx: Context) -> SegmentShift | None:
    """The ``cudaMalloc`` calls a step that empties the cache makes once the converting ops'
    scratch blocks (cuDNN's NHWC staging) are gone (``segment_change.py``)."""
    ops = ctx.trace.gpu_ops.op_row[ctx.layout.rows]
    return without_scratch(ctx, ops[ops >= 0])


def change(ctx: Context) -> Change | None:
    """The conversion kernels removed, NCHW BatchNorm kernels at their NHWC time, and the
    allocator calls that the conversions' scratch blocks no longer spare or need."""
    return _change(ctx, _segments(ctx)) if len(ctx.layout.rows) else None


def _change(ctx: Context, segments: SegmentShift | None) -> Change:
    gpu = {**_batch_norm(ctx), **{int(r): 0.0 for r in ctx.layout.rows}}
    if segments is None:
        return Change(gpu_dur_us=gpu)
    return Change(gpu_dur_us=gpu, removed_cpu=segments.removed_cpu,
                  added_cpu_us=segments.added_cpu_us)


def withheld(gain_ms: float, depthwise_ms: float) -> str:
    """Why the gain is not estimated: the depthwise convolutions ``channels_last`` moves to
    cuDNN (``nhwc.aten_depthwise_rows``) take at least the time it would save, so their new
    kernels, which the trace does not time, decide the sign of the fix ("" when they do not,
    or when there is no saving to withhold)."""
    if depthwise_ms < gain_ms or gain_ms <= 0.0:
        return ""
    return (f"layout_conversion not estimated: channels_last would save {gain_ms:.2f} ms per "
            f"step on conversions and BatchNorm, but would also move the {depthwise_ms:.2f} ms "
            "per step of depthwise convolutions from PyTorch's kernels to cuDNN's, whose time, "
            "and that of the rest of a depthwise net in NHWC, this NCHW trace does not show: "
            "measure the fix (aiprof try)")


def find(ctx: Context) -> Finding | None:
    """NCHW<->NHWC conversions, transposes and permuted ``.contiguous()`` copies."""
    lay = ctx.layout
    if not len(lay.rows):
        return None
    segments = _segments(ctx)
    fix = _change(ctx, segments)
    gain = ctx.gain_pct(fix)
    batch_norm = _batch_norm(ctx)
    depthwise = aten_depthwise_rows(ctx.trace)
    depthwise_ms = per_step_ms(ctx, float(ctx.trace.gpu_ops.dur_us[depthwise].sum()))
    why = withheld(ctx.gain_ms_per_step(gain), depthwise_ms) if gain >= ctx.options.min_gain_pct \
        else ""
    return Finding(
        category="layout_conversion",
        title=f"{per_step_ms(ctx, lay.total_us)} ms per step in layout conversions",
        estimated_gain_pct=0.0 if why else gain,
        evidence={
            "conversion_ms_per_step": per_step_ms(ctx, lay.total_us),
            "num_conversion_kernels": len(lay.rows),
            "num_permuted_copies": lay.num_by_copy_op,
            "top_kernels": ctx.top_kernels(lay.rows),
            "nchw_batch_norm_ms_per_step": per_step_ms(ctx, float(sum(
                ctx.trace.gpu_ops.dur_us[r] for r in batch_norm))),
            "nhwc_batch_norm_ms_per_step": per_step_ms(ctx, sum(batch_norm.values())),
            "aten_depthwise_conv_ms_per_step": depthwise_ms,
            **({} if segments is None else {
                "cuda_mallocs_per_step": segments.mallocs_per_step,
                "cuda_mallocs_per_step_after_fix": segments.mallocs_per_step_after,
                "cuda_malloc_free_us_each": round(segments.segment_cost_us, 1),
            }),
        },
        fix=(
            "Keep convolutions in NHWC end to end: model = model.to(memory_format="
            "torch.channels_last) and x = x.to(memory_format=torch.channels_last); avoid "
            ".contiguous()/.permute() round trips between layers."
        ),
        model=("replay without the conversion kernels, and with the NCHW BatchNorm kernels at "
               "the time PyTorch's NHWC kernels take for their passes "
               f"({NHWC_BATCH_NORM_BANDWIDTH_FRACTION:.0%} of the DRAM bandwidth and "
               f"{NHWC_BATCH_NORM_US_PER_KERNEL:g} us a kernel, measured on the H200); not "
               "estimated where the depthwise convolutions it moves to cuDNN take as long as "
               "that saves; where the step empties the allocator's cache, the cudaMalloc calls "
               "the caching allocator's replay makes without the converting ops' scratch "
               "blocks, each at the trace's own cost of one (diagnose/segment_change.py)"),
        change=fix,
        withheld=why,
    )


RULE = Rule(
    category="layout_conversion",
    meaning="time in NCHW<->NHWC conversions, transposes and `.contiguous()` copies",
    find=find,
    change=change,
    order=60,
)
