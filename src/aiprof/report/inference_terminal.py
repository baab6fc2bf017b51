"""Render the inference reports (padding waste, cold start, pipeline stages, INT8 sensitivity)
as rich tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from aiprof.inference.padding import PaddingReport

if TYPE_CHECKING:  # the measurements' modules run torch; their results are plain dataclasses
    from aiprof.measure.inference.coldstart import ColdStartReport, CompileReport
    from aiprof.measure.inference.cudagraph import CudaGraphReport
    from aiprof.measure.inference.quantize import QuantizationReport
    from aiprof.measure.inference.stages import StagesReport


def render_padding(console: Console, report: PaddingReport) -> None:
    table = Table(
        title=f"Padding waste ({report.num_sequences} sequences, "
        f"{report.num_tokens} tokens, {report.cost} cost)"
    )
    table.add_column("strategy")
    table.add_column("waste %", justify="right")
    table.add_column("detail")
    rows = [
        ("fixed", report.fixed_waste_pct, f"pad all to {report.max_length}"),
        ("dynamic, random batches", report.dynamic_waste_pct,
         f"pad to batch max, batch {report.batch_size} (expected)"),
        ("dynamic, length-sorted", report.sorted_waste_pct, f"batch {report.batch_size}"),
        ("optimal buckets", report.buckets.waste_pct,
         "boundaries " + ", ".join(map(str, report.buckets.boundaries))),
        ("packing (FFD)", report.packing_waste_pct,
         f"{report.packing_rows} rows of {report.max_length}"),
    ]
    for name, waste, detail in rows:
        table.add_row(name, f"{waste:.1f}", detail)
    console.print(table)


def render_coldstart(console: Console, report: ColdStartReport, graph: CudaGraphReport | None,
                     compiled: CompileReport | None) -> None:
    """The cold-start steps; the ``torch.compile`` and CUDA-graph lines when measured."""
    table = Table(title=f"Cold start on {report.device} ({report.file_bytes / 2**20:.1f} MiB)")
    table.add_column("step")
    table.add_column("ms", justify="right")
    for name, value in [("read file", report.read_us), ("deserialize", report.deserialize_us),
                        ("construct + load weights", report.construct_us),
                        ("move to device", report.to_device_us),
                        ("first inference", report.first_inference_us),
                        ("cold total", report.cold_total_us),
                        ("warm inference P50", report.warm.p50_us)]:
        table.add_row(name, f"{value / 1e3:.3f}")
    console.print(table)
    console.print(f"first inference is {report.first_over_warm:.1f}x a warm one")
    if report.cuda_init_us is not None:
        init_ms = report.cuda_init_us / 1e3
        console.print(f"CUDA context creation (before the steps): {init_ms:.1f} ms")
    if compiled is not None:
        repay = compiled.calls_to_repay
        console.print(f"torch.compile: first call {compiled.first_call_us / 1e6:.2f} s, compiled "
                      f"{compiled.compiled.p50_us / 1e3:.3f} ms against eager "
                      f"{compiled.eager.p50_us / 1e3:.3f} ms ({compiled.speedup:.2f}x); "
                      + ("never repaid" if repay is None else f"repaid after {repay:.0f} calls"))
    if graph is not None:
        console.print(f"CUDA graph: capture {graph.capture_us / 1e3:.2f} ms, eager "
                      f"{graph.eager.p50_us / 1e3:.3f} ms, replay {graph.graph.p50_us / 1e3:.3f}"
                      f" ms per step: {graph.speedup:.2f}x")


def render_stages(console: Console, report: StagesReport) -> None:
    table = Table(title=f"Inference stages, batch {report.batch_size} on {report.device} "
                        f"(decode: {report.decoder})")
    for column in ("stage", "where", "P50 ms", "P99 ms", "caps items/s"):
        table.add_column(column, justify="right" if column != "stage" else "left")
    for s in report.stages:
        table.add_row(s.name, s.where, f"{s.timing.p50_us / 1e3:.3f}",
                      f"{s.timing.p99_us / 1e3:.3f}", f"{s.cap_items_per_s:.0f}")
    console.print(table)
    console.print(f"host stages cap {report.host_cap_items_per_s:.0f} items/s, device stages "
                  f"{report.device_cap_items_per_s:.0f} items/s: {report.verdict} "
                  f"(slowest stage: {report.bottleneck})")
    if report.pinned_speedup is not None:
        speedup = report.pinned_speedup
        console.print(f"pinned host memory copies {speedup:.2f}x faster than pageable")


def render_quantization(console: Console, report: QuantizationReport) -> None:
    table = Table(title="INT8 sensitivity per layer (worst first)")
    for column in ("layer", "kind", "layer SQNR dB", "model SQNR dB", "model rel err",
                   "input range", "outlier x", "saturated %"):
        table.add_column(column, justify="left" if column in ("layer", "kind") else "right")
    for r in report.layers:
        table.add_row(r.name, r.kind, f"{r.layer_sqnr_db:.1f}", f"{r.model_sqnr_db:.1f}",
                      f"{r.model_rel_error:.4f}", f"{r.input_min:.3g}..{r.input_max:.3g}",
                      f"{r.outlier_ratio:.2f}", f"{r.saturation_pct:.3f}")
    console.print(table)
    console.print(f"all layers INT8: model SQNR {report.all_layers_model_sqnr_db:.1f} dB")
    keep = ", ".join(report.keep_high_precision) or "none"
    console.print(f"keep in higher precision (model SQNR < {report.threshold_db:g} dB): {keep}")
    if report.int8_latency_us is not None and report.fp32_latency_us is not None:
        console.print(f"CPU speed: FP32 {report.fp32_latency_us / 1e3:.3f} ms, INT8 "
                      f"{report.int8_latency_us / 1e3:.3f} ms ({report.int8_backend})")
    elif report.int8_note:
        console.print(report.int8_note)
