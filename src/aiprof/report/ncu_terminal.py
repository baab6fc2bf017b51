"""Render Nsight Compute counters per kernel (one card each) and translated nvprof metrics."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from aiprof.gpu.ncu_summary import KernelCounters
from aiprof.gpu.nvprof_values import NvprofValue


def render_kernel_counters(console: Console, rows: list[KernelCounters],
                           nvprof: list[NvprofValue]) -> None:
    for r in rows:
        console.print(_card(r))
    if nvprof:
        extra = Table(title="nvprof metrics via their Nsight Compute equivalents")
        for header in ("id", "nvprof", "value", "ncu", "note"):
            extra.add_column(header)
        for v in nvprof:
            extra.add_row(str(v.launch_id), v.nvprof, _num(v.value, ".2f"), escape(v.ncu),
                          v.note)
        console.print(extra)


def _num(value: float | None, fmt: str = ".1f") -> str:
    return "-" if value is None else format(value, fmt)


def _card(r: KernelCounters) -> Table:
    card = Table(title=escape(f"[{r.launch_id}] {r.kernel_name}"), show_header=False,
                 title_justify="left")
    stall = r.top_stalls[0] if r.top_stalls else None
    rows = [
        ("duration", f"{_num(r.duration_us, '.2f')} µs"),
        ("SM / memory throughput", f"{_num(r.sm_throughput_pct)}% / "
         f"{_num(r.mem_throughput_pct)}% of peak -> {r.bottleneck}"),
        ("occupancy achieved / theoretical",
         f"{_num(r.achieved_occupancy_pct)}% / {_num(r.theoretical_occupancy_pct)}% "
         f"(limiter: {r.limiter or '-'})"),
        ("model: theoretical occupancy",
         f"{_num(r.model_occupancy_pct)}% (limiter: {r.model_limiter or '-'})"),
        ("global loads: sectors/request, efficiency",
         f"{_num(r.sectors_per_request, '.2f')}, {_num(r.gld_efficiency_pct)}%"),
        ("shared memory: bank conflicts / wavefronts",
         f"{_num(r.bank_conflicts, '.0f')} / {_num(r.shared_wavefronts, '.0f')}"),
        ("active threads per warp instruction", f"{_num(r.threads_per_instruction, '.2f')} of 32"),
        ("top stall", "-" if stall is None else
         f"{stall.reason} ({stall.cycles_per_issue:.1f} cycles/issue): {stall.meaning}"),
        ("fix", "-" if stall is None else stall.fix),
    ]
    for key, value in rows:
        card.add_row(key, escape(value))
    return card
