"""Serving on one GPU (issue 20): the real batcher, fed by a load generator in its own process,
against the GPU's capacity and against the simulator.

For torchvision ResNet-50 and transformers BERT-base (built from their configs, random weights, no
download; BERT at 128 tokens), each in FP32 and BF16: the serving curve alone (assembly on the
host, copies + forward on the device, CUDA graphs per batch-size bucket), capacity, the real
batcher open-loop at 40% and 80% of capacity and closed-loop at 1-64 clients with the simulator
beside each, the batches' costs under load, the SLO tuner's policy checked by a real run, a 10x
overload, the bare eager forward curve for reference, and the serving process's CPU per request at
5,000 req/s with a model that costs nothing (the serving path, a leader thread that reads and runs
short batches itself, and the two paths before it as baselines, in turn), and what assembling a
batch of the model's inputs costs the host each way, alone and under load
(``benchmarks/host_assembly.py``; the loads are served with the engine's way of the lowest P99
under load there, or with ``--assembly``). The loads are served with the preferred batch sizes
and instance count the simulator chose from the curve (``BenchConfig.choose_preferred``). One
JSON under $OUT/serving/ (and a log); every model and precision catches its own errors, and no
new one starts past --budget-s.

    OUT=/some/dir PYTHONPATH=src python3 scripts/h200/serving_bench.py [--budget-s 330]
        [--assembly auto|take|gather|direct]
    OUT=smoke-out PYTHONPATH=src python3 scripts/h200/serving_bench.py --smoke   # tiny, any device
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from aiprof.measure.inference.assembly import ASSEMBLIES
from aiprof.measure.inference.bench import measure_curve
from aiprof.measure.inference.comparison import BenchConfig, ServingComparison, run_comparison
from aiprof.measure.inference.engine import ServingEngine, registered_inputs

BERT_SEQ = 128
SLOTS = 64
RUNS = (("resnet50", "float32"), ("resnet50", "bfloat16"), ("bert-base", "float32"),
        ("bert-base", "bfloat16"))
SMOKE_RUNS = (("resnet50", "float32"), ("bert-base", "bfloat16"))
FULL = BenchConfig(batch_sizes=(1, 2, 4, 8, 16, 32), max_batch=32, max_delay_us=2000.0,
                   duration_s=3.0, closed_duration_s=0.6, min_requests=300, max_requests=40_000,
                   tune_requests=1000, iters=20, calibration_requests=200)
SMOKE = BenchConfig(batch_sizes=(1, 4), max_batch=4, max_delay_us=1000.0, concurrencies=(1, 4),
                    duration_s=0.1, closed_duration_s=0.1, min_requests=40, max_requests=600,
                    tune_requests=100, iters=3, warmup=1, calibration_requests=20,
                    calibration_duration_s=0.1, overload_factor=10.0)


class BertEncoder(torch.nn.Module):
    """BERT-base (transformers BertModel from BertConfig()) returning the last hidden state."""

    def __init__(self, attention: str | None = None) -> None:
        super().__init__()
        from transformers import BertConfig, BertModel

        config = BertConfig()
        if attention is not None:  # "eager": capturable where SDPA's mask check is not
            config._attn_implementation = attention
        self.bert = BertModel(config)

    def forward(self, input_ids: Any) -> Any:
        return self.bert(input_ids=input_ids).last_hidden_state


def build(name: str, smoke: bool, attention: str | None = None) -> tuple[Any, Any]:
    """(model, make_input) of a model of the run, tiny in smoke mode."""
    torch.manual_seed(0)
    if name == "resnet50":
        if smoke:
            from aiprof.measure.inference.demo_models import small_cnn

            return small_cnn(10), lambda b: torch.randn(b, 3, 32, 32)
        import torchvision

        return torchvision.models.resnet50(weights=None), lambda b: torch.randn(b, 3, 224, 224)
    if smoke:
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        return (torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False),
                lambda b: torch.randn(b, 16, 32))
    return BertEncoder(attention), lambda b: torch.randint(0, 30522, (b, BERT_SEQ))


def plain(obj: Any) -> Any:
    """JSON-ready: dataclasses as dicts, NaN and infinities as null."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "item") and callable(obj.item):  # numpy and torch scalars
        return plain(obj.item())
    return obj


