"""Terminal tables for the distributed-training commands. They only render."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from aiprof.distributed.sizes import format_bytes

if TYPE_CHECKING:
    from aiprof.distributed.analysis import CollectiveCall, DistributedReport
    from aiprof.distributed.bubble import BubbleResult
    from aiprof.distributed.collectives import CollectiveCost
    from aiprof.distributed.compression import CompressionTradeoff
    from aiprof.distributed.fit import AlphaBetaFit
    from aiprof.distributed.partition import Partition
    from aiprof.distributed.scaling import ScalingReport
    from aiprof.distributed.tensor_parallel import TensorParallelVolume
    from aiprof.measure.distributed.bench import BenchResult


def _print(table: Table) -> None:
    Console(soft_wrap=True).print(table)


def _table(title: str, columns: Sequence[str], left: Sequence[str] = ()) -> Table:
    """A table whose columns are right-aligned except those named in ``left``."""
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="left" if column in left else "right")
    return table


def _ms(value_us: float) -> str:
    return f"{value_us / 1000:,.2f}"


def render_comm_model(cost: CollectiveCost) -> None:
    """One row per algorithm; the chosen one is marked."""
    link = cost.link
    title = (f"{cost.collective} of {format_bytes(cost.num_bytes)} over {cost.num_ranks} ranks, "
             f"link {link.name} (α {link.alpha_us:g} µs, {link.bandwidth_gbps:g} GB/s)")
    table = _table(title, ("algorithm", "time (µs)", "algbw (GB/s)", "busbw (GB/s)", ""),
                   left=("algorithm",))
    for name, row in cost.per_algorithm.items():
        table.add_row(name, f"{row.time_us:,.1f}", f"{row.algbw_gbps:,.2f}",
                      f"{row.busbw_gbps:,.2f}", "← cheapest" if name == cost.algorithm else "")
    _print(table)


def render_comm_sweep(costs: list[CollectiveCost]) -> None:
    """One row per size: each algorithm's time and the cheapest."""
    first = costs[0]
    names = list(first.per_algorithm)
    title = (f"{first.collective} over {first.num_ranks} ranks, link {first.link.name} "
             f"(α {first.link.alpha_us:g} µs, {first.link.bandwidth_gbps:g} GB/s): time (µs)")
    table = _table(title, ("size", *names, "cheapest", "busbw (GB/s)"), left=("cheapest",))
    for c in costs:
        times = (f"{c.per_algorithm[n].time_us:,.1f}" for n in names)
        table.add_row(format_bytes(c.num_bytes), *times, c.algorithm, f"{c.busbw_gbps:,.2f}")
    _print(table)


def render_comm_bench(result: BenchResult) -> None:
    """nccl-tests-like columns, then the α/β fits."""
    table = _table(f"comm bench: {result.backend} on {result.device}, {result.num_ranks} ranks",
                   ("collective", "size", "time (µs)", "algbw (GB/s)", "busbw (GB/s)"),
                   left=("collective",))
    for p in result.points:
        table.add_row(p.collective, format_bytes(p.num_bytes), f"{p.time_us:,.1f}",
                      f"{p.algbw_gbps:.3f}", f"{p.busbw_gbps:.3f}")
    _print(table)
    _render_fits("α/β fit (ring model, relative least squares)", result.fits)
    _render_fits("one line per protocol regime (time = cheapest line)", result.protocol_fits)
    for note in result.notes:
        Console(stderr=True).print(f"note: {note}")


def _render_fits(title: str, rows: Sequence[AlphaBetaFit]) -> None:
    fits = _table(title, ("collective", "sizes", "α (µs)", "smallest measured (µs)",
                          "bandwidth (GB/s)", "max error (%)"), left=("collective",))
    for f in rows:
        sizes = f"{format_bytes(f.fit_min_bytes)}..{format_bytes(f.fit_max_bytes)}"
        alpha = "0 (held)" if f.alpha_clamped else f"{f.alpha_us:.2f}"
        fits.add_row(f.collective, sizes, alpha, f"{f.floor_us:,.1f}", f"{f.bandwidth_gbps:.3f}",
                     f"{f.max_rel_error_pct:.1f}")
    _print(fits)
    for f in rows:
        if f.alpha_clamped:
            Console(stderr=True).print(
                f"note: {f.collective} {format_bytes(f.fit_min_bytes)}..."
                f"{format_bytes(f.fit_max_bytes)}: the least-squares latency came out negative "
                f"and was held at 0, so α is not measured by this line; its smallest message "
                f"took {f.floor_us:,.1f} µs (the protocol lines fit the small sizes apart)")


