"""The acceptance of issue 20, asserted on the data scripts/h200/serving_bench.py recorded on an
NVIDIA H200 (committed as tests/data/inference/h200_serving.json; skipped until it is).

For ResNet-50 and BERT-base, FP32 and BF16: the real batcher serves >= 80% of the curve's capacity
at a P99 no worse than 2x a full batch's latency plus the delay; the simulator's P50 and P99 are
within 10% of the real ones at 40% and 80% of capacity; a 10x overload answers or rejects every
request once. Every number is recomputed here from the recorded raw values. Five runs are
committed: the first (17:09 UTC) and second (17:36) before request groups and the bench's choice
of preferred sizes, the third (20:07, ``h200_serving_2006.json``) with them, the fourth (21:48,
``h200_serving_2148.json``) with two echo baselines beside the overhead's paths, the fifth
(22:55, ``h200_serving_2255.json``) with fresh dispatch.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "inference" / "h200_serving.json"
RUNS = [("resnet50", "float32"), ("resnet50", "bfloat16"), ("bert-base", "float32"),
        ("bert-base", "bfloat16")]

pytestmark = pytest.mark.skipif(
    not DATA.is_file(), reason="no H200 serving run committed yet: run scripts/h200/"
    "serving_bench.py on the GPU and commit $OUT/serving/serving_bench.json as " + DATA.name)


@pytest.fixture(scope="module")
def doc():
    return json.loads(DATA.read_text())


def _by_model(document):
    """Each (model, dtype) run's comparison."""
    return {(r["model"], r["dtype"]): r["comparison"] for r in document["runs"]}


@pytest.fixture(scope="module")
def runs(doc):
    return _by_model(doc)


def _point(result, label):
    return next(p for p in result["open_loop"] if p["label"] == label)


def _error_pct(simulated, real):
    return 100 * (simulated - real) / real


def test_recorded_on_an_h200_with_every_run(doc, runs):
    assert "H200" in doc["machine"]["device"] and not doc["smoke"]
    assert all(s["ok"] for s in doc["status"].values()), doc["status"]
    assert sorted(runs) == sorted(RUNS)
    assert doc["total_s"] < 480


@pytest.mark.xfail(strict=True, reason=(
    "H200 2026-12-01 17:09 UTC (serving path at a19999e): 80%, 80%, 78% and 79% of capacity "
    "served with no stall left, but the real P99 at 80% load is 17.6, 13.1, 46.1 and 56.2 ms "
    "against bounds of 16.4, 12.2, 44.3 and 12.9 ms (ResNet-50 FP32/BF16, BERT-base FP32/BF16): "
    "4-7% over in three, and BERT BF16 on one instance at 92% of what it really serves"))
@pytest.mark.parametrize("key", RUNS, ids=lambda k: " ".join(k))
def test_serves_80_pct_of_capacity_within_the_p99_bound(runs, key):
    result = runs[key]
    curve = result["curve"]
    capacity = result["policy"]["max_batch_size"] / curve["device_us"][-1] * 1e6
    assert result["capacity_rps"] == pytest.approx(capacity)
    high = _point(result, "80% of capacity")["real"]
    slack = 3 / math.sqrt(high["num_requests"])  # a Poisson count's 3-sigma shortfall
    assert high["throughput_rps"] >= 0.8 * capacity * (1 - slack)
    assert high["num_ok"] == high["num_requests"]
    bound_us = 2 * curve["wall_us"][-1] + result["policy"]["max_queue_delay_us"]
    assert high["latency_p99_us"] <= bound_us


_HOST_UNDER_LOAD = pytest.mark.xfail(strict=True, reason=(
    "H200 2026-12-01 17:09 UTC: simulated P50/P99 -17.4/-14.9% (FP32) and -14.9/-16.2% (BF16): "
    "the batch's assembly in the serving threads took 2.1-3.8x what it took alone, which that "
    "run's simulator did not know (test_the_host_stage_under_load_explains_resnets_miss)"))
_SATURATED = pytest.mark.xfail(strict=True, reason=(
    "H200 2026-12-01 17:09 UTC: real P50 44.7 ms against simulated 9.4: one instance at 92% "
    "of what it really served (5.92 ms per batch of 31, simulated 5.65): the queue grew from "
    "1.1 s on"))
_SIMULATOR_CASES = [
    pytest.param(key, label, id=f"{label}-{' '.join(key)}", marks=mark)
    for label in ("40% of capacity", "80% of capacity") for key in RUNS
    for mark in [_HOST_UNDER_LOAD if key[0] == "resnet50" and label.startswith("40")
                 else _SATURATED if key == ("bert-base", "bfloat16") and label.startswith("80")
                 else ()]]


@pytest.mark.parametrize(("key", "label"), _SIMULATOR_CASES)
def test_simulator_within_10_pct_of_the_real_batcher(runs, key, label):
    point = _point(runs[key], label)
    real, simulated = point["real"], point["simulated"]
    assert abs(_error_pct(simulated["latency_p50_us"], real["latency_p50_us"])) <= 10
    assert abs(_error_pct(simulated["latency_p99_us"], real["latency_p99_us"])) <= 10


def _replay_device(result):
    """The device curve the bench simulated: the measured one as a step over the graphs."""
    from aiprof.inference.latency_curve import LatencyCurve
    from aiprof.measure.inference.engine import buckets

    curve, top = result["curve"], result["policy"]["max_batch_size"]
    measured = LatencyCurve(batch_sizes=tuple(curve["batch_sizes"]),
                            latency_us=tuple(curve["device_us"]))
    steps = buckets(top)
    return LatencyCurve(batch_sizes=tuple(range(1, top + 1)), latency_us=tuple(
        measured(min(b for b in steps if b >= size)) for size in range(1, top + 1)))


