"""The serving comparison's renderer: GIVEN a hand-built result WHEN rendered THEN every load's
real and simulated numbers, the tuner's policy and the overload's answer counts are printed as
given, and the JSON document carries the errors the result defines."""

from __future__ import annotations

import io

from rich.console import Console

from aiprof.inference.metrics import MetricsRecorder
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.serving import ServedRun
from aiprof.inference.tune import TuneCandidate
from aiprof.measure.inference.comparison import (
    LoadPoint,
    ServingComparison,
    ServingCurve,
    TunerCheck,
)
from aiprof.measure.inference.engine import BatchCosts
from aiprof.report.serving_terminal import SCHEMA, bench_document, render_bench


def _metrics(latency_us: float, count: int = 10):
    recorder = MetricsRecorder()
    for _ in range(count):
        recorder.request(0.0, 0.0, 100.0, latency_us)
    recorder.batch(count, latency_us)
    return recorder.summary(1e6)


def _run(latency_us: float, *, rejected: dict[str, int] | None = None) -> ServedRun:
    return ServedRun(mode="open", num_requests=10 + sum((rejected or {}).values()), num_ok=10,
                     rejected=rejected or {}, failed={}, num_lost=0, num_duplicated=0,
                     throughput_rps=1234.0, latency_p50_us=latency_us, latency_p95_us=latency_us,
                     latency_p99_us=2 * latency_us, latency_mean_us=latency_us,
                     max_send_lag_us=5.0, server_cpu_us_per_request=30.0, wall_s=1.0,
                     server=_metrics(latency_us))


def _point(label: str, real_us: float, sim_us: float) -> LoadPoint:
    costs = BatchCosts(batch_sizes=(4,), num_batches=(3,), host_us=(10.0,), device_us=(900.0,),
                       wall_us=(950.0,))
    return LoadPoint(label=label, offered_rps=1000.0, concurrency=None, real=_run(real_us),
                     simulated=_metrics(sim_us), under_load=costs)


def _result() -> ServingComparison:
    best = TuneCandidate(max_batch_size=16, max_queue_delay_us=1000.0, preferred_batch_sizes=(),
                         max_rate_rps=3000.0, p99_at_rate_us=4000.0, meets_slo=True)
    return ServingComparison(
        device="cpu", execution="eager", capture_error="", policy=BatchPolicy(max_batch_size=4),
        num_instances=2, instance_p99_us={"1": 9000.0, "2": 8000.0},
        curve=ServingCurve(batch_sizes=(1, 4), host_us=(5.0, 10.0), device_us=(500.0, 900.0),
                           wall_us=(520.0, 950.0)),
        capacity_rps=4444.0, batch_alone_us=1000.0, overhead_us=90.0,
        open_loop=(_point("40% of capacity", 2000.0, 2200.0),), closed_loop=(),
        tuner=TunerCheck(slo_us=5000.0, rate_rps=3555.0, best=best,
                         point=_point("tuner's policy", 3000.0, 3000.0)),
        overload=_run(100.0, rejected={"queue_full": 77}), overload_rps=44440.0)


def test_render_prints_what_the_result_holds():
    out = io.StringIO()
    render_bench(_result(), Console(file=out, width=200))
    text = " ".join(out.getvalue().split())  # lines wrap where the terminal is narrow
    assert "capacity 4,444 req/s" in text and "90 us per batch" in text
    assert "1: 9.00 ms, 2: 8.00 ms" in text
    assert "40% of capacity" in text and "2.00 / 4.00" in text  # real P50 / P99 ms
    assert "+10.0%" in text  # simulated P50 2.2 ms against 2.0 ms real
    assert "max batch 16, delay 1 ms" in text and "3,555 req/s" in text
    assert "87 sent, 10 served, rejected queue_full 77" in text and "0 lost" in text


def test_json_document_has_the_schema_and_each_loads_errors():
    doc = bench_document(_result())
    assert doc["schema"] == SCHEMA
    assert set(doc["errors"]) == {"40% of capacity", "tuner's policy"}
    assert doc["errors"]["40% of capacity"]["p50_pct"] == 100 * (2200.0 - 2000.0) / 2000.0