def simple_table(title: str, rows: list[tuple[str, str]]) -> None:
    """A two-column key/value table."""
    table = Table(title=title, show_header=False)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    for key, value in rows:
        table.add_row(key, value)
    _print(table)


def render_pipeline(bubbles: list[BubbleResult], split: Partition | None) -> None:
    """Bubble per schedule, then the stage split if one was asked for."""
    table = _table("pipeline bubble", ("schedule", "p", "m", "v", "bubble/ideal", "bubble/total",
                                       "p/m estimate", "stage-0 activations (× 1 model·µbatch)",
                                       "step (µs)"), left=("schedule",))
    for b in bubbles:
        table.add_row(b.schedule, str(b.num_stages), str(b.num_microbatches), str(b.num_chunks),
                      f"{b.bubble_over_ideal:.3f}", f"{b.bubble_over_total:.3f}",
                      f"{b.textbook_ratio:.3f}", f"{b.activation_factor_stage0:.2f}",
                      f"{b.step_time_us:,.0f}" if b.step_time_us > 0 else "-")
    _print(table)
    if split is None:
        return
    stages = _table(f"optimal split (balance {split.balance_pct:.1f}%)",
                    ("stage", "layers", "time (µs)", "memory (GB)"))
    rows = zip(split.layers_per_stage, split.stage_time_us, split.stage_memory_bytes, strict=True)
    for i, (n, t, mem) in enumerate(rows):
        stages.add_row(str(i), str(n), f"{t:,.1f}", f"{mem / 1e9:.2f}")
    _print(stages)


def render_tp_volume(v: TensorParallelVolume) -> None:
    """Tensor-parallel bytes and time per layer and per step."""
    simple_table(f"tensor parallel t = {v.tensor_parallel}", [
        ("one all-reduce", format_bytes(v.allreduce_bytes)),
        ("all-reduces per layer", str(v.num_allreduces_per_layer)),
        ("sent per rank per layer", format_bytes(v.bytes_sent_per_rank_per_layer)),
        ("sent per rank per step", format_bytes(v.bytes_sent_per_rank_per_step)),
        ("all-reduce time per layer (ms)", _ms(v.comm_time_per_layer_us)),
        ("all-reduce time per step (ms)", _ms(v.comm_time_per_step_us)),
    ])


def render_compression(rows: Sequence[CompressionTradeoff], bandwidth_gbps: float | None) -> None:
    """One row per method; whether it pays at the given bandwidth."""
    columns = ["method", "bytes/step", "ratio", "all-reduces", "added compute (µs)",
               "break-even busbw (GB/s)"]
    if bandwidth_gbps is not None:
        columns.append(f"pays at {bandwidth_gbps:g} GB/s")
    table = _table("gradient compression trade-offs", columns, left=("method",))
    for r in rows:
        cells = [r.method, format_bytes(r.bytes_per_step), f"{r.compression_ratio:.1f}",
                 str(r.num_allreduces_per_bucket), f"{r.added_compute_us:,.1f}",
                 f"{r.breakeven_gbps:,.1f}"]
        if bandwidth_gbps is not None:
            cells.append("yes" if bandwidth_gbps < r.breakeven_gbps else "no")
        table.add_row(*cells)
    _print(table)


