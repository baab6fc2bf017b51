"""The H200 serving script in --smoke mode on this machine: tiny models, real processes, the same
code paths and the same JSON as on the GPU (scripts/h200/serving_bench.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu_hog

ROOT = Path(__file__).resolve().parents[2]


def test_smoke_run_writes_one_json_with_every_part(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, str(ROOT / "scripts/h200/serving_bench.py"), "--smoke",
                           "--device", "cpu"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "serving").iterdir()) == ["log.txt",
                                                                        "serving_bench.json"]
    doc = json.loads((tmp_path / "serving" / "serving_bench.json").read_text())
    assert doc["schema"] == "aiprof.serving_bench/1" and doc["smoke"] is True
    assert {"torch", "python", "date", "device"} <= set(doc["machine"])
    assert doc["serving_overhead"]["num_lost"] == 0
    assert doc["serving_overhead"]["server_cpu_us_per_request"] > 0
    paths = doc["serving_overhead"]["paths"]  # the serving path and the two before it
    assert sorted(paths) == ["group", "leader", "per request"]
    assert len(paths["leader"]) == 1
    assert all(r["num_lost"] == r["num_duplicated"] == 0 for rs in paths.values() for r in rs)
    assert doc["serving_overhead"]["group_over_leader"][0] > 0
    assert doc["serving_overhead"]["per_request_over_leader"][0] > 0
    lone = doc["serving_overhead"]["lone_requests"]  # the batcher's part, batches of one
    assert sorted(lone) == ["fresh", "queued"] and all(
        r["model_threads_cpu_us_per_request"] > 0 and r["mean_batch_size"] < 1.5
        for rs in lone.values() for r in rs)
    assert [us > 0 for us in doc["serving_overhead"]["python_only_us_per_request"]] == [True]
    found = doc["serving_overhead"]["evidence"]  # what tells a stall's cause apart
    parts = found["cpu_us_per_request"]
    assert parts["loop"] > 0 and parts["model threads"] > 0
    assert parts["loop"] + parts["model threads"] + parts["other"] == pytest.approx(
        parts["process"], rel=0.01)
    assert found["gc_frozen_objects"] > 0 and found["loop_max_iteration_us"] > 0
    assert all(s["ok"] for s in doc["status"].values()), doc["status"]
    assert [(r["model"], r["dtype"]) for r in doc["runs"]] == [("resnet50", "float32"),
                                                               ("bert-base", "bfloat16")]
    for run in doc["runs"]:
        result = run["comparison"]
        curve = result["curve"]
        assert result["capacity_rps"] == curve["batch_sizes"][-1] / curve["device_us"][-1] * 1e6
        assert [p["label"] for p in result["open_loop"]] == ["40% of capacity",
                                                             "80% of capacity"]
        assert [p["concurrency"] for p in result["closed_loop"]] == [1, 4]
        for point in result["open_loop"] + result["closed_loop"]:
            real = point["real"]
            assert real["num_ok"] == real["num_requests"] > 0  # unbounded queue: all served
            assert real["num_lost"] == real["num_duplicated"] == 0
            assert point["under_load"]["batch_sizes"]  # the engine's costs under this load
        overload = result["overload"]
        assert overload["num_lost"] == overload["num_duplicated"] == 0
        # (whether the bounded queue rejects depends on which is slower here, the socket front
        # end or the tiny model: tests/inference/test_serving.py checks the rejections)
        assert (overload["num_ok"] + sum(overload["rejected"].values())
                + sum(overload["failed"].values()) == overload["num_requests"])
        assert set(run["acceptance"]) >= {"capacity_rps", "p99_bound_us", "p50_error_pct_40",
                                          "p99_error_pct_80", "served_share_of_capacity"}
        assert run["forward_curve"]["batch_sizes"] == curve["batch_sizes"]
        costs = run["assembly_costs"]  # every way timed, and the loads served with the lowest
        assert {"gather", "take", "gather, 1 thread"} <= set(costs)  # (P99 under load of these)
        assert run["assembly"] == min(("gather", "take"), key=lambda way: sum(
            r["p99_us"] for r in costs[way]["loaded"].values()))
        assert all(r["p99_us"] >= r["p50_us"] > 0 for c in costs.values()
                   for by_size in c.values() for r in by_size.values())
        stack = run["evidence"]["stack"]
        assert stack["calibration_rps"] == pytest.approx(0.6 * result["capacity_rps"])
        assert result["overhead_us"] == stack["handoff_under_load_us"] >= 0
        assert stack["transport_under_load_us"] > 0 and stack["transport_alone_us"] > 0
        assert stack["forming_under_load_us"] >= 0  # recorded for the gap between batches
        gaps = stack["gap_under_load_us"]  # measured per batch, what the simulator draws from
        # (none where no batch was due when its instance became free: on a contended host the
        # tiny models' calibration can serve every batch on arrival; test_batch_gap checks the
        # rule on fixed times)
        assert len(gaps) <= 64 and gaps == sorted(gaps) and all(g >= 0 for g in gaps)
        for name in ("device_spread", "host_spread"):  # what the simulator drew batches from
            spread = stack[name]
            assert len(spread["factors"]) == len(spread["batch_sizes"]) >= 1
            assert all(0 < f[0] <= 1 <= f[-1] and len(f) <= 64 for f in spread["factors"])
        for point in result["open_loop"]:  # the medians simulated beside the spread
            assert point["simulated_medians"]["num_completed"] == point["simulated"][
                "num_completed"]
            assert point["spread"]["device"]["batch_sizes"]
            assert point["simulated_no_gap"]["num_completed"] == point["simulated"][
                "num_completed"]  # and the simulation without the gap beside it
            if stack["wake_under_load_us"]:  # and without the lag past the device
                assert point["simulated_no_wake"]["num_completed"] == point["simulated"][
                    "num_completed"]
        wake = stack["wake_under_load_us"]  # (size, us) of the calibration's clear batches
        assert [b for b, _ in wake] == sorted({b for b, _ in wake})
        for point in result["open_loop"]:
            engine = run["evidence"][point["label"]]["engine"]
            assert len(engine["lock_wait_us"]) == len(engine["batch_sizes"])
            assert len(engine["wake_us"]) == len(engine["num_clear_batches"]) == len(
                engine["batch_sizes"])
            assert point["real"]["probes"]["series"]["max_latency_per_bin_us"]
