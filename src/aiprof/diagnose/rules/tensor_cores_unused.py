"""``tensor_cores_unused``: FP32 GEMMs/convs on CUDA cores, replayed at the tensor-core (TF32,
else FP16) rate."""

from __future__ import annotations

from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change
from aiprof.diagnose.rule import Rule, per_step_ms

_TF32_FIX = (
    "Use tensor cores: torch.backends.cuda.matmul.allow_tf32 = True and "
    "torch.backends.cudnn.allow_tf32 = True (or torch.set_float32_matmul_precision(\"high\")), "
    "or run the model under torch.autocast(\"cuda\", dtype=torch.bfloat16)."
)
_FP16_FIX = (
    "This GPU has no TF32/BF16 tensor cores: run the model under torch.autocast(\"cuda\", "
    "dtype=torch.float16) with torch.amp.GradScaler(\"cuda\") for training."
)


def _peaks(ctx: Context) -> tuple[str, float | None, float | None]:
    """The tensor-core path (tf32, else fp16), the FP32 peak and that path's peak."""
    target = "tf32" if ctx.peak_flops("tf32") else "fp16"
    return target, ctx.peak_flops("fp32"), ctx.peak_flops(target)


def change(ctx: Context) -> Change | None:
    """The FP32 kernels' durations scaled by peak FP32 / peak of the tensor-core path."""
    tc = ctx.tensor_cores
    _, fp32_peak, fast_peak = _peaks(ctx)
    if len(tc.fp32_rows) == 0 or not fp32_peak or not fast_peak:
        return None
    ratio = fp32_peak / fast_peak  # dense peaks: measured ceilings or the datasheet
    dur = ctx.trace.gpu_ops.dur_us
    return Change(gpu_dur_us={int(r): float(dur[r]) * ratio for r in tc.fp32_rows})


def find(ctx: Context) -> Finding | None:
    """FP32 GEMMs/convs on CUDA cores: replayed at the tensor-core (TF32, else FP16) rate."""
    tc = ctx.tensor_cores
    target, fp32_peak, fast_peak = _peaks(ctx)
    fix = change(ctx)
    if fix is None or not fp32_peak or not fast_peak:
        return None
    gain = ctx.gain_pct(fix)
    return Finding(
        category="tensor_cores_unused",
        title=f"{tc.fp32_pct_of_gemm:.0f}% of matmul/conv time runs in FP32 on CUDA cores",
        estimated_gain_pct=gain,
        evidence={
            "fp32_gemm_ms_per_step": per_step_ms(ctx, tc.fp32_us),
            "gemm_ms_per_step": per_step_ms(ctx, tc.gemm_us),
            "fp32_peak_tflops": round(fp32_peak / 1e12, 1),
            f"{target}_peak_tflops": round(fast_peak / 1e12, 1),
            "top_kernels": ctx.top_kernels(tc.fp32_rows),
        },
        fix=_TF32_FIX if target == "tf32" else _FP16_FIX,
        model=f"replay with these kernels' durations scaled by peak fp32 / peak {target}",
        change=fix,
    )


RULE = Rule(
    category="tensor_cores_unused",
    meaning="matmul/conv time spent in FP32 paths where TF32/BF16/FP16 would use tensor cores",
    find=find,
    change=change,
    order=50,
)
