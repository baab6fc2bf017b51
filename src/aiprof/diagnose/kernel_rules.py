"""Rules for causes inside the GPU work: math paths, layouts, fusion, shapes, occupancy.

Each builds new durations for the offending kernels and replays the steps with them.
"""

from __future__ import annotations

import numpy as np

from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change


def _per_step(ctx: Context, us: float) -> float:
    return round(us / max(len(ctx.trace.steps), 1) / 1000.0, 3)


_TF32_FIX = (
    "Use tensor cores: torch.backends.cuda.matmul.allow_tf32 = True and "
    "torch.backends.cudnn.allow_tf32 = True (or torch.set_float32_matmul_precision(\"high\")), "
    "or run the model under torch.autocast(\"cuda\", dtype=torch.bfloat16)."
)
_FP16_FIX = (
    "This GPU has no TF32/BF16 tensor cores: run the model under torch.autocast(\"cuda\", "
    "dtype=torch.float16) with torch.amp.GradScaler(\"cuda\") for training."
)


def tensor_cores_rule(ctx: Context) -> Finding | None:
    """FP32 GEMMs/convs on CUDA cores: replayed at the tensor-core (TF32, else FP16) rate."""
    tc = ctx.tensor_cores
    fp32_peak = ctx.peak_flops("fp32")
    target = "tf32" if ctx.peak_flops("tf32") else "fp16"
    fast_peak = ctx.peak_flops(target)
    if len(tc.fp32_rows) == 0 or not fp32_peak or not fast_peak:
        return None
    ratio = fp32_peak / fast_peak  # dense peaks: measured ceilings or the datasheet
    dur = ctx.trace.gpu_ops.dur_us
    change = Change(gpu_dur_us={int(r): float(dur[r]) * ratio for r in tc.fp32_rows})
    gain = ctx.gain_pct(change)
    return Finding(
        category="tensor_cores_unused",
        title=f"{tc.fp32_pct_of_gemm:.0f}% of matmul/conv time runs in FP32 on CUDA cores",
        estimated_gain_pct=gain,
        evidence={
            "fp32_gemm_ms_per_step": _per_step(ctx, tc.fp32_us),
            "gemm_ms_per_step": _per_step(ctx, tc.gemm_us),
            "fp32_peak_tflops": round(fp32_peak / 1e12, 1),
            f"{target}_peak_tflops": round(fast_peak / 1e12, 1),
            "top_kernels": ctx.top_kernels(tc.fp32_rows),
        },
        fix=_TF32_FIX if target == "tf32" else _FP16_FIX,
        model=f"replay with these kernels' durations scaled by peak fp32 / peak {target}",
    )


