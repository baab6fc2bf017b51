"""``tensor_cores_unused``: FP32 GEMMs/convs on CUDA cores, replayed on the TF32 (else FP16)
path and on the BF16 autocast path (``diagnose/precision.py``)."""

from __future__ import annotations

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.nchw_conversions import conversion_durations
from aiprof.diagnose.precision import (
    HALF_BYTES,
    MemoryBoundFp32,
    memory_bound_fp32,
    precision_durations,
    reduce_launch_spans,
    tf32_rows,
)
from aiprof.diagnose.replay import Change
from aiprof.diagnose.rule import Rule, per_step_ms

_TF32_FIX = (
    "Use tensor cores: torch.backends.cuda.matmul.allow_tf32 = True and "
    "torch.backends.cudnn.allow_tf32 = True (or torch.set_float32_matmul_precision(\"high\")), "
    "or run the model under torch.autocast(\"cuda\", dtype=torch.bfloat16)."
)
_BF16_FIRST = (
    "Run the model under torch.autocast(\"cuda\", dtype=torch.bfloat16): matmuls and convs "
    "on bf16 tensor cores and half the bytes in the elementwise ops between them; at least "
    "enable TF32 (torch.backends.cuda.matmul.allow_tf32 = True, torch.backends.cudnn.allow_tf32 "
    "= True)."
)
_FP16_FIX = (
    "This GPU has no TF32/BF16 tensor cores: run the model under torch.autocast(\"cuda\", "
    "dtype=torch.float16) with torch.amp.GradScaler(\"cuda\") for training."
)


def _peaks(ctx: Context) -> tuple[str, float | None, float | None]:
    """The tensor-core path (tf32, else fp16), the FP32 peak and that path's peak."""
    target = "tf32" if ctx.peak_flops("tf32") else "fp16"
    return target, ctx.peak_flops("fp32"), ctx.peak_flops(target)


def paths(ctx: Context) -> dict[str, Change]:
    """Each precision path's change (``precision.py``): TF32 (else FP16) with the FP32
    GEMM/conv kernels at that peak; on GPUs with BF16, autocast: those kernels at the BF16
    peak and the float32 memory-bound kernels at half (or three quarters) of their bytes."""
    tc = ctx.tensor_cores
    target, fp32_peak, fast_peak = _peaks(ctx)
    if len(tc.fp32_rows) == 0 or not fp32_peak or not fast_peak:
        return {}
    # dense peaks: measured ceilings or the datasheet; TF32 reaches only the kernels its flags
    # govern (precision.tf32_rows), FP16 autocast (no TF32: V100) every FP32 GEMM/conv
    moved = tf32_rows(ctx.trace, tc) if target == "tf32" else tc.fp32_rows
    # TF32 keeps FP32 storage: its conversions move the recorded bytes; fp16 and bf16 half
    element = 1.0 if target == "tf32" else HALF_BYTES
    out = {target: _path(ctx, moved, fp32_peak / fast_peak, None, element)} if len(moved) else {}
    bf16_peak = ctx.peak_flops("bf16") if target == "tf32" else None
    if bf16_peak:
        out["bf16"] = _path(ctx, tc.fp32_rows, fp32_peak / bf16_peak,
                            memory_bound_fp32(ctx.trace), HALF_BYTES)
    return out


def _path(ctx: Context, rows: np.ndarray, factor: float, memory: MemoryBoundFp32 | None,
          element_factor: float) -> Change:
    """One path's change: the new durations, cuDNN's layout conversions around its NCHW
    convolutions added (``nchw_conversions``, at ``element_factor`` of the recorded bytes), and
    the launches of the split-K reductions it no longer runs (``precision.unsplit``) gone from
    the host."""
    new = precision_durations(ctx.trace, rows, factor, memory)
    bandwidth = ctx.memory_bytes_per_s()
    if bandwidth:
        for row, us in conversion_durations(ctx.trace, rows, element_factor, bandwidth).items():
            new[row] = new[row] + us
    return Change(gpu_dur_us=new, removed_cpu=reduce_launch_spans(ctx.trace, rows, factor))


def change(ctx: Context) -> Change | None:
    """The better precision path's change (the one the finding's gain is)."""
    found = paths(ctx)
    if not found:
        return None
    return max(found.values(), key=ctx.gain_pct)