def _replay(result, point, host_curve, preferred=()):
    """The simulator run again on a recorded point's arrivals with another host stage (and
    preferred batch sizes)."""
    from aiprof.inference.arrivals import poisson_arrivals
    from aiprof.inference.policy import BatchPolicy
    from aiprof.inference.simulator import SimulationOptions, simulate

    stack, top = result["stack"], result["policy"]["max_batch_size"]
    device = _replay_device(result)
    options = SimulationOptions(num_instances=result["num_instances"], shared_device=True,
                                overhead_us=stack["handoff_under_load_us"],
                                transport_us=stack["transport_under_load_us"],
                                host_curve=host_curve)
    policy = BatchPolicy(max_batch_size=top, preferred_batch_sizes=preferred,
                         max_queue_delay_us=result["policy"]["max_queue_delay_us"])
    arrivals = poisson_arrivals(point["offered_rps"], point["real"]["num_requests"], seed=0)
    return simulate(arrivals, device, policy, options)


@pytest.mark.parametrize("key", [("resnet50", "float32"), ("resnet50", "bfloat16")],
                         ids=lambda k: " ".join(k))
def test_the_host_stage_under_load_explains_resnets_miss(runs, key):
    """Replayed with the host stage those batches really cost the serving threads, taken from
    the other loads of the same run (80% and the closed loops, never the load predicted), the
    simulator meets the real 40% point within 10%; with the costs alone it does not, as
    recorded (the replay reproduces the recorded simulation first)."""
    import numpy as np

    from aiprof.inference.latency_curve import LatencyCurve

    result = runs[key]
    target = _point(result, "40% of capacity")
    curve = result["curve"]
    alone = LatencyCurve(batch_sizes=tuple(curve["batch_sizes"]), latency_us=tuple(
        max(h, w - d) for h, w, d in zip(curve["host_us"], curve["wall_us"], curve["device_us"],
                                         strict=True)))
    assert _replay(result, target, alone).latency_p50_us == pytest.approx(
        target["simulated"]["latency_p50_us"])
    seen: dict[int, list[float]] = {}
    for point in [*result["open_loop"], *result["closed_loop"]]:
        if point is target:
            continue
        costs = point["under_load"]
        for size, count, wall, sync in zip(costs["batch_sizes"], costs["num_batches"],
                                           costs["wall_us"], costs["sync_wait_us"], strict=True):
            if count >= 3:
                seen.setdefault(size, []).append(wall - sync)
    sizes = sorted(seen)
    loaded = LatencyCurve(batch_sizes=tuple(sizes),
                          latency_us=tuple(float(np.median(seen[b])) for b in sizes))
    assert loaded(8) > 2 * alone(8)  # the assembly cost more in the serving threads
    replayed, real = _replay(result, target, loaded), target["real"]
    assert abs(_error_pct(replayed.latency_p50_us, real["latency_p50_us"])) <= 10
    assert abs(_error_pct(replayed.latency_p99_us, real["latency_p99_us"])) <= 10


