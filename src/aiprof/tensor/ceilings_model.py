"""The roofs an op is measured against: peak FLOP/s per precision and memory bandwidth.

They come from the hardware database (datasheet dense peaks, ``aiprof.hardware``) or from
ceilings measured on the device by ``aiprof ceilings`` (measured values override datasheet ones).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aiprof.errors import InputError, UnsupportedDeviceError

DEFAULT_LATENCY_FLOOR_US = 2.0
"""Roof time under which an op counts as latency-bound when no launch latency was measured.
A choice, not a hardware constant: override it, or measure it with ``aiprof ceilings``."""


@dataclass(frozen=True, kw_only=True)
class Ceilings:
    """Roofs of one device. Peaks are dense (no 2:4 sparsity; gpu-models.md §6.1)."""

    name: str
    memory_bytes_per_s: float
    """DRAM (or host memory, on a CPU) bandwidth."""
    matmul_flops_per_s: dict[str, float]
    """Peak per precision (fp64, fp32, tf32, fp16, bf16, fp8, int8) on the matrix path."""
    vector_flops_per_s: float
    """Peak of non-matrix code (FP32 CUDA cores): the roof of elementwise and reduction ops."""
    launch_latency_us: float | None = None
    """Measured kernel launch latency; the latency-bound threshold when present."""
    source: str = ""
    """Where the numbers come from (datasheet, or "measured on <device> <date>")."""
    extra: dict[str, float] = field(default_factory=dict)
    """Other measured values (host-device bandwidths...), by name with units."""

    def matmul_peak(self, precision: str, *, allow_tf32: bool = False) -> float:
        """Matrix-path peak for a precision; fp32 uses tf32 when ``allow_tf32`` and it is known."""
        if precision == "fp32" and allow_tf32 and "tf32" in self.matmul_flops_per_s:
            return self.matmul_flops_per_s["tf32"]
        if precision in self.matmul_flops_per_s:
            return self.matmul_flops_per_s[precision]
        if "fp32" in self.matmul_flops_per_s:
            return self.matmul_flops_per_s["fp32"]
        raise UnsupportedDeviceError(f"{self.name}: no matmul peak for {precision}")

    def ridge_flop_per_byte(self, precision: str, *, allow_tf32: bool = False) -> float:
        """Machine balance: the matrix peak over memory bandwidth (gpu-models.md §6.1, §6.5)."""
        return self.matmul_peak(precision, allow_tf32=allow_tf32) / self.memory_bytes_per_s

    @property
    def latency_floor_us(self) -> float:
        """Roof time under which an op is latency-bound (measured launch latency or the default)."""
        return self.launch_latency_us or DEFAULT_LATENCY_FLOOR_US


def ceilings_for_gpu(name: str) -> Ceilings:
    """Datasheet roofs of a GPU product (``"H100"``, ``"H200"``, ``deviceProperties.name``)."""
    from aiprof.hardware import lookup

    spec = lookup(name)
    if spec.product is None:
        raise UnsupportedDeviceError(
            f"{name!r} names an architecture, not a product: say e.g. H100"
        )
    peaks = spec.product.peak_flops
    matmul = {
        k: v
        for k, v in peaks.items()
        if k in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
    }
    if "fp64_tensor" in peaks:
        matmul["fp64"] = peaks["fp64_tensor"]
    return Ceilings(
        name=spec.product.name,
        memory_bytes_per_s=spec.product.mem_bandwidth_bytes_per_s,
        matmul_flops_per_s=matmul,
        vector_flops_per_s=peaks["fp32"],
        source=spec.product.source,
    )


def save_ceilings(ceilings: Ceilings, path: Path) -> None:
    """Write ceilings as JSON (read back by :func:`load_ceilings`)."""
    from aiprof.jsontext import dumps

    path.write_text(dumps(ceilings) + "\n")


def load_ceilings(path: Path) -> Ceilings:
    """Read ceilings written by ``aiprof ceilings --save``; InputError if the file is not one."""
    try:
        data = json.loads(Path(path).read_text())
        return Ceilings(**data)
    except (OSError, ValueError, TypeError) as error:
        raise InputError(
            f"cannot read ceilings from {path}: {error}; write them with "
            "'aiprof ceilings --save FILE'"
        ) from error


def ceilings_as_dict(ceilings: Ceilings) -> dict[str, object]:
    """Plain dict form (for JSON output)."""
    return asdict(ceilings)
