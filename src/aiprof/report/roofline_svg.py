"""Log-log roofline plot: one roof per precision, one point per op (achieved FLOP/s)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from aiprof.report.svg import Series, line_chart
from aiprof.tensor.ceilings_model import Ceilings
from aiprof.tensor.roofline import RooflinePoint

_ROOF_PRECISIONS = ("fp8", "bf16", "fp16", "tf32", "fp32", "fp64")


def roofline_svg(points: Sequence[RooflinePoint], ceilings: Ceilings, *, title: str) -> str:
    """SVG of the roofs of ``ceilings`` and the measured ops in ``points`` (TFLOP/s vs FLOP/B)."""
    placed = [p for p in points if p.intensity_flop_per_byte and p.achieved_flops_per_s]
    intensities = [p.intensity_flop_per_byte or 1.0 for p in placed] or [1.0]
    lo = min(min(intensities) / 2, 0.05)
    hi = max(max(intensities) * 2, 2000.0)
    xs = [lo * (hi / lo) ** (i / 63) for i in range(64)]
    series = []
    for precision in _ROOF_PRECISIONS:
        if precision in ceilings.matmul_flops_per_s:
            peak = ceilings.matmul_flops_per_s[precision]
            ys = [min(peak, x * ceilings.memory_bytes_per_s) / 1e12 for x in xs]
            series.append(Series(f"roof {precision} ({peak / 1e12:.0f} TF)", xs, ys))
    by_bound: dict[str, list[RooflinePoint]] = defaultdict(list)
    for point in placed:
        by_bound[point.bound].append(point)
    for bound in sorted(by_bound):
        group = by_bound[bound]
        series.append(
            Series(
                f"ops: {bound}-bound",
                [p.intensity_flop_per_byte for p in group],  # type: ignore[misc]
                [p.achieved_flops_per_s / 1e12 for p in group],  # type: ignore[operator]
                kind="points",
            )
        )
    return line_chart(
        series,
        title=title,
        x_label="arithmetic intensity (FLOP/byte, compulsory traffic)",
        y_label="TFLOP/s",
        x_log=True,
        y_log=True,
        width=760,
        height=480,
    )
