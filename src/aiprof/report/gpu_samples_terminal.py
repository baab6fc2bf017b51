"""Render a ``SampleView`` (NVML samples per step) as rich tables."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from aiprof.analysis.gpu_samples import SampleView

SHOWN = (("gpu_util_pct", "SM util %", 1.0), ("mem_util_pct", "mem util %", 1.0),
         ("memory_used_bytes", "mem used GiB", 2.0**-30), ("power_w", "power W", 1.0),
         ("sm_clock_mhz", "SM MHz", 1.0), ("mem_clock_mhz", "mem MHz", 1.0),
         ("temperature_c", "°C", 1.0))


def render_samples(console: Console, view: SampleView) -> None:
    if not view.devices:
        console.print(f"rank {view.rank}: no GPU samples in this run record")
    for d in view.devices:
        table = Table(title=f"rank {view.rank}, GPU {d.device}: NVML samples per step "
                            f"({len(d.t_us)} samples in the record)", title_justify="left")
        table.add_column("step", justify="right")
        table.add_column("samples", justify="right")
        for _, label, _ in SHOWN:
            table.add_column(label, justify="right")
        for i, number in enumerate(d.step_number.tolist()):
            cells = [_fmt(d.step_means[m][i] * scale) for m, _, scale in SHOWN]
            table.add_row(str(number), str(int(d.step_num_samples[i])), *cells)
        console.print(table)
    console.print("a step with 0 samples shows the last value before its end (NVML averages "
                  "over its own sampling period)")


def _fmt(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.1f}"