def acceptance(result: ServingComparison) -> dict[str, Any]:
    """The issue's acceptance numbers for one model and precision (the CPU test recomputes)."""
    by_label = {p.label: p for p in result.open_loop}
    high, low = by_label.get("80% of capacity"), by_label.get("40% of capacity")
    batch_us = result.curve.wall_us[-1]
    bound_us = 2 * batch_us + result.policy.max_queue_delay_us
    out: dict[str, Any] = {"capacity_rps": result.capacity_rps, "batch_latency_us": batch_us,
                           "p99_bound_us": bound_us}
    for name, point in (("40", low), ("80", high)):
        if point is not None:
            out[f"real_rps_{name}"] = point.real.throughput_rps
            out[f"p50_error_pct_{name}"] = point.p50_error_pct
            out[f"p99_error_pct_{name}"] = point.p99_error_pct
            out[f"real_p99_us_{name}"] = point.real.latency_p99_us
    if high is not None:
        out["served_share_of_capacity"] = high.real.throughput_rps / result.capacity_rps
    if result.overload is not None:
        run = result.overload
        out["overload_every_request_answered_once"] = (run.num_lost == 0
                                                       and run.num_duplicated == 0)
    return out


def tail_evidence(run: Any) -> dict[str, Any]:
    """What tells a stall's cause apart, for one served run (a ServedRun): the client's own
    lateness, how the tail is spread in time, the collector's and the loop's longest stops, and
    where the serving process's CPU went."""
    probes = run.probes
    assert probes is not None  # serve() always probes
    series = probes.series
    return {"p50_us": run.latency_p50_us, "p99_us": run.latency_p99_us,
            "max_send_lag_us": run.max_send_lag_us,
            "tail_client_late_share": series.tail_client_late_share,
            "tail_bins": series.tail_bins, "tail_due_ms": [series.tail_first_due_ms,
                                                           series.tail_last_due_ms],
            "worst": [series.worst_latency_us, series.worst_due_ms, series.worst_send_lag_us],
            "first_window_p99_us": series.first_window_p99_us, "rest_p99_us": series.rest_p99_us,
            "gc_collections": probes.gc.num_collections, "gc_max_pause_us": probes.gc.max_pause_us,
            "gc_frozen_objects": probes.gc.frozen_objects,
            "loop_max_iteration_us": probes.loop.max_iteration_us,
            "loop_max_iteration_at_ms": probes.loop_max_iteration_at_ms,
            "cpu_us_per_request": probes.cpu_us_per_request}


def evidence(result: ServingComparison) -> dict[str, Any]:
    """:func:`tail_evidence` of every open-loop run, the engine's waits under load, and the
    serving stack's costs the simulator was given."""
    out: dict[str, Any] = {"stack": result.stack}
    for point in result.open_loop:
        costs = point.under_load
        out[point.label] = {**tail_evidence(point.real),
                            "engine": {"batch_sizes": costs.batch_sizes,
                                       "lock_wait_us": costs.lock_wait_us,
                                       "sync_wait_us": costs.sync_wait_us,
                                       "wake_us": costs.wake_us,
                                       "num_clear_batches": costs.num_clear_batches,
                                       "mean_wall_us": costs.mean_wall_us,
                                       "median_wall_us": costs.median_wall_us,
                                       "wall_p90_us": costs.wall_p90_us,
                                       "device_p90_us": costs.device_p90_us,
                                       "outside_device_us": costs.outside_device_us,
                                       "batcher_compute_mean_us":
                                           point.real.server.compute_mean_us,
                                       "batcher_compute_p50_us":
                                           point.real.server.compute_p50_us}}
    return out


def device_alone_errors(point: Any) -> dict[str, float]:
    """The simulator's P50 and P99 errors (%) with the device curve alone, and with every batch
    at its size's median (no spread), beside those of the simulation compared (empty when the
    point has no such simulation)."""
    real, out = point.real, {}
    for name, beside in (("device_alone", point.simulated_device_alone),
                         ("medians", point.simulated_medians),
                         ("no_gap", point.simulated_no_gap),
                         ("no_wake", point.simulated_no_wake)):
        if beside is not None:
            out.update({f"{q}_pct_{name}": 100 * (getattr(beside, f"latency_{q}_us")
                                                  - getattr(real, f"latency_{q}_us"))
                        / getattr(real, f"latency_{q}_us") for q in ("p50", "p99")})
    return out


