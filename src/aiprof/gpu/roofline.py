"""Roofline math for any GPU spec: attainable FLOP/s, ridge point, bound classification.

Method: Williams, Waterman & Patterson, "Roofline: an insightful visual performance model",
CACM 52(4), 2009; as used by Nsight Compute (../shared/reference/gpu-models.md §6.1):
``P = min(P_peak, I * B_peak)``, ridge ``I* = P_peak / B_peak``.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiprof.errors import InputError
from aiprof.hardware import GpuSpec, lookup, normalize_dtype

DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")


@dataclass(frozen=True, kw_only=True)
class RooflinePoint:
    """Where one kernel (or op) sits under the roofline of one dtype."""

    dtype: str
    """Normalized dtype whose peak is used."""
    intensity_flop_per_byte: float
    """Arithmetic intensity."""
    peak_flops: float
    """Compute ceiling, FLOP/s."""
    mem_bandwidth_bytes_per_s: float
    """Memory ceiling, bytes/s."""
    ridge_flop_per_byte: float
    """Intensity where the two ceilings meet."""
    attainable_flops: float
    """min(peak, intensity * bandwidth)."""
    bound: str
    """``memory`` (intensity < ridge) or ``compute``."""


def _resolve(spec: str | GpuSpec) -> GpuSpec:
    return lookup(spec) if isinstance(spec, str) else spec


def ridge_point(spec: str | GpuSpec, dtype: str, *, tensor_cores: bool = True,
                mem_bandwidth_bytes_per_s: float | None = None) -> float:
    """Machine balance ``peak / bandwidth`` in FLOP per byte."""
    gpu = _resolve(spec)
    bandwidth = mem_bandwidth_bytes_per_s or gpu.mem_bandwidth_bytes_per_s
    return gpu.peak_flops(dtype, tensor_cores=tensor_cores) / bandwidth


def ridge_points(spec: str | GpuSpec) -> dict[str, float]:
    """Ridge point of every dtype the spec has a peak for."""
    gpu = _resolve(spec)
    return {d: ridge_point(gpu, d) for d in DTYPES if gpu.has_peak(d)}


def roofline(
    spec: str | GpuSpec,
    flops: float,
    bytes_moved: float,
    dtype: str = "fp32",
    *,
    tensor_cores: bool = True,
    peak_flops: float | None = None,
    mem_bandwidth_bytes_per_s: float | None = None,
) -> RooflinePoint:
    """Attainable FLOP/s and bound of a kernel doing ``flops`` over ``bytes_moved`` DRAM bytes.

    ``peak_flops`` / ``mem_bandwidth_bytes_per_s`` override the datasheet (e.g. measured ceilings
    or ncu's base-clock peak).
    """
    if flops < 0 or bytes_moved <= 0:
        raise InputError(f"need flops >= 0 and bytes > 0 (got {flops}, {bytes_moved})")
    gpu = _resolve(spec)
    kind = normalize_dtype(dtype)
    peak = peak_flops or gpu.peak_flops(kind, tensor_cores=tensor_cores)
    bandwidth = mem_bandwidth_bytes_per_s or gpu.mem_bandwidth_bytes_per_s
    if peak <= 0 or bandwidth <= 0:
        raise InputError("peak FLOP/s and bandwidth must be > 0")
    intensity = flops / bytes_moved
    ridge = peak / bandwidth
    return RooflinePoint(
        dtype=kind, intensity_flop_per_byte=intensity, peak_flops=peak,
        mem_bandwidth_bytes_per_s=bandwidth, ridge_flop_per_byte=ridge,
        attainable_flops=min(peak, intensity * bandwidth),
        bound="memory" if intensity < ridge else "compute",
    )
