"""Values of nvprof-named metrics computed from an Nsight Compute launch."""

from __future__ import annotations

from dataclasses import dataclass

from aiprof.gpu.ncu_csv import NcuLaunch
from aiprof.gpu.ncu_metrics import NvprofMetric


@dataclass(frozen=True, kw_only=True)
class NvprofValue:
    """One nvprof metric of one launch."""

    launch_id: int
    """ncu launch ID."""
    nvprof: str
    """nvprof / textbook name."""
    ncu: str
    """The ncu metric(s) or formula used."""
    value: float | None
    """Value in nvprof's unit (None: no equivalent or not collected)."""
    note: str
    """Caveat."""


def nvprof_value(launch: NcuLaunch, metric: NvprofMetric) -> NvprofValue:
    """The nvprof-compatible value of ``metric`` for ``launch``."""
    values = [launch.number(n) for n in metric.ncu]
    value: float | None = None
    if metric.ncu and all(v is not None for v in values):
        present = [v for v in values if v is not None]
        if metric.combine == "same":
            value = present[0]
        elif metric.combine == "sum":
            value = sum(present)
        elif metric.combine == "ratio32":
            value = present[0] * 100.0 / 32.0  # ncu 0-32 thread ratio -> nvprof % (§7.1)
        elif metric.combine == "hit_ratio" and present[1]:
            value = 100.0 * present[0] / present[1]
    formula = " + ".join(metric.ncu) if metric.ncu else "none on sm_70+"
    missing = "not collected" if value is None and metric.ncu else ""
    note = "; ".join(n for n in (metric.note, missing) if n)
    return NvprofValue(launch_id=launch.launch_id, nvprof=metric.nvprof, ncu=formula,
                       value=value, note=note)