def layout_rule(ctx: Context) -> Finding | None:
    """NCHW<->NHWC conversions, transposes and permuted ``.contiguous()`` copies."""
    lay = ctx.layout
    if len(lay.rows) == 0:
        return None
    gain = ctx.gain_pct(Change(gpu_dur_us={int(r): 0.0 for r in lay.rows}))
    return Finding(
        category="layout_conversion",
        title=f"{_per_step(ctx, lay.total_us)} ms per step in layout conversions",
        estimated_gain_pct=gain,
        evidence={
            "conversion_ms_per_step": _per_step(ctx, lay.total_us),
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
    )


def unfused_rule(ctx: Context) -> Finding | None:
    """Chains of elementwise/normalization kernels that one fused kernel would replace."""
    chains = ctx.chains.chains
    if not chains:
        return None
    dur = ctx.trace.gpu_ops.dur_us
    new: dict[int, float] = {}
    for chain in chains:
        keep = int(chain.rows[int(np.argmax(dur[chain.rows]))])
        new.update({int(r): 0.0 for r in chain.rows if int(r) != keep})
    gain = ctx.gain_pct(Change(gpu_dur_us=new))
    known = [c.bytes_saved for c in chains if c.bytes_saved is not None]
    rows = np.concatenate([c.rows for c in chains])
    return Finding(
        category="unfused_elementwise",
        title=f"{len(chains)} chains of {ctx.chains.num_kernels} memory-bound kernels to fuse",
        estimated_gain_pct=gain,
        evidence={
            "chain_ms_per_step": _per_step(ctx, ctx.chains.chain_us),
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
    )


def misaligned_rule(ctx: Context) -> Finding | None:
    """GEMM/conv dimensions off the multiples of 8/16: replayed at the padded op's roof."""
    shapes = ctx.shapes
    if not shapes.ops:
        return None
    bandwidth = ctx.memory_bytes_per_s()
    if not bandwidth:
        return None
    dur = ctx.trace.gpu_ops.dur_us
    new: dict[int, float] = {}
    for op in shapes.ops:
        peak = ctx.peak_flops(op.precision)
        if not peak or op.kernel_us <= 0:
            continue
        roof_us = max(op.padded_flops / peak, op.bytes_total / bandwidth) * 1e6
        scale = min(1.0, roof_us / op.kernel_us)
        new.update({int(r): float(dur[r]) * scale for r in op.kernel_rows})
    if not new:
        return None
    gain = ctx.gain_pct(Change(gpu_dur_us=_same_kernels(ctx, new)))
    top = [
        {"op": o.name, "dims": o.dims, "misaligned": list(o.misaligned),
         "multiple": o.required_multiple, "kernel_us": round(o.kernel_us, 1)}
        for o in shapes.ops[: ctx.options.max_items]
    ]
    return Finding(
        category="misaligned_shapes",
        title=f"{len(shapes.ops)} GEMM/conv calls have dimensions off the tensor-core multiple",
        estimated_gain_pct=gain,
        evidence={
            "misaligned_kernel_ms_per_step": _per_step(ctx, shapes.kernel_us),
            "num_checked_ops": shapes.num_checked_ops,
            "top_ops": top,
        },
        fix=(
            "Pad the dimensions to multiples of 8 (FP16/BF16; 16 for INT8/FP8): e.g. "
            "nn.Linear(4096, 4096) instead of 4095, vocabulary padded to a multiple of 64, "
            "channels padded to 8."
        ),
        model="replay with each op at the roofline time of its padded shape on the device",
    )


def _same_kernels(ctx: Context, new: dict[int, float]) -> dict[int, float]:
    """Extend a change to the launches of the same kernels (name and grid) that the trace does
    not tie to an op (queued before the profiled window opened): same kernel, same fix."""
    gpu = ctx.trace.gpu_ops
    scale: dict[tuple[int, int, int, int], float] = {}
    for row, dur in new.items():
        if gpu.dur_us[row] > 0:
            key = (int(gpu.name_id[row]), int(gpu.grid_x[row]), int(gpu.grid_y[row]),
                   int(gpu.grid_z[row]))
            scale[key] = dur / float(gpu.dur_us[row])
    rows = ctx.timeline.gpu_row[ctx.timeline.gpu_row >= 0]
    orphans = rows[gpu.op_row[rows] < 0]
    extended = dict(new)
    for row in orphans.tolist():
        key = (int(gpu.name_id[row]), int(gpu.grid_x[row]), int(gpu.grid_y[row]),
               int(gpu.grid_z[row]))
        if key in scale and row not in extended:
            extended[row] = float(gpu.dur_us[row]) * scale[key]
    return extended


def occupancy_rule(ctx: Context) -> Finding | None:
    """Kernels whose grid has fewer blocks than the GPU has SMs."""
    occ = ctx.occupancy
    if not occ.supported or len(occ.small_grid_rows) == 0 or not occ.num_sms:
        return None
    dur = ctx.trace.gpu_ops.dur_us
    kernels = ctx.trace.kernels.dur_us
    floor = float(np.min(kernels[kernels > 0])) if np.any(kernels > 0) else 0.0
    scale = occ.small_grid_blocks / occ.num_sms
    new = {
        int(r): max(float(dur[r]) * float(s), floor)
        for r, s in zip(occ.small_grid_rows, scale, strict=True)
    }
    gain = ctx.gain_pct(Change(gpu_dur_us=new))
    return Finding(
        category="low_occupancy",
        title=f"{_per_step(ctx, occ.small_grid_us)} ms per step in kernels with fewer blocks "
              f"than the {occ.num_sms} SMs",
        estimated_gain_pct=gain,
        evidence={
            "small_grid_ms_per_step": _per_step(ctx, occ.small_grid_us),
            "num_sms": occ.num_sms,
            "time_weighted_occupancy_pct": round(occ.time_weighted_occupancy_pct, 1),
            "limiter_ms": {k: round(v / 1000.0, 3) for k, v in sorted(occ.limiter_us.items())},
            "top_kernels": ctx.top_kernels(occ.small_grid_rows),
        },
        fix=(
            "Give the GPU more parallel work: a larger batch, fused or batched small ops "
            "(torch.compile, torch._foreach_*), split-K/stream-K GEMMs for skinny shapes; for "
            "custom kernels, more blocks per launch and fewer registers/shared memory per block."
        ),
        model=(
            "replay with each small-grid kernel spread over every SM: duration x blocks / SMs, "
            "not below the trace's shortest kernel"
        ),
    )
