"""``unfused_elementwise``: chains of elementwise/normalization kernels that one fused kernel
would replace."""

from __future__ import annotations

import numpy as np

from aiprof.diagnose.attention import Attention, find_attention, fused_durations
from aiprof.diagnose.compiled import compile_change
from aiprof.diagnose.compiled_host import calls_per_step
from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change
from aiprof.diagnose.rule import Rule, per_step_ms


def attention(ctx: Context) -> list[Attention]:
    """Hand-written attention regions (``diagnose/attention.py``); none without the peaks."""
    peak, bandwidth = ctx.peak_flops("bf16") or ctx.peak_flops("fp16"), ctx.memory_bytes_per_s()
    if not peak or not bandwidth:
        return []
    return find_attention(ctx.trace, peak, bandwidth, ctx.peak_flops("fp32"))


def change(ctx: Context, regions: list[Attention] | None = None) -> Change | None:
    """The step under ``torch.compile`` (``diagnose/compiled.py``: runs of memory-bound kernels
    fused, misaligned GEMMs padded, the eager dispatch replaced by the generated code's host
    cost) with each hand-written attention (forward and backward) as one kernel at the fused
    roofline."""
    regions = attention(ctx) if regions is None else regions
    return compile_change(ctx, fused_durations(ctx.trace, regions))


CALLS_NOTE = (
    " The step calls the model {calls} times (each weight is used {calls} times a step): "
    "compiled, each call pays Dynamo's guards and the runtime wrappers, forward and backward, "
    "which the estimate counts; a loop inside the compiled function would be one call."
)
"""Appended to the fix where the step calls its model more than once (``calls_per_step``)."""


def find(ctx: Context) -> Finding | None:
    """Chains of elementwise/normalization kernels that one fused kernel would replace."""
    chains = ctx.chains.chains
    regions = attention(ctx)
    fix = change(ctx, regions)
    if fix is None:
        return None
    gain = ctx.gain_pct(fix)
    known = [c.bytes_saved for c in chains if c.bytes_saved is not None]
    rows = np.concatenate([c.rows for c in chains] + [
        np.concatenate([a.forward_rows, a.backward_rows]) for a in regions]).astype(np.int64)
    dur = ctx.trace.gpu_ops.dur_us
    attention_us = sum(float(dur[np.concatenate([a.forward_rows, a.backward_rows])].sum())
                       for a in regions)
    calls = calls_per_step(ctx.trace)
    title = f"{len(chains)} chains of {ctx.chains.num_kernels} memory-bound kernels to fuse"
    if regions:
        title += (f"; {len(regions)} hand-written attention blocks "
                  f"({per_step_ms(ctx, attention_us)} ms per step)")
    return Finding(
        category="unfused_elementwise",
        title=title,
        estimated_gain_pct=gain,
        evidence={
            "chain_ms_per_step": per_step_ms(ctx, ctx.chains.chain_us),
            "num_chains": len(chains),
            "longest_chain_kernels": max((len(c.rows) for c in chains), default=0),
            "traffic_saved_mb_per_step": (round(sum(known) / 1e6 / max(len(ctx.trace.steps), 1),
                                                1) if known else None),
            "top_kernels": ctx.top_kernels(rows),
            "attention_blocks": len(regions),
            "attention_ms_per_step": per_step_ms(ctx, attention_us) if regions else None,
            "fused_attention_ms_per_step": per_step_ms(
                ctx, sum(a.forward_us + a.backward_us for a in regions)) if regions else None,
            "attention_shapes": sorted({f"N={a.heads_x_batch} Sq={a.seq_q} Sk={a.seq_k} "
                                        f"D={a.head_dim}" for a in regions})[:3],
            **({"model_calls_per_step": calls} if calls > 1 else {}),
        },
        fix=(
            "Fuse the chains: torch.compile(model) generates one kernel per chain; or call "
            "the fused ops (F.gelu, F.layer_norm, F.scaled_dot_product_attention) instead of "
            "writing them out of elementary ops."
            + (CALLS_NOTE.format(calls=calls) if calls > 1 else "")
        ),
        model=(
            "replay with each chain reduced to its longest kernel (one read, one write); "
            "each hand-written attention, forward and backward, as one kernel at the fused "
            "roofline (no S x S scores in memory: Q, K, V, O read or written once); "
            "misaligned GEMMs at their padded shape (Inductor's pad_mm); the compiled part's "
            "host time replaced by the generated code's cost per launch and per graph call, "
            "measured on compiled H200 steps in units of the trace's own launch call"
        ),
        change=fix,
        includes=("misaligned_shapes",),
    )


RULE = Rule(
    category="unfused_elementwise",
    meaning="chains of memory-bound elementwise/normalization kernels that fusion would remove",
    find=find,
    change=change,
    order=70,
)
