"""``aiprof batching bench``: the serving comparison as terminal tables and as a JSON document."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from aiprof.measure.inference.comparison import LoadPoint, ServingComparison

SCHEMA = "aiprof.batching.bench/2"


def bench_document(result: ServingComparison) -> dict[str, Any]:
    """The JSON document: the result, plus each load's simulated-minus-real errors."""
    def errors(point: LoadPoint) -> dict[str, float]:
        return {"throughput_pct": point.throughput_error_pct, "p50_pct": point.p50_error_pct,
                "p99_pct": point.p99_error_pct}

    points = [*result.open_loop, *result.closed_loop]
    if result.tuner is not None and result.tuner.point is not None:
        points.append(result.tuner.point)
    return {"schema": SCHEMA, "result": result,
            "errors": {point.label: errors(point) for point in points}}


def _stack(result: ServingComparison) -> str:
    stack = result.stack
    if stack is None:
        return ""
    return (f" and {stack.transport_under_load_us:.0f} us per request of transport, measured at "
            f"{stack.calibration_rps:,.0f} req/s (lone requests: "
            f"{stack.handoff_alone_us:.0f} and {stack.transport_alone_us:.0f} us)")


def render_bench(result: ServingComparison, console: Console | None = None) -> None:
    """Curve alone, loads real against simulated, the tuner's check and the overload run."""
    out = console or Console()
    out.print(_curve_table(result))
    out.print(f"capacity {result.capacity_rps:,.0f} req/s (max batch "
              f"{result.policy.max_batch_size} / its device time); {result.execution} on "
              f"{result.device}, {result.num_instances} instance(s) on one device queue, "
              f"preferred sizes {','.join(map(str, result.policy.preferred_batch_sizes)) or '-'} "
              f"(simulated P99 at the highest load by "
              + (f"instances x preferred sizes: {_by_count(result.setting_p99_us)}"
                 if result.setting_p99_us else
                 f"instance count: {_by_count(result.instance_p99_us)}")
              + "); serving overhead "
              f"{result.overhead_us:.0f} us per batch" + _stack(result))
    if result.capture_error:
        out.print(f"CUDA graph capture failed, eager instead: {result.capture_error}")
    out.print(_loads_table(result))
    tuner = result.tuner
    if tuner is not None:
        if tuner.best is None or tuner.point is None:
            out.print(f"tuner: no policy meets P99 <= {tuner.slo_us / 1e3:.2f} ms at "
                      f"{tuner.rate_rps:,.0f} req/s")
        else:
            best, real = tuner.best, tuner.point.real
            out.print(f"tuner (P99 <= {tuner.slo_us / 1e3:.2f} ms at {tuner.rate_rps:,.0f} "
                      f"req/s): max batch {best.max_batch_size}, delay "
                      f"{best.max_queue_delay_us / 1e3:g} ms, preferred "
                      f"{list(best.preferred_batch_sizes) or '-'}, simulated P99 "
                      f"{(best.p99_at_rate_us or 0) / 1e3:.2f} ms; real run: "
                      f"{real.throughput_rps:,.0f} req/s, P99 {real.latency_p99_us / 1e3:.2f} ms")
    run = result.overload
    if run is not None:
        out.print(f"overload at {result.overload_rps:,.0f} req/s: {run.num_requests} sent, "
                  f"{run.num_ok} served, rejected {_reasons(run.rejected)}, failed "
                  f"{_reasons(run.failed)}, {run.num_lost} lost, {run.num_duplicated} answered "
                  "twice")


def _by_count(p99_us: dict[str, float]) -> str:
    return ", ".join(f"{count}: {value / 1e3:.2f} ms" for count, value in p99_us.items())


def _reasons(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.items()) or "0"


def _curve_table(result: ServingComparison) -> Table:
    curve = result.curve
    table = Table(title="A batch alone (medians): assembly on the host, copies + forward on the "
                        "device, the whole call")
    for column in ("batch", "host ms", "device ms", "call ms", "items/s on the device"):
        table.add_column(column, justify="right")
    for size, host, device, wall in zip(curve.batch_sizes, curve.host_us, curve.device_us,
                                        curve.wall_us, strict=True):
        table.add_row(str(size), f"{host / 1e3:.3f}", f"{device / 1e3:.3f}", f"{wall / 1e3:.3f}",
                      f"{size / device * 1e6:,.0f}")
    return table


def _loads_table(result: ServingComparison) -> Table:
    table = Table(title="Real batcher (load from another process) against the simulator")
    for column in ("load", "real req/s", "sim req/s", "real P50 / P99 ms", "sim P50 / P99 ms",
                   "P50 / P99 error", "mean batch real / sim", "batch ms real / sim"):
        table.add_column(column, justify="right")
    points = [*result.open_loop, *result.closed_loop]
    if result.tuner is not None and result.tuner.point is not None:
        points.append(result.tuner.point)
    for p in points:
        real, sim = p.real, p.simulated
        table.add_row(
            p.label, f"{real.throughput_rps:,.0f}", f"{sim.throughput_rps:,.0f}",
            f"{real.latency_p50_us / 1e3:.2f} / {real.latency_p99_us / 1e3:.2f}",
            f"{sim.latency_p50_us / 1e3:.2f} / {sim.latency_p99_us / 1e3:.2f}",
            f"{p.p50_error_pct:+.1f}% / {p.p99_error_pct:+.1f}%",
            f"{real.server.mean_batch_size:.1f} / {sim.mean_batch_size:.1f}",
            f"{real.server.compute_mean_us / 1e3:.2f} / {sim.compute_mean_us / 1e3:.2f}")
    return table


def assembly_line(used: str, asked: str, costs: dict[str, Any]) -> str:
    """``assembly: direct (auto: P99 under load per batch of 32: direct 0.3 ms, take 8.2 ms)``."""
    if asked != "auto":
        return f"assembly: {used}"
    timed = {way: c["loaded"] for way, c in costs.items() if "loaded" in c}
    if not timed:
        return f"assembly: {used} (auto: no way could be timed)"
    size = max(next(iter(timed.values())))
    cells = ", ".join(f"{way} {by_size[size]['p99_us'] / 1e3:.2f} ms"
                      for way, by_size in sorted(timed.items(),
                                                 key=lambda kv: kv[1][size]["p99_us"]))
    return f"assembly: {used} (auto: P99 under load per batch of {size}: {cells})"
