"""``unfused_elementwise``: chains of elementwise/normalization kernels that one fused kernel
would replace."""

from __future__ import annotations

import numpy as np

from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change
from aiprof.diagnose.rule import Rule, per_step_ms


def change(ctx: Context) -> Change | None:
    """Each chain reduced to its longest kernel."""
    chains = ctx.chains.chains
    if not chains:
        return None
    dur = ctx.trace.gpu_ops.dur_us
    new: dict[int, float] = {}
    for chain in chains:
        keep = int(chain.rows[int(np.argmax(dur[chain.rows]))])
        new.update({int(r): 0.0 for r in chain.rows if int(r) != keep})
    return Change(gpu_dur_us=new)


def find(ctx: Context) -> Finding | None:
    """Chains of elementwise/normalization kernels that one fused kernel would replace."""
    chains = ctx.chains.chains
    fix = change(ctx)
    if fix is None:
        return None
    gain = ctx.gain_pct(fix)
    known = [c.bytes_saved for c in chains if c.bytes_saved is not None]
    rows = np.concatenate([c.rows for c in chains])
    return Finding(
        category="unfused_elementwise",
        title=f"{len(chains)} chains of {ctx.chains.num_kernels} memory-bound kernels to fuse",
        estimated_gain_pct=gain,
        evidence={
            "chain_ms_per_step": per_step_ms(ctx, ctx.chains.chain_us),
            "num_chains": len(chains),
            "longest_chain_kernels": max(len(c.rows) for c in chains),
            "traffic_saved_mb": round(sum(known) / 1e6, 1) if known else None,
            "top_kernels": ctx.top_kernels(rows),
        },
        fix=(
            "Fuse the chains: torch.compile(model) generates one kernel per chain; or call "
            "the fused ops (F.gelu, F.layer_norm, F.scaled_dot_product_attention) instead of "
            "writing them out of elementary ops."
        ),
        model="replay with each chain reduced to its longest kernel (one read, one write)",
        change=fix,
    )


RULE = Rule(
    category="unfused_elementwise",
    meaning="chains of memory-bound elementwise/normalization kernels that fusion would remove",
    find=find,
    change=change,
    order=70,
)