@pytest.mark.parametrize("key", RUNS, ids=lambda k: " ".join(k))
def test_the_setting_the_bench_now_chooses_meets_the_p99_bound_in_simulation(runs, key):
    """The bench now lets the simulator choose the preferred batch sizes with the instance
    count (none, or half and all of the max batch: the tuner's two variants), from the curve
    and the stack's costs of lone requests, before any load runs. Made on this run's records,
    that choice is a preferred half batch, and the simulator (given the costs measured under
    load, as the bench gives them) puts the 80% point's P99 within the bound in every run,
    where the setting served (no preferred size) was 0-5% over it in simulation and 4-7% over
    it for real (test_serves_80_pct_of_capacity_within_the_p99_bound)."""

    from aiprof.inference.policy import BatchPolicy
    from aiprof.inference.simulator import SimulationOptions
    from aiprof.measure.inference.comparison import BenchConfig, ServingCurve, setting_p99_us

    result = runs[key]
    recorded, stack, top = result["curve"], result["stack"], result["policy"]["max_batch_size"]
    curve = ServingCurve(**{k: tuple(recorded[k]) for k in ("batch_sizes", "host_us",
                                                            "device_us", "wall_us")})
    lone = SimulationOptions(overhead_us=stack["handoff_alone_us"],
                             transport_us=stack["transport_alone_us"],
                             host_curve=curve.host_curve(), shared_device=True)
    policy = BatchPolicy(max_batch_size=top,
                         max_queue_delay_us=result["policy"]["max_queue_delay_us"])
    device = _replay_device(result)
    by_setting = setting_p99_us(device, lone, policy, 2, 0.8 * result["capacity_rps"],
                                BenchConfig(max_batch=top, tune_requests=1000))
    instances, preferred = min(by_setting, key=lambda k: by_setting[k])
    assert preferred == (top // 2, top)
    point = _point(result, "80% of capacity")
    chosen = {**result, "num_instances": instances}
    replayed = _replay(chosen, point, curve.host_curve(), preferred=preferred)
    as_served = point["simulated"]  # the same simulation with the setting served
    bound_us = 2 * recorded["wall_us"][-1] + policy.max_queue_delay_us
    assert replayed.latency_p99_us <= 0.95 * bound_us < as_served["latency_p99_us"]
    assert replayed.throughput_rps == pytest.approx(as_served["throughput_rps"], rel=0.01)


def test_no_stall_left_in_the_tail(runs):
    """The tail of the run before (P99 35-70 ms at 5 ms P50) was the load generator stopping
    after its first answer; now no client is late by over 2 ms, and the requests above the P99
    at 40% load spread over many 100 ms windows instead of one stall."""
    for key in RUNS:
        for point in runs[key]["open_loop"]:
            real = point["real"]
            assert real["max_send_lag_us"] < 2000, (key, point["label"])
            assert real["probes"]["series"]["tail_client_late_share"] == 0
            assert real["probes"]["gc"]["max_pause_us"] < 2000  # frozen heap: no long collection
        low = _point(runs[key], "40% of capacity")["real"]["probes"]["series"]
        assert low["tail_bins"] >= 4, key


@pytest.mark.parametrize("key", RUNS, ids=lambda k: " ".join(k))
def test_overload_answers_every_request_once(runs, key):
    result = runs[key]
    run = result["overload"]
    assert result["overload_rps"] >= 10 * result["capacity_rps"] * 0.999
    assert run["num_lost"] == run["num_duplicated"] == 0
    assert (run["num_ok"] + sum(run["rejected"].values()) + sum(run["failed"].values())
            == run["num_requests"])


@pytest.mark.parametrize("key", RUNS, ids=lambda k: " ".join(k))
def test_closed_loop_and_tuner_were_run(runs, key):
    result = runs[key]
    assert [p["concurrency"] for p in result["closed_loop"]] == [1, 2, 4, 8, 16, 32, 64]
    for point in result["closed_loop"]:
        assert point["real"]["num_lost"] == point["real"]["num_duplicated"] == 0
    tuner = result["tuner"]
    assert tuner is not None and tuner["best"] is not None and tuner["point"] is not None
    assert tuner["point"]["real"]["num_lost"] == 0


# A second H200 run, 27 minutes later, with the simulator's host stage measured under load
# (serving path at eec8057; tests/data/inference/h200_serving_1736.json). It is kept beside the
# first because it did not repeat it: the same code on the same host served ResNet-50 BF16 at
# 63% of capacity (80% at 17:09), a host whose cores change speed from outside
# (tests/data/trial/h200_try_noise.json) moves a serving run as much as a training step.
SECOND = DATA.with_name("h200_serving_1736.json")


def test_the_second_run_answered_every_overload_request_once_and_did_not_repeat_the_first():
    second = {(r["model"], r["dtype"]): r["acceptance"]
              for r in json.loads(SECOND.read_text())["runs"]}
    first = {(r["model"], r["dtype"]): r["acceptance"]
             for r in json.loads(DATA.read_text())["runs"]}
    assert sorted(second) == sorted(RUNS)
    assert all(a["overload_every_request_answered_once"] for a in second.values())
    shares = {k: a["served_share_of_capacity"] for k, a in second.items()}
    assert shares[("resnet50", "bfloat16")] < 0.7 <= first[("resnet50", "bfloat16")][
        "served_share_of_capacity"]
    assert sum(1 for s in shares.values() if s >= 0.77) == 3


# A third H200 run (20:07 UTC, serving path at 9c43b90: request groups, answers sent from the
# model threads, and the loads served with the setting the simulator chose, a preferred half
# batch; tests/data/inference/h200_serving_2006.json). The acceptance as it stands there.
LATEST = DATA.with_name("h200_serving_2006.json")


@pytest.fixture(scope="module")
def latest_doc():
    return json.loads(LATEST.read_text())


@pytest.fixture(scope="module")
def latest(latest_doc):
    return _by_model(latest_doc)


def test_the_latest_run_is_an_h200_run_with_every_part(latest_doc, latest):
    assert "H200" in latest_doc["machine"]["device"] and not latest_doc["smoke"]
    assert all(s["ok"] for s in latest_doc["status"].values()), latest_doc["status"]
    assert sorted(latest) == sorted(RUNS) and latest_doc["total_s"] < 480
    for key, result in latest.items():  # served with the setting the simulator chose
        chosen = min(result["setting_p99_us"], key=lambda k: result["setting_p99_us"][k])
        assert chosen == f"{result['num_instances']} x 16,32", key
        assert result["policy"]["preferred_batch_sizes"] == [16, 32]


_LATEST_STALL = pytest.mark.xfail(strict=True, reason=(
    "H200 2026-12-01 20:07 UTC: ResNet-50 BF16 at 80% load, P99 16.3 ms against a bound of "
    "12.2 ms and a simulated 10.4 ms: the tail in 5 of the run's 100 ms windows, the client "
    "2.9 ms late once, and the engine's time outside the device for a batch of 5 at 1.7 ms "
    "(0.8-1.1 ms for the sizes around it): host-stage stalls that the simulator's host curve "
    "does not hold"))


@pytest.mark.parametrize("key", [pytest.param(k, marks=_LATEST_STALL)
                                 if k == ("resnet50", "bfloat16") else k for k in RUNS],
                         ids=lambda k: " ".join(k))
def test_the_latest_run_serves_80_pct_of_capacity_within_the_p99_bound(latest, key):
    test_serves_80_pct_of_capacity_within_the_p99_bound(latest, key)


_LATEST_MISSES = {
    ("resnet50", "float32", "40% of capacity"): "P50/P99 -10.0/-10.2%",
    ("resnet50", "bfloat16", "40% of capacity"): "P99 -11.3%",
    ("resnet50", "bfloat16", "80% of capacity"): "P99 -36.0% (the stall above)",
}


def _latest_case(key, label):
    miss = _LATEST_MISSES.get((*key, label))
    marks = [pytest.mark.xfail(strict=True, reason=(
        f"H200 2026-12-01 20:07 UTC: ResNet-50 {miss}; its host stage (the assembly of "
        "3x224x224 images by torch's threads, 250-300 us of their CPU per request) varies more "
        "under load than the median the simulator is given"))] if miss else []
    return pytest.param(key, label, id=f"{label}-{' '.join(key)}", marks=marks)


@pytest.mark.parametrize(("key", "label"), [_latest_case(key, label) for label in (
    "40% of capacity", "80% of capacity") for key in RUNS])
def test_the_latest_simulator_within_10_pct_of_the_real_batcher(latest, key, label):
    test_simulator_within_10_pct_of_the_real_batcher(latest, key, label)


@pytest.mark.parametrize("key", RUNS, ids=lambda k: " ".join(k))
def test_the_latest_overload_answers_every_request_once(latest, key):
    test_overload_answers_every_request_once(latest, key)
    test_closed_loop_and_tuner_were_run(latest, key)


def test_the_latest_serving_path_costs_less_per_request_than_the_one_before(latest_doc):
    """The serving process's CPU per request at 5,000 req/s with a model that costs nothing,
    the two request paths in turn on the same arrivals: the group path costs less in every pair
    and wakes the loop less than once per request (the per-request path about three times)."""
    overhead = latest_doc["serving_overhead"]
    group, before = overhead["paths"]["group"], overhead["paths"]["per request"]
    assert len(group) == len(before) == 3
    for new, old in zip(group, before, strict=True):
        assert new["seed"] == old["seed"]
        assert new["num_lost"] == new["num_duplicated"] == 0
        assert new["server_cpu_us_per_request"] < 0.8 * old["server_cpu_us_per_request"]
        assert new["loop_iterations_per_request"] < 1 < 2 < old["loop_iterations_per_request"]
        assert new["latency_p50_us"] < old["latency_p50_us"]


@pytest.mark.xfail(strict=True, reason=(
    "H200 2026-12-01 20:07 UTC: 77.0, 69.9 and 71.4 us per request (median 71.4; the loop's "
    "thread 51.6-57.8, the model threads 17.9-19.2) at a mean batch of 1.4-1.5, against 99.4-118.3 "
    "us for the per-request path: each request is nearly its own batch and pays the trip to "
    "the model thread"))
def test_the_latest_serving_overhead_is_under_50_us_per_request(latest_doc):
    assert latest_doc["serving_overhead"]["server_cpu_us_per_request"] < 50


# The later H200 runs, each asserted as it stands: the fourth (21:48 UTC, serving path at
# c4c9221, h200_serving_2148.json) with two baselines beside the overhead's request paths, an
# echo server answering from the loop and one answering from a thread; the fifth (22:55 UTC,
# at 47e1703, h200_serving_2255.json) with a group meeting an empty queue dispatched at once
# (``fresh_dispatch``) and the queued group path kept as a baseline; the sixth (2026-12-02
# 01:03 UTC, at 3be2b60, h200_serving_0103.json) with each model's batch assembled the way
# that had the lowest P99 under load when timed on the H200 first (``direct`` for ResNet-50:
# each request's row copied from pinned memory into the device buffer; ``take`` for BERT);
# the seventh (01:47 UTC, the same commit but for tests and data) to see whether it repeats;
# the eighth (03:34 UTC, at f810ef1, h200_serving_0334.json) served by the leader path (the
# thread that reads the requests runs the batch it submits while the model's calls are short);
# the ninth (04:19 UTC, at 87d8013, h200_serving_0419.json) simulating each batch's time drawn
# from its size's measured spread (the medians' simulation kept beside it).
LATER = {
    "21:48": {
        "date": "2026-12-01",
        "file": "h200_serving_2148.json",
        "bound": {("resnet50", "bfloat16"): "P99 14.8 ms at 80% load against a bound of 12.1 ms"},
        "simulator": {
            ("resnet50", "float32", "40% of capacity"): "P50/P99 -11.0/-10.6%",
            ("resnet50", "bfloat16", "40% of capacity"): "P99 -15.2%",
            ("resnet50", "bfloat16", "80% of capacity"): "P50/P99 -16.7/-27.9%",
            ("bert-base", "float32", "80% of capacity"): "P99 -13.0%"},
        "overhead": "77.0, 72.9 and 74.3 us per request (median 74.3) at a mean batch of "
                    "1.41-1.47, against 27.0 us for an echo answering from the loop"},
    "22:55": {
        "date": "2026-12-01",
        "file": "h200_serving_2255.json",
        "bound": {("resnet50", "bfloat16"): "P99 13.8 ms at 80% load against a bound of 11.9 ms"},
        "simulator": {
            ("resnet50", "float32", "40% of capacity"): "P99 -17.5%",
            ("resnet50", "float32", "80% of capacity"): "P99 +35.9%",
            ("resnet50", "bfloat16", "80% of capacity"): "P50/P99 -11.0/-21.9%",
            ("bert-base", "float32", "80% of capacity"): "P99 -14.0%"},
        "overhead": "68.6, 52.3 and 45.8 us per request (median 52.3) at a mean batch of "
                    "1.41-1.50, against 79.2, 70.9 and 60.0 for the queued group path"},
    "01:03": {
        "date": "2026-12-02",
        "file": "h200_serving_0103.json",
        "bound": {},
        "simulator": {
            ("bert-base", "float32", "40% of capacity"): "P50/P99 -10.7/-14.3%",
            ("bert-base", "float32", "80% of capacity"): "P50/P99 -18.1/-31.6%"},
        "overhead": "56.1, 54.5 and 55.4 us per request (median 55.4) at a mean batch of "
                    "1.44, against 25.1-26.1 for an echo from the loop; the batcher's own "
                    "Python 6.9-9.5 us of it"},
    "01:47": {
        "date": "2026-12-02",
        "file": "h200_serving_0147.json",
        "bound": {("resnet50", "bfloat16"): "P99 32.1 ms at 80% load against a bound of 11.1 "
                                            "ms: a stall, the tail in 4 of the run's 100 ms "
                                            "windows, its worst request 34.9 ms"},
        "simulator": {
            ("resnet50", "float32", "40% of capacity"): "P99 -53.3%",
            ("resnet50", "bfloat16", "40% of capacity"): "P99 -17.7%",
            ("resnet50", "bfloat16", "80% of capacity"): "P50/P99 -55.7/-62.9%",
            ("bert-base", "float32", "40% of capacity"): "P99 -10.5%",
            ("bert-base", "float32", "80% of capacity"): "P99 -18.7%"},
        "overhead": "60.4, 60.0 and 74.2 us per request (median 60.4), the batcher's own "
                    "Python 10.4-11.5 us and an echo from the loop 29.0-35.7 us: a slower "
                    "host than at 01:03"},
    "03:34": {
        "date": "2026-12-02",
        "file": "h200_serving_0334.json",
        "bound": {},
        "simulator": {
            ("resnet50", "bfloat16", "40% of capacity"): "P50/P99 -10.4/-47.8%: a stall, the "
                                                         "tail in 7 of the run's 100 ms windows "
                                                         "from 1.48 to 2.54 s, its worst "
                                                         "request 16.6 ms",
            ("bert-base", "float32", "80% of capacity"): "P99 -10.2%"},
        "overhead": ""},
    "04:19": {
        "date": "2026-12-02",
        "file": "h200_serving_0419.json",
        "bound": {("resnet50", "float32"): "P99 14.1 ms at 80% load against a bound of 13.5 ms"},
        "simulator": {
            ("resnet50", "float32", "80% of capacity"): "P50/P99 -14.4/-8.6% (with the batch "
                                                        "times' spread; -17.3/-11.3% with "
                                                        "medians)"},
        "overhead": ""},
    "06:26": {
        "date": "2026-12-02",
        "file": "h200_serving_0626.json",
        "bound": {},
        "simulator": {
            ("bert-base", "float32", "80% of capacity"): "P99 -10.1% (the instance 99.8% busy "
                                                         "in simulation; the real batches' "
                                                         "device time 1.6% over the "
                                                         "calibration's)"},
        "overhead": ""},
    "06:54": {
        "date": "2026-12-02",
        "file": "h200_serving_0654.json",
        "bound": {("resnet50", "bfloat16"): "P99 11.30 ms at 80% load against a bound of 11.07 "
                                            "ms"},
        "simulator": {
            ("resnet50", "bfloat16", "40% of capacity"): "P50/P99 -12.9/-40.5%: a stall, the "
                                                         "load client 8.2 ms late at worst and "
                                                         "the loop's longest iteration 3.1 ms"},
        "overhead": ""},
    "07:02": {
        "date": "2026-12-02",
        "file": "h200_serving_0702.json",
        "bound": {},
        "simulator": {},
        "overhead": ""},
}


@cache
def later_doc(run):
    """One later run's document, read once."""
    return json.loads(DATA.with_name(LATER[run]["file"]).read_text())


@pytest.fixture(scope="module", params=sorted(LATER))
def later(request):
    return request.param, later_doc(request.param)


def _xfail_if(miss, run):
    date = LATER[run]["date"]
    return [pytest.mark.xfail(strict=True, reason=f"H200 {date} {run} UTC: {miss}")
            ] if miss else []


def test_the_later_runs_are_h200_runs_with_every_part(later):
    _, document = later
    assert "H200" in document["machine"]["device"] and not document["smoke"]
    assert all(s["ok"] for s in document["status"].values()), document["status"]
    assert sorted(_by_model(document)) == sorted(RUNS) and document["total_s"] < 480


@pytest.mark.parametrize(("run", "key"), [
    pytest.param(run, key, id=f"{run}-{' '.join(key)}",
                 marks=_xfail_if(LATER[run]["bound"].get(key), run))
    for run in sorted(LATER) for key in RUNS])
def test_the_later_runs_serve_80_pct_of_capacity_within_the_p99_bound(run, key):
    document = later_doc(run)
    test_serves_80_pct_of_capacity_within_the_p99_bound(_by_model(document), key)


@pytest.mark.parametrize(("run", "key", "label"), [
    pytest.param(run, key, label, id=f"{run}-{label}-{' '.join(key)}",
                 marks=_xfail_if(LATER[run]["simulator"].get((*key, label)), run))
    for run in sorted(LATER) for label in ("40% of capacity", "80% of capacity")
    for key in RUNS])
def test_the_later_simulators_within_10_pct_of_the_real_batcher(run, key, label):
    document = later_doc(run)
    test_simulator_within_10_pct_of_the_real_batcher(_by_model(document), key, label)


@pytest.mark.parametrize("key", RUNS, ids=lambda k: " ".join(k))
def test_the_later_overloads_answer_every_request_once(later, key):
    runs = _by_model(later[1])
    test_overload_answers_every_request_once(runs, key)
    test_closed_loop_and_tuner_were_run(runs, key)


def test_the_model_threads_trip_is_what_the_group_path_costs_over_an_echo():
    """The fourth run's overhead paths on the same arrivals with a model that costs nothing:
    an echo answering from the loop, one answering from a thread, the group path and the
    per-request path. In every seed each costs more than the one before; the group path's
    cost over an echo from a thread (the trip to a model thread and back, the grouping) is
    more than that echo's cost over answering from the loop: the trip, not the socket, is what
    keeps the group path over 50 us."""
    document = later_doc("21:48")
    paths = document["serving_overhead"]["paths"]
    order = ["echo", "echo via a thread", "group", "per request"]
    assert sorted(paths) == sorted(order)
    for seed in range(3):
        cpu = [next(r for r in paths[p] if r["seed"] == seed)["server_cpu_us_per_request"]
               for p in order]
        assert cpu == sorted(cpu), (seed, cpu)
        assert cpu[2] - cpu[1] > cpu[1] - cpu[0] > 0, (seed, cpu)
        assert cpu[1] < 50 < cpu[2], (seed, cpu)
    for rows in paths.values():
        assert all(r["num_lost"] == r["num_duplicated"] == 0 for r in rows)


def test_fresh_dispatch_costs_less_than_queueing_in_every_pair():
    """The fifth run: the group path with ``fresh_dispatch`` against the same path queued, on
    the same arrivals, 1.16-1.36x less CPU per request in each of the three pairs, and with
    every batch of one request (the same batches on both sides) less of the loop's CPU in each
    pair; nothing lost or answered twice."""
    document = later_doc("22:55")
    overhead = document["serving_overhead"]
    group, queued = overhead["paths"]["group"], overhead["paths"]["group, queued"]
    assert len(group) == len(queued) == 3
    for new, old in zip(group, queued, strict=True):
        assert new["seed"] == old["seed"]
        assert new["server_cpu_us_per_request"] < old["server_cpu_us_per_request"]
    assert all(r > 1 for r in overhead["queued_group_over_group"])
    lone = overhead["lone_requests"]
    for fresh, queued_lone in zip(lone["fresh"], lone["queued"], strict=True):
        assert fresh["loop_cpu_us_per_request"] < queued_lone["loop_cpu_us_per_request"]
    for rows in overhead["paths"].values():
        assert all(r["num_lost"] == r["num_duplicated"] == 0 for r in rows)


@pytest.mark.parametrize("run", [pytest.param(run, marks=_xfail_if(LATER[run]["overhead"], run))
                                 for run in sorted(LATER)])
def test_the_later_serving_overhead_is_under_50_us_per_request(run):
    document = later_doc(run)
    assert document["serving_overhead"]["server_cpu_us_per_request"] < 50


def _replay_at(result, point, *, device=None, host=None, handoff_us=None, transport_us=None):
    """A recorded point's simulation run again, any of its inputs replaced (None: as run)."""
    from aiprof.inference.arrivals import poisson_arrivals
    from aiprof.inference.latency_curve import LatencyCurve
    from aiprof.inference.policy import BatchPolicy
    from aiprof.inference.simulator import SimulationOptions, simulate

    stack, policy = result["stack"], result["policy"]
    loaded = stack["host_under_load"]
    options = SimulationOptions(
        num_instances=result["num_instances"], shared_device=True,
        overhead_us=stack["handoff_under_load_us"] if handoff_us is None else handoff_us,
        transport_us=stack["transport_under_load_us"] if transport_us is None else transport_us,
        host_curve=host or LatencyCurve(batch_sizes=tuple(loaded["batch_sizes"]),
                                        latency_us=tuple(loaded["latency_us"])))
    arrivals = poisson_arrivals(point["offered_rps"], point["real"]["num_requests"], seed=0)
    return simulate(arrivals, device or _replay_device(result), BatchPolicy(
        max_batch_size=policy["max_batch_size"], max_queue_delay_us=policy["max_queue_delay_us"],
        preferred_batch_sizes=tuple(policy["preferred_batch_sizes"])), options)


def _own_costs(result, point):
    """The device curve, host stage, hand-off and transport that ``point``'s own batches took."""
    from aiprof.inference.latency_curve import LatencyCurve
    from aiprof.measure.inference.engine import BatchCosts, buckets
    from aiprof.measure.inference.stack_costs import loaded_device_curve

    costs, real = point["under_load"], point["real"]
    steps = buckets(result["policy"]["max_batch_size"])
    loaded = BatchCosts(**{k: tuple(costs[k]) for k in ("batch_sizes", "num_batches", "host_us",
                                                        "device_us", "wall_us")})
    seen = [(b, t) for b, n, t in zip(costs["batch_sizes"], costs["num_batches"],
                                      costs["outside_device_us"], strict=True) if n >= 3]
    return {"device": loaded_device_curve(_replay_device(result),
                                          lambda size: min(b for b in steps if b >= size),
                                          loaded),
            "host": LatencyCurve(batch_sizes=tuple(b for b, _ in seen),
                                 latency_us=tuple(t for _, t in seen)),
            "handoff_us": real["server"]["compute_p50_us"] - costs["median_wall_us"],
            "transport_us": real["latency_p50_us"] - real["server"]["latency_p50_us"]}


@pytest.mark.parametrize("run", ["01:03", "01:47"])
def test_the_device_time_back_to_back_is_within_4_pct_of_alone_and_settles_no_point(run):
    """The sixth and seventh runs: at 80% load every model's batches took 0.97-1.01x their
    device time alone, bucket by bucket (BERT-base FP32 1.00-1.01x: no clock or power loss of
    a compute-bound model run back to back). Given the device curve each point's own batches
    took (``loaded_device_curve``, in-sample: more than the bench's calibration run can know),
    the simulator is within 10% (P50 and P99) at as many points as it was: 6 of 8 and 3 of 8
    (the replay reproduces the recorded simulation first)."""
    within = {"as run": 0, "device under load": 0}
    for key, result in _by_model(later_doc(run)).items():
        alone = _replay_device(result)
        for label in ("40% of capacity", "80% of capacity"):
            point = _point(result, label)
            real, device = point["real"], _own_costs(result, point)["device"]
            if label.startswith("80"):
                ratios = [device(b) / alone(b) for b in (8, 16, 32)]
                assert all(0.96 < r < 1.02 for r in ratios), (key, ratios)
            as_run = _replay_at(result, point)
            assert as_run.latency_p50_us == pytest.approx(point["simulated"]["latency_p50_us"])
            for name, simulated in (("as run", as_run), ("device under load",
                                                         _replay_at(result, point,
                                                                    device=device))):
                within[name] += all(abs(_error_pct(getattr(simulated, f), real[f])) <= 10
                                    for f in ("latency_p50_us", "latency_p99_us"))
    assert within == dict.fromkeys(within, {"01:03": 6, "01:47": 3}[run])


@pytest.mark.parametrize("run", ["01:03", "01:47"])
def test_bert_fp32s_80_pct_miss_is_not_a_median_cost(run):
    """BERT-base FP32 at 80% load (one instance, preferred 16 and 32, the simulated instance
    busy 99.9%): given every median cost its own batches took (device curve, host stage,
    hand-off, transport), the simulator still misses the real P99 by over 10% in both runs
    (-26.9% and -13.5%, from -31.6% and -18.7% as run): near saturation the tail comes from
    batches that run long and let 32 requests pile up (10 and 4 real batches of 32, a batch
    of 32 taking 21 ms; the simulator, whose batch of a size always costs its median, formed
    none), not from a cost the medians miss."""
    result = _by_model(later_doc(run))[("bert-base", "float32")]
    point = _point(result, "80% of capacity")
    real = point["real"]
    own = _replay_at(result, point, **_own_costs(result, point))
    assert _error_pct(own.latency_p99_us, real["latency_p99_us"]) < -10
    assert real["server"]["batch_size_histogram"].get("32", 0) >= 4
    assert own.batch_size_histogram.get(32, 0) == 0


def test_the_leader_path_costs_less_than_the_group_path_and_under_50_us_in_every_pair():
    """The eighth run (03:34 UTC): the thread that reads the requests runs the batch it submits
    (``inference.leader``); in turn with the loop-reading group path on the same arrivals."""
    overhead = later_doc("03:34")["serving_overhead"]
    leader, group = overhead["paths"]["leader"], overhead["paths"]["group"]
    assert len(leader) == len(group) == 3
    for new, old in zip(leader, group, strict=True):
        assert new["seed"] == old["seed"]
        assert new["server_cpu_us_per_request"] < 50 < old["server_cpu_us_per_request"]
        assert new["server_cpu_us_per_request"] < old["server_cpu_us_per_request"]
        assert new["num_lost"] == new["num_duplicated"] == 0
    assert all(r > 1.3 for r in overhead["group_over_leader"])
    assert overhead["loop_iterations_per_request"] < 0.1  # the loop rarely wakes


def test_the_cli_bench_on_the_h200_chose_direct_by_its_own_timing_and_served_every_request():
    """``aiprof batching bench --device cuda`` on a ResNet-18 (2026-12-02 03:38 UTC, sizes 1, 8
    and 32, ``--assembly auto``): the way it served with is the lowest P99 under load it timed,
    and every open- and closed-loop request was answered once."""
    doc = json.loads(DATA.with_name("h200_cli_bench_0338.json").read_text())
    assembly = doc["assembly"]
    timed = {way: sum(r["p99_us"] for r in found["loaded"].values())
             for way, found in assembly["timed"].items() if "loaded" in found}
    assert set(timed) == {"gather", "take", "direct"}
    assert assembly["asked"] == "auto" and assembly["used"] == min(timed, key=timed.get)
    assert assembly["used"] == "direct"
    result = doc["result"]
    assert result["device"] == "cuda" and result["execution"] == "cuda graphs"
    for point in result["open_loop"] + result["closed_loop"]:
        real = point["real"]
        assert real["num_ok"] == real["num_requests"] > 0
        assert real["num_lost"] == real["num_duplicated"] == 0


def _p90_spread(result, target):
    """The device time's spread as the other loads of the same run recorded it (never the load
    predicted): per batch size, a lognormal with the median over those loads of P90 / P50."""
    from statistics import median

    from aiprof.inference.latency_curve import TimeSpread

    ratios: dict[int, list[float]] = {}
    for point in [*result["open_loop"], *result["closed_loop"]]:
        costs = point["under_load"]
        if point is target:
            continue
        for size, count, p50, p90 in zip(costs["batch_sizes"], costs["num_batches"],
                                         costs["device_us"], costs["device_p90_us"], strict=True):
            if count >= 3:
                ratios.setdefault(size, []).append(p90 / p50)
    sizes = tuple(sorted(ratios))
    return TimeSpread.from_p50_p90(sizes, (1.0,) * len(sizes),
                                   tuple(median(ratios[b]) for b in sizes))


def _replay_spread(result, point, spread, seed, gap_us=0.0):
    """``_replay_at`` with each batch's device time drawn from ``spread`` (the device curve the
    bench simulated, the one under load; ``gap_us`` more per batch on the instance)."""
    from dataclasses import replace

    from aiprof.inference.arrivals import poisson_arrivals
    from aiprof.inference.latency_curve import LatencyCurve
    from aiprof.inference.policy import BatchPolicy
    from aiprof.inference.simulator import SimulationOptions, simulate

    stack, policy = result["stack"], result["policy"]
    curve = {k: LatencyCurve(batch_sizes=tuple(stack[k]["batch_sizes"]),
                             latency_us=tuple(stack[k]["latency_us"]))
             for k in ("host_under_load", "device_under_load") if stack.get(k)}
    options = SimulationOptions(num_instances=result["num_instances"], shared_device=True,
                                overhead_us=stack["handoff_under_load_us"] + gap_us,
                                transport_us=stack["transport_under_load_us"],
                                host_curve=curve["host_under_load"])
    arrivals = poisson_arrivals(point["offered_rps"], point["real"]["num_requests"], seed=0)
    device = curve.get("device_under_load") or _replay_device(result)  # older runs: alone
    return simulate(arrivals, device, BatchPolicy(
        max_batch_size=policy["max_batch_size"], max_queue_delay_us=policy["max_queue_delay_us"],
        preferred_batch_sizes=tuple(policy["preferred_batch_sizes"])),
        replace(options, device_spread=spread, seed=seed))


def test_the_recorded_spread_of_batch_times_does_not_settle_bert_fp32s_80_pct_miss():
    """The eighth run (03:34 UTC), the first to record each batch size's P90: the simulator
    replayed with every batch's device time drawn from that spread (a lognormal with the
    recorded P50 and P90 of the run's other loads, seeded) instead of its median. The spread
    is narrow (the device's P90 at most 1.015x its median at 80% load, 1.006x for BERT-base
    FP32's batches of 16, in that load and in the others), and near saturation it moves a P99
    by as much as the seed of the draws does: BERT-base FP32 at 80% stays a miss (P99 -10.0,
    -9.8 and -11.8% for seeds 0-2, against -10.2% with the medians), BERT-base BF16 at 80%
    gets worse (-3.4% with the medians, +2.7, +3.0 and +9.0%), and as many points are within
    10% as with the medians (6 of 8 with seed 0; the replay with no spread reproduces the
    recorded simulation first)."""
    import numpy as np

    document = later_doc("03:34")
    errors: dict[tuple[str, str, str], list[float]] = {}
    within = 0
    for key, result in _by_model(document).items():
        for label in ("40% of capacity", "80% of capacity"):
            point = _point(result, label)
            real = point["real"]
            medians = _replay_spread(result, point, None, 0)
            assert medians.latency_p99_us == pytest.approx(point["simulated"]["latency_p99_us"])
            spread = _p90_spread(result, point)
            if key == ("bert-base", "float32") and label.startswith("80"):
                sixteen = spread.factors[spread.batch_sizes.index(16)]
                assert float(np.quantile(sixteen, 0.9)) < 1.01  # the spread is narrow
            seeds = range(3) if key[0] == "bert-base" and label.startswith("80") else range(1)
            drawn = [_replay_spread(result, point, spread, seed) for seed in seeds]
            within += all(abs(_error_pct(getattr(drawn[0], f), real[f])) <= 10
                          for f in ("latency_p50_us", "latency_p99_us"))
            errors[(*key, label)] = [_error_pct(d.latency_p99_us, real["latency_p99_us"])
                                     for d in drawn]
    fp32 = errors["bert-base", "float32", "80% of capacity"]
    bf16 = errors["bert-base", "bfloat16", "80% of capacity"]
    assert len(fp32) == len(bf16) == 3
    assert sum(e < -10 for e in fp32) >= 2 and max(fp32) < -9  # a miss still, by the seed
    assert min(bf16) > -3.4  # the point the medians met gets no closer
    assert within == 6


@pytest.mark.parametrize(("run", "as_run", "with_gap"), [("01:03", -31.6, -24.9),
                                                         ("01:47", -18.7, -9.5),
                                                         ("03:34", -10.2, -7.5)])
def test_the_real_servers_gap_between_batches_is_a_cost_the_simulator_lacks(run, as_run,
                                                                           with_gap):
    """A lead, not a fix: at 80% load the real batcher's instance waited 124-251 us on average
    between its batch's end and the next batch's dispatch (``forming_mean_us``, with requests
    queued), the simulated one 2-10 us; no measured cost stands for it. Added to the hand-off
    (in-sample: the point's own mean, which the bench cannot know beforehand), it brings
    BERT-base FP32's P99 at 80% from -31.6, -18.7 and -10.2% to -24.9, -9.5 and -7.5%, more than
    any spread of batch times did (test_the_recorded_spread_of_batch_times_...), and at 03:34
    every other 80% point stays within 10%."""
    result = _by_model(later_doc(run))[("bert-base", "float32")]
    point = _point(result, "80% of capacity")
    real = point["real"]
    medians = _replay_spread(result, point, None, 0)
    assert medians.latency_p99_us == pytest.approx(point["simulated"]["latency_p99_us"])
    assert _error_pct(medians.latency_p99_us, real["latency_p99_us"]) == pytest.approx(
        as_run, abs=0.05)
    gap_us = real["server"]["forming_mean_us"]
    assert 120 < gap_us < 260 and point["simulated"]["forming_mean_us"] < 10
    gapped = _replay_spread(result, point, None, 0, gap_us)
    assert _error_pct(gapped.latency_p99_us, real["latency_p99_us"]) == pytest.approx(
        with_gap, abs=0.05)
    if run == "03:34":  # the other 80% points, met with the medians, stay met with the gap
        for key, other in _by_model(later_doc(run)).items():
            at = _point(other, "80% of capacity")
            gapped = _replay_spread(other, at, None, 0, at["real"]["server"]["forming_mean_us"])
            assert all(abs(_error_pct(getattr(gapped, f), at["real"][f])) <= 10
                       for f in ("latency_p50_us", "latency_p99_us")), key


def test_the_spread_of_batch_times_brings_more_points_within_10_pct_than_the_medians():
    """The ninth run (04:19 UTC), out of sample for the spread (drawn from the calibration
    run's batches at 60% of capacity): simulated with it, 7 of the 8 points are within 10% of
    the real P50 and P99; simulated with each size's median on the same arrivals, 6."""
    def within(point, key):
        real, simulated = point["real"], point[key]
        return all(abs(_error_pct(simulated[q], real[q])) <= 10
                   for q in ("latency_p50_us", "latency_p99_us"))

    points = [p for result in _by_model(later_doc("04:19")).values()
              for p in result["open_loop"]]
    assert len(points) == 8 and all("simulated_medians" in p for p in points)
    assert sum(within(p, "simulated") for p in points) == 7
    assert sum(within(p, "simulated_medians") for p in points) == 6
