"""``layout_conversion``: NCHW<->NHWC conversions, transposes and permuted ``.contiguous()``
copies."""

from __future__ import annotations

from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change
from aiprof.diagnose.rule import Rule, per_step_ms


def change(ctx: Context) -> Change | None:
    """The conversion kernels removed."""
    rows = ctx.layout.rows
    return Change(gpu_dur_us={int(r): 0.0 for r in rows}) if len(rows) else None


def find(ctx: Context) -> Finding | None:
    """NCHW<->NHWC conversions, transposes and permuted ``.contiguous()`` copies."""
    lay = ctx.layout
    fix = change(ctx)
    if fix is None:
        return None
    gain = ctx.gain_pct(fix)
    return Finding(
        category="layout_conversion",
        title=f"{per_step_ms(ctx, lay.total_us)} ms per step in layout conversions",
        estimated_gain_pct=gain,
        evidence={
            "conversion_ms_per_step": per_step_ms(ctx, lay.total_us),
            "num_conversion_kernels": len(lay.rows),
            "num_permuted_copies": lay.num_by_copy_op,
            "top_kernels": ctx.top_kernels(lay.rows),
        },
        fix=(
            "Keep convolutions in NHWC end to end: model = model.to(memory_format="
            "torch.channels_last) and x = x.to(memory_format=torch.channels_last); avoid "
            ".contiguous()/.permute() round trips between layers."
        ),
        model="replay without the conversion kernels",
        change=fix,
    )


RULE = Rule(
    category="layout_conversion",
    meaning="time in NCHW<->NHWC conversions, transposes and `.contiguous()` copies",
    find=find,
    change=change,
    order=60,
)