def find(ctx: Context) -> Finding | None:
    """FP32 GEMMs/convs on CUDA cores: replayed on the TF32 (else FP16) path and on the BF16
    autocast path; the gain is the better of the two."""
    tc = ctx.tensor_cores
    target, fp32_peak, fast_peak = _peaks(ctx)
    found = paths(ctx)
    if not found or not fp32_peak or not fast_peak:
        return None
    gains = {name: ctx.gain_pct(fix) for name, fix in found.items()}
    best = max(gains, key=lambda name: gains[name])
    evidence: dict[str, object] = {
        "fp32_gemm_ms_per_step": per_step_ms(ctx, tc.fp32_us),
        "gemm_ms_per_step": per_step_ms(ctx, tc.gemm_us),
        "fp32_peak_tflops": round(fp32_peak / 1e12, 1),
        f"{target}_peak_tflops": round(fast_peak / 1e12, 1),
        f"{target}_gain_pct": round(gains.get(target, 0.0), 1),
    }
    # the split-K reductions the best path runs no more (precision.unsplit), with their launches
    steps = max(len(ctx.trace.steps), 1)
    evidence["split_k_reduces_gone_per_step"] = round(
        sum(1 for us in found[best].gpu_dur_us.values() if us == 0.0) / steps, 1)
    evidence["split_k_launch_ms_per_step"] = per_step_ms(ctx, iv.length(found[best].removed_cpu))
    if target == "tf32":
        evidence["tf32_gemm_ms_per_step"] = per_step_ms(ctx, float(
            ctx.trace.gpu_ops.dur_us[tf32_rows(ctx.trace, tc)].sum()))
    if "bf16" in found:
        memory = memory_bound_fp32(ctx.trace)
        dur = ctx.trace.gpu_ops.dur_us
        evidence.update({
            "bf16_peak_tflops": round(float(ctx.peak_flops("bf16") or 0.0) / 1e12, 1),
            "bf16_autocast_gain_pct": round(gains["bf16"], 1),
            "fp32_memory_bound_ms_per_step": per_step_ms(ctx, float(dur[memory.rows].sum()))
            if memory.typed else None,
        })
    bandwidth = ctx.memory_bytes_per_s()
    if bandwidth:  # what the best path adds around its NCHW convolutions (nchw_conversions)
        moved = tf32_rows(ctx.trace, tc) if best == "tf32" else tc.fp32_rows
        added = conversion_durations(ctx.trace, moved, 1.0 if best == "tf32" else HALF_BYTES,
                                     bandwidth)
        evidence["nchw_conversions_ms_per_step"] = per_step_ms(ctx, sum(added.values()))
    evidence["top_kernels"] = ctx.top_kernels(tc.fp32_rows)
    return Finding(
        category="tensor_cores_unused",
        title=f"{tc.fp32_pct_of_gemm:.0f}% of matmul/conv time runs in FP32 on CUDA cores",
        estimated_gain_pct=gains[best],
        evidence=evidence,
        fix=_FP16_FIX if target == "fp16" else (_BF16_FIRST if best == "bf16" else _TF32_FIX),
        model=(
            f"replay with these kernels' durations scaled by peak fp32 / peak {target}"
            + (" (those TF32's flags reach: not fused attention, PyTorch's depthwise kernels "
               "or a library whose flag was already on)" if target == "tf32" else "")
            + "; cuDNN's NHWC layout conversions added around each NCHW convolution moved "
              "(each tensor read and written once, at 0.32 of the DRAM bandwidth, measured)"
            + "; a split-K reduction goes, with its launch, where its GEMM on the new path "
              "lasts less than the reduction"
            + ("; and with them at peak fp32 / peak bf16 and the float32 memory-bound kernels "
               "at half their bytes (bf16 autocast; three quarters for ops autocast keeps in "
               "float32): the better of the two" if "bf16" in found else "")
        ),
        change=found[best],
    )


RULE = Rule(
    category="tensor_cores_unused",
    meaning="matmul/conv time spent in FP32 paths where TF32/BF16/FP16 would use tensor cores",
    find=find,
    change=change,
    order=50,
)
