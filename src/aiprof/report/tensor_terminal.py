"""Terminal tables for ``aiprof roofline``, ``aiprof model`` and ``aiprof ceilings``."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from aiprof.measure.tensor.ceilings import MeasuredCeilings
from aiprof.measure.tensor.model_analysis import ModelAnalysis
from aiprof.report.terminal import duration, shorten, text
from aiprof.tensor.alignment import AlignmentFinding
from aiprof.tensor.fusion import FusionReport
from aiprof.tensor.layout import LayoutReport
from aiprof.tensor.memtimeline import MemoryTimeline
from aiprof.tensor.trace_roofline import TraceRoofline

MAX_LINES = 8
"""Findings printed per lint; --json has them all."""


def _num(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if value is None else f"{value / scale:,.{digits}f}"


def print_trace_roofline(out: Console, result: TraceRoofline, top: int) -> None:
    """The ops of a trace on the roofline, largest time lost first."""
    table = Table(title=f"Roofline on {text(result.device)} (top {top} by time lost)")
    for column in (
        "op",
        "shapes",
        "calls",
        "bound",
        "device",
        "roof",
        "% roof",
        "lost",
        "TFLOP/s",
        "GB/s",
        "FLOP/B",
    ):
        table.add_column(column, justify="left" if column in ("op", "shapes", "bound") else "right")
    for row in result.rows[:top]:
        p = row.point
        table.add_row(
            text(row.op),
            text(shorten(row.shapes, 36)),
            str(row.num_calls),
            p.bound,
            duration(p.measured_us or 0.0),
            duration(p.roof_time_us),
            _num(p.roof_pct),
            duration(p.time_lost_us or 0.0),
            _num(p.achieved_flops_per_s, 1e12, 2),
            _num(p.achieved_gbps, 1.0, 0),
            _num(p.intensity_flop_per_byte, 1.0, 1),
        )
    out.print(table)
    out.print(
        f"{result.num_ops} ops launched device work for {duration(result.device_us)}; "
        f"time lost to the roof {duration(result.time_lost_us)}; "
        f"{result.num_ops_without_model} ops ({duration(result.device_us_without_model)}) "
        f"had no cost model or no shapes; collectives {duration(result.device_us_communication)} "
        "(not on the roofline)."
    )


def print_model(out: Console, analysis: ModelAnalysis, top: int) -> None:
    """Ops of a recorded model pass, by predicted (or measured) time."""
    title = f"Ops predicted on {analysis.target}" if analysis.target else "Ops (FLOPs and bytes)"
    table = Table(title=text(title))
    for column in (
        "#",
        "op",
        "phase",
        "shapes",
        "dtype",
        "GFLOP",
        "MB",
        "FLOP/B",
        "bound",
        "predicted",
        "measured",
    ):
        table.add_column(
            column,
            justify="left" if column in ("op", "phase", "shapes", "dtype", "bound") else "right",
        )
    ranked = sorted(
        analysis.ops, key=lambda r: -(r.roofline.roof_time_us if r.roofline else r.cost.flops)
    )
    for r in [r for r in ranked if r.cost.family not in ("view", "factory")][:top]:
        table.add_row(
            str(r.index),
            text(r.op),
            r.phase,
            text(shorten(str(list(r.input_shapes)), 40)),
            r.dtypes[0] if r.dtypes else "-",
            _num(r.cost.flops, 1e9, 3),
            _num(r.cost.bytes_total, 1e6, 2),
            _num(r.cost.intensity_flop_per_byte),
            r.roofline.bound if r.roofline else "-",
            duration(r.roofline.roof_time_us) if r.roofline else "-",
            duration(r.measured_us) if r.measured_us is not None else "-",
        )
    out.print(table)
    s = analysis.summary
    line = (
        f"{s.num_ops} ops, {s.total_flops / 1e9:,.3f} GFLOP, {s.total_bytes / 1e6:,.1f} MB "
        f"compulsory traffic; {s.num_ops_without_model} ops without a cost model"
    )
    if s.ops_without_model:
        line += " (" + ", ".join(f"{k} x{v}" for k, v in s.ops_without_model.items()) + ")"
    if analysis.predicted_total_us is not None:
        line += (
            f"; roofline lower bound on {analysis.target}: {duration(analysis.predicted_total_us)}"
        )
    if analysis.measured_total_us is not None:
        line += f"; measured here: {duration(analysis.measured_total_us)}"
    out.print(text(line))


def print_fusion(out: Console, report: FusionReport) -> None:
    """Fusion groups with bytes and launches saved."""
    table = Table(title="Fusion opportunities")
    for column in ("kind", "ops", "anchor", "bytes saved", "launches saved", "predicted saved"):
        table.add_column(column)
    for g in sorted(report.groups, key=lambda g: -g.bytes_saved):
        table.add_row(
            g.kind,
            text(shorten(" > ".join(g.ops), 60)),
            g.anchor or "-",
            f"{g.bytes_saved:,}",
            str(g.launches_saved),
            duration(g.predicted_saved_us) if g.predicted_saved_us is not None else "-",
        )
    out.print(table)


def print_ceilings(out: Console, measured: MeasuredCeilings) -> None:
    """Measured roofs of this device and what was skipped."""
    c = measured.ceilings
    table = Table(title=text(f"Measured ceilings of {measured.device_name} ({measured.device})"))
    table.add_column("ceiling")
    table.add_column("value", justify="right")
    table.add_row("copy bandwidth (read+write)", f"{c.memory_bytes_per_s / 1e9:,.1f} GB/s")
    for precision, value in c.matmul_flops_per_s.items():
        table.add_row(f"GEMM {precision} ({measured.gemm_size}^3)", f"{value / 1e12:,.3f} TFLOP/s")
    for key, value in c.extra.items():
        table.add_row(key.replace("_bytes_per_s", ""), f"{value / 1e9:,.1f} GB/s")
    table.add_row(
        "launch latency" if measured.device != "cpu" else "per-op dispatch",
        f"{c.launch_latency_us or 0:.2f} µs",
    )
    out.print(table)
    for item in measured.skipped:
        out.print(f"skipped: {text(item)}")


def print_lints(
    out: Console, layout: LayoutReport, alignment: tuple[AlignmentFinding, ...]
) -> None:
    """Layout and alignment findings."""
    out.print(
        f"layout: {layout.num_convs_checked} convolutions checked, {len(layout.findings)} findings"
    )
    for f in layout.findings[:MAX_LINES]:
        predicted = (
            f" ~{duration(f.predicted_us)} of conversions" if f.predicted_us is not None else ""
        )
        if f.measured_us is not None:
            predicted += f", measured {duration(f.measured_us)}"
        out.print(
            f"  {text('[' + f.kind + ']')} op #{f.index} {text(f.op)} "
            f"{text(str(list(f.shape)))} {f.dtype}: "
            f"{f.converted_bytes:,} B moved{predicted}; fix: {text(f.fix)}"
        )
    if len(layout.findings) > MAX_LINES:
        out.print(f"  ... and {len(layout.findings) - MAX_LINES} more (--json lists all)")
    if layout.predicted_total_us is not None:
        out.print(
            f"  predicted conversion time, all findings: {duration(layout.predicted_total_us)}"
        )
    out.print(f"alignment: {len(alignment)} findings")
    for a in alignment:
        if a.kind == "pointer":
            out.print(
                f"  {text('[pointer]')} op #{a.index} {text(a.op)}: "
                f"data_ptr % 256 = {a.data_ptr_mod_256}"
            )
            continue
        gain = f", at most {duration(a.max_gain_us)} to gain" if a.max_gain_us is not None else ""
        roof = (
            f"; roof {duration(a.roof_us)} -> padded {duration(a.padded_roof_us)}"
            if a.roof_us is not None and a.padded_roof_us is not None
            else ""
        )
        out.print(
            f"  {text('[dimension]')} op #{a.index} {text(a.op)} {text(str(a.dims))}: "
            f"{', '.join(a.misaligned)} not "
            f"multiples of {a.required_multiple}; pad to {text(str(a.padded_dims))} "
            f"(+{a.extra_flops_pct:.2f}% FLOPs){roof}{gain}"
        )


def print_memory(out: Console, timeline: MemoryTimeline) -> None:
    """Peak, counts and the largest blocks alive at the peak."""
    out.print(
        f"peak {timeline.peak_bytes / 2**20:,.1f} MiB at {timeline.peak_us / 1e3:,.3f} ms; "
        f"{timeline.num_allocations:,} allocations, {timeline.num_frees:,} frees"
    )
    table = Table(title="Largest blocks alive at the peak")
    for column in ("address", "MiB", "allocated at", "freed at", "lifetime"):
        table.add_column(column, justify="right")
    for block in timeline.largest_at_peak:
        table.add_row(
            hex(block.addr),
            f"{block.size_bytes / 2**20:,.2f}",
            duration(block.alloc_us),
            duration(block.free_us) if block.free_us is not None else "alive",
            duration(block.lifetime_us) if block.lifetime_us is not None else "-",
        )
    out.print(table)