def assembly_costs(inputs: Any, smoke: bool, device: str) -> dict[str, Any]:
    """benchmarks/host_assembly.py on this model's inputs: every way of assembling a batch,
    alone and under load (the engine serves with one of them, ``--assembly``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from host_assembly import run as assembly_run

    sizes = (1, 4) if smoke else (1, 8, 32)
    return plain(assembly_run(tuple(inputs.shape[1:]), inputs.dtype, sizes, 10 if smoke else 60,
                              500.0, device))


def choose_assembly(costs: dict[str, Any], asked: str) -> str:
    """``asked``, or for ``auto`` the engine's way (gather, take, direct) whose P99 under load,
    summed over the batch sizes timed, is the lowest (``take`` when none was timed)."""
    if asked != "auto":
        return asked
    timed = {way: sum(r["p99_us"] for r in costs[way]["loaded"].values())
             for way in ASSEMBLIES if "loaded" in costs.get(way, {})}
    return min(timed, key=lambda way: timed[way]) if timed else "take"


def one_run(name: str, dtype_name: str, smoke: bool, device: str, stop_at: float,
            log: Any, instances: int = 2, assembly: str = "auto") -> dict[str, Any]:
    """Everything for one model in one precision."""
    config = SMOKE if smoke else FULL
    dtype = getattr(torch, dtype_name)
    model, make_input = build(name, smoke)
    model = model.to(dtype)
    inputs = registered_inputs(make_input, SLOTS, dtype)
    forward = measure_curve(model, lambda b: inputs[:b], config.batch_sizes, device=device,
                            warmup=config.warmup, iters=config.iters)
    try:
        assembled: dict[str, Any] = assembly_costs(inputs, smoke, device)
    except Exception as error:  # the comparison still runs
        assembled = {"error": f"{type(error).__name__}: {error}"[:300]}
    log(f"{name} {dtype_name} assembly: {json.dumps(assembled)}")
    assembly = choose_assembly(assembled, assembly)
    engine = ServingEngine(model, inputs, device=device, max_batch=config.max_batch,
                           num_buffers=instances, assembly=assembly)
    retried = ""
    if engine.capture_error and name == "bert-base" and not smoke:
        retried = engine.capture_error  # SDPA not capturable here: eager attention is
        del engine
        model = build(name, smoke, "eager")[0].to(dtype)
        engine = ServingEngine(model, inputs, device=device, max_batch=config.max_batch,
                               num_buffers=instances, assembly=assembly)
    log(f"{name} {dtype_name}: {engine.execution} {engine.capture_error}, assembly "
        f"{engine.assembly}")
    result = run_comparison(engine, config, lambda line: log(f"  {line[:240]}"), stop_at)
    accept = acceptance(result)
    log(f"{name} {dtype_name}: {json.dumps(plain(accept))}")
    found = plain(evidence(result))
    log(f"{name} {dtype_name} evidence: {json.dumps(found)}")
    out = {"model": name, "dtype": dtype_name, "forward_curve": plain(forward),
           "evidence": found, "assembly": engine.assembly, "assembly_costs": assembled,
           "sdpa_capture_error": retried, "comparison": plain(result),
           "errors": {p.label: {"throughput_pct": p.throughput_error_pct,
                                "p50_pct": p.p50_error_pct, "p99_pct": p.p99_error_pct,
                                **device_alone_errors(p)}
                      for p in (*result.open_loop, *result.closed_loop,
                                *((result.tuner.point,) if result.tuner and result.tuner.point
                                  else ()))},
           "acceptance": plain(accept)}
    del engine, model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return plain(out)


def _zero_cost(batch: list[Any]) -> list[int]:
    return [rid for rid, _slot in batch]


OVERHEAD_PATHS = ("leader", "group", "per request")
"""The request paths timed: the serving path (a leader thread reads and runs short batches),
the loop reading with fresh dispatch (the path of the runs before 2026-12-02 04:00 UTC, its
baseline) and one future per request (the path before request groups)."""


def serving_overhead(smoke: bool) -> dict[str, Any]:
    """The serving process's CPU per request at 5,000 req/s with a model that costs nothing
    (benchmarks/serving_overhead.py's measurement, on this machine's host CPU): the paths of
    :data:`OVERHEAD_PATHS` in turn on the same arrivals, three times each, the batcher's CPU per
    lone request with and without fresh dispatch (in one process, every batch one request) and
    its Python alone (no thread wake-up), and (not in smoke mode) the two floors of the
    benchmark: a socket echo on the loop, and one through a thread. The top-level fields are
    the serving path's median run."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from serving_overhead import (  # the baselines live there
        FLOORS,
        PATHS,
        lone_requests,
        python_only,
    )

    from aiprof.inference.arrivals import poisson_arrivals
    from aiprof.inference.policy import BatchPolicy
    from aiprof.inference.serving import OpenLoad, serve

    count, repeats = (1000, 1) if smoke else (10_000, 3)
    paths = {**{path: PATHS[path] for path in OVERHEAD_PATHS}, **({} if smoke else FLOORS)}
    runs: dict[str, list[dict[str, Any]]] = {path: [] for path in paths}
    for seed in range(repeats):
        load = OpenLoad(arrivals_us=tuple(poisson_arrivals(5000.0, count, seed=seed).tolist()))
        for path, options in paths.items():
            run = serve(_zero_cost, BatchPolicy(max_batch_size=32), load, num_slots=1,
                        **options)
            runs[path].append({
                "seed": seed, "server_cpu_us_per_request": run.server_cpu_us_per_request,
                "throughput_rps": run.throughput_rps, "latency_p50_us": run.latency_p50_us,
                "latency_p99_us": run.latency_p99_us, "num_lost": run.num_lost,
                "num_duplicated": run.num_duplicated,
                "mean_batch_size": run.server.mean_batch_size,
                "loop_iterations_per_request": (run.probes.loop.num_iterations / count
                                                if run.probes else None),
                "evidence": plain(tail_evidence(run))})
    lone: dict[str, list[dict[str, float]]] = {"fresh": [], "queued": []}
    python_us: list[float] = []
    for _ in range(repeats):  # the batcher's own part, every batch one request, in turn
        for kind in lone:
            lone[kind].append(lone_requests(200 if smoke else 3000, fresh=kind == "fresh"))
        python_us.append(python_only(2000 if smoke else 30_000))
    serving = sorted(runs["leader"], key=lambda r: r["server_cpu_us_per_request"])
    median = serving[len(serving) // 2]
    ratios = {baseline: [old["server_cpu_us_per_request"] / new["server_cpu_us_per_request"]
                         for new, old in zip(runs["leader"], runs[baseline], strict=True)]
              for baseline in OVERHEAD_PATHS[1:]}
    return {"rate_rps": 5000.0, "num_requests": count, **median, "paths": runs,
            "group_over_leader": ratios["group"],
            "per_request_over_leader": ratios["per request"], "lone_requests": lone,
            "python_only_us_per_request": python_us}


def machine(device: str) -> dict[str, Any]:
    """What ran it."""
    info: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                            "python": platform.python_version(), "cpus": os.cpu_count(),
                            "date": datetime.datetime.now(datetime.UTC).isoformat(),
                            "device": "cpu"}
    if device.startswith("cuda"):
        info["device"] = torch.cuda.get_device_name(device)
        try:
            info["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError) as error:
            info["driver"] = f"unknown ({type(error).__name__})"
    return info


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny models, short runs")
    parser.add_argument("--device", default=None)
    parser.add_argument("--budget-s", type=float, default=330.0,
                        help="no model starts past this many seconds; a started one stops its "
                             "remaining closed-loop, tuner and overload parts")
    parser.add_argument("--out", default=os.environ.get("OUT"), help="default: $OUT")
    parser.add_argument("--instances", type=int, default=2,
                        help="model instances (buffer sets) on the one CUDA stream")
    parser.add_argument("--assembly", default="auto", choices=("auto", *ASSEMBLIES),
                        help="how the engine assembles a batch (auto: the way of the lowest "
                             "P99 under load in this run's timing; gather: the path before "
                             "2026-12-02)")
    args = parser.parse_args()
    if not args.out:
        print("serving_bench: set $OUT or give --out", file=sys.stderr)
        return 2
    begin = time.monotonic()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    folder = Path(args.out) / "serving"
    folder.mkdir(parents=True, exist_ok=True)
    log_file = (folder / "log.txt").open("w")

    def log(line: str) -> None:
        stamped = f"[{time.monotonic() - begin:7.1f} s] {line}"
        print(stamped, flush=True)
        log_file.write(stamped + "\n")
        log_file.flush()

    doc: dict[str, Any] = {"schema": "aiprof.serving_bench/1", "smoke": args.smoke,
                           "machine": machine(device), "budget_s": args.budget_s,
                           "instances": args.instances, "assembly": args.assembly, "runs": [],
                           "status": {}}
    stop_at = begin + args.budget_s
    try:
        doc["serving_overhead"] = serving_overhead(args.smoke)
        doc["status"]["serving overhead"] = {"ok": True}
        log(f"serving overhead: {doc['serving_overhead']}")
    except Exception as error:  # the models still run
        doc["status"]["serving overhead"] = {"ok": False, "error": f"{type(error).__name__}: "
                                             f"{error}"}
    for name, dtype_name in SMOKE_RUNS if args.smoke else RUNS:
        key = f"{name} {dtype_name}"
        if time.monotonic() >= stop_at:
            doc["status"][key] = {"ok": False, "error": "skipped: past the budget"}
            continue
        started = time.monotonic()
        try:
            doc["runs"].append(one_run(name, dtype_name, args.smoke, device, stop_at, log,
                                       args.instances, args.assembly))
            doc["status"][key] = {"ok": True, "seconds": time.monotonic() - started}
        except Exception as error:  # one model failing must not lose the others
            doc["status"][key] = {"ok": False, "error": f"{type(error).__name__}: {error}",
                                  "trace": traceback.format_exc(limit=5)}
            log(f"{key} failed: {error}")
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
    doc["total_s"] = time.monotonic() - begin
    (folder / "serving_bench.json").write_text(json.dumps(plain(doc), indent=1, sort_keys=True))
    log(f"wrote {folder / 'serving_bench.json'} in {doc['total_s']:.1f} s")
    log_file.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