def render_distributed(report: DistributedReport, show_steps: bool = False) -> None:
    """Ranks, collectives, stragglers and notes of a DistributedReport."""
    head = (f"{report.num_ranks} of {report.world_size} ranks, {report.backend}, collectives from "
            f"{report.collective_source}; compute imbalance {report.compute_imbalance_pct:.1f}%")
    ranks = _table(head, ("rank", "steps", "step (ms)", "compute (ms)", "comm (ms)", "overlap (%)",
                          "exposed comm (ms)", "waiting (ms)", "others wait for it (ms)"))
    for r in report.ranks:
        ranks.add_row(str(r.rank), str(r.num_steps), _ms(r.step_time_us),
                      _ms(r.compute_us_per_step), _ms(r.comm_us_per_step), f"{r.overlap_pct:.1f}",
                      _ms(r.exposed_comm_us_per_step), _ms(r.wait_us_per_step),
                      _ms(r.caused_wait_us_per_step))
    _print(ranks)
    table = _table("collectives", ("rank", "collective", "calls", "bytes", "time (ms)", "mean (µs)",
                                   "busbw (GB/s)", "algorithm"), left=("collective", "algorithm"))
    for c in report.collectives:
        table.add_row(str(c.rank), c.collective, str(c.num_calls), format_bytes(c.total_bytes),
                      _ms(c.total_time_us), f"{c.mean_time_us:,.1f}", f"{c.busbw_gbps:.2f}",
                      ", ".join(c.algorithms))
    _print(table)
    if show_steps:
        _render_steps(report)
    if report.calls:
        _render_calls(report.calls)
    _render_findings(report)


def _render_calls(calls: list[CollectiveCall]) -> None:
    table = _table("collective calls", ("rank", "collective", "start (ms)", "time (µs)", "size",
                                        "busbw (GB/s)", "algorithm"),
                   left=("collective", "algorithm"))
    for c in calls:
        size = format_bytes(c.num_bytes) if c.num_bytes >= 0 else "?"
        table.add_row(str(c.rank), c.collective, _ms(c.ts_us), f"{c.dur_us:,.1f}", size,
                      f"{c.busbw_gbps:.2f}", c.algorithm)
    _print(table)


def _render_findings(report: DistributedReport) -> None:
    console = Console(soft_wrap=True)
    for s in report.stragglers:
        console.print(f"straggler: rank {s.rank} ({s.reason}): the others wait "
                      f"{_ms(s.others_wait_us_per_step)} ms per step "
                      f"({s.others_wait_pct_of_step:.1f}% of the step); it arrives last in "
                      f"{s.last_arrival_share_pct:.0f}% of collectives")
    if not report.stragglers and report.num_ranks > 1:
        console.print("no straggler: no rank makes the others wait")
    for note in report.notes:
        console.print(f"note: {note}")


def _render_steps(report: DistributedReport) -> None:
    table = _table("steps", ("rank", "step", "time (ms)", "compute (ms)", "comm (ms)",
                             "exposed comm (ms)"))
    for r in report.ranks:
        for s in r.steps:
            table.add_row(str(r.rank), str(s.step), _ms(s.step_time_us), _ms(s.compute_us),
                          _ms(s.comm_us), _ms(s.exposed_comm_us))
    _print(table)


def render_scaling(report: ScalingReport) -> None:
    """One row per rank count."""
    i = report.inputs
    title = (f"DDP scaling: base step {_ms(i.base_step_us)} ms, backward {_ms(i.backward_us)} ms, "
             f"{format_bytes(i.grad_bytes)} of gradients ({i.grad_bytes_source}), "
             f"link {report.link.name}")
    table = _table(title, ("ranks", "all-reduce (ms)", "exposed (ms)", "step (ms)",
                           "efficiency (%)", "speed-up"))
    for p in report.points:
        table.add_row(str(p.num_ranks), _ms(p.comm_us), _ms(p.exposed_comm_us),
                      _ms(p.step_time_us), f"{p.efficiency_pct:.1f}", f"{p.speedup:.2f}")
    _print(table)
    console = Console()
    if i.measured_ranks >= 2:
        console.print(f"check: the trace measured {_ms(i.measured_allreduce_us)} ms of all-reduce "
                      f"per step at {i.measured_ranks} ranks; the model gives "
                      f"{_ms(report.model_at_measured_us)} ms there")
    for assumption in report.assumptions:
        console.print(f"assumed: {assumption}")
