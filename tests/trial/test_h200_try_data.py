"""What the H200 recordings of ``aiprof try`` show, recomputed from the committed documents.

GIVEN the A/A runs (a script against an identical copy of itself), the part-a suite with the
fork server and the 5-round ResNet-50 suite, recorded on one NVIDIA H200 host on 2026-12-01,
THEN: identical code is never called faster or slower; forked variants cost less per process
than fresh interpreters in the same call; on host-bound scripts the noise between processes
is wider than the issue's agreement band (the reason the H200 acceptance is not met); and
where the fix is larger than that noise (DataLoader workers) the fix applied from outside
agrees with the hand-edited script.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "trial"


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / name).read_text())
    return doc


@pytest.fixture(scope="module")
def aa() -> dict[str, Any]:
    return _load("h200_try_aa.json")


def _walls(doc: dict[str, Any]) -> list[float]:
    return [float(run["wall_s"]) for run in doc["runs"] if run["status"] == "ok"]


def test_identical_code_is_never_called_faster_or_slower(aa: dict[str, Any]) -> None:
    for name in ("mlp", "mlp_pinned", "bert"):
        (same,) = aa["documents"][name]["fixes"]
        assert same["name"] == "same" and len(same["round_gains_pct"]) >= 5
        assert same["verdict"] == "within noise", (name, same["interval_pct"])
        low, high = same["interval_pct"]
        assert low < 0 < high


def test_forked_variants_cost_less_per_process_than_fresh_interpreters(aa: dict[str, Any]) -> None:
    fork, exec_ = aa["documents"]["mlp"], aa["documents"]["mlp_exec"]
    assert fork["spawn"]["mode"] == "fork" and exec_["spawn"]["mode"] == "exec"
    fork_s, exec_s = statistics.median(_walls(fork)), statistics.median(_walls(exec_))
    assert fork_s < 0.7 * exec_s, (fork_s, exec_s)  # 6.0 against 10.1 s
    assert aa["process_start_s"]["import_torch"] > 3.0  # what forking saves, per process


def test_host_bound_noise_between_processes_is_wider_than_the_agreement_band(
        aa: dict[str, Any]) -> None:
    for name in ("mlp", "mlp_pinned", "bert"):
        gains = aa["documents"][name]["fixes"][0]["round_gains_pct"]
        assert max(gains) - min(gains) > 2 * 2.0  # the band is ±2 points
        base = aa["documents"][name]["base"]["round_median_step_us"]
        assert max(base) / min(base) > 1.1  # one script, fresh processes, >10% apart


def test_pinning_the_cores_does_not_remove_the_noise(aa: dict[str, Any]) -> None:
    spread = {name: statistics.pstdev(aa["documents"][name]["fixes"][0]["round_gains_pct"])
              for name in ("mlp", "mlp_pinned")}
    assert spread["mlp_pinned"] > 0.5 * spread["mlp"]


def test_the_clock_ramp_is_over_within_a_fraction_of_the_warm_up(aa: dict[str, Any]) -> None:
    samples = aa["clock_ramp"]["samples"]
    steady_ms = samples[-1][1]
    after = [ms for t, ms in samples if t >= 0.14]
    assert after and all(abs(ms - steady_ms) / steady_ms < 0.02 for ms in after)
    assert samples[0][1] > 2 * steady_ms  # the first call: library set-up


def test_dataloader_workers_agree_with_the_hand_edited_script_over_5_rounds() -> None:
    doc = _load("h200_try_resnet50_5rounds.json")
    (script,) = doc["scripts"]
    pairs = {p["fix"]: p for p in script["comparison"]}
    loader = pairs["dataloader"]
    assert len(loader["aiprof"]["round_gains_pct"]) == 5 and loader["agree"] is True
    assert loader["aiprof"]["verdict"] == "faster" and loader["twin"]["verdict"] == "faster"
    for fix in ("bf16", "channels_last"):  # the loader-bound step: both within noise of 0
        assert pairs[fix]["aiprof"]["verdict"] == "within noise"
        assert pairs[fix]["twin"]["verdict"] == "within noise"
    assert statistics.median(_walls(script["try"])) < 5.0  # 3.5 s; 10.5-16.4 s exec before


def test_part_a_with_the_fork_server_preloaded_each_scripts_libraries() -> None:
    doc = _load("h200_try_suite_a_fork.json")
    preloaded = {s["script"]: s["try"]["spawn"]["preloaded"] for s in doc["scripts"]}
    assert "torchvision" in preloaded["resnet50_train"]
    assert "transformers" in preloaded["bert_train"]
    assert doc["summary"]["num_agree"] == 2 and doc["summary"]["num_judged"] == 11


# The noise study (tests/data/trial/h200_try_noise.json): why the host-bound scripts are noisy
# there, and what the floor statistic does about it.


@pytest.fixture(scope="module")
def noise() -> dict[str, Any]:
    return _load("h200_try_noise.json")


def _aa_round_gains(doc: dict[str, Any], statistic: str) -> list[float]:
    from aiprof.trial.stats import floor_step_us

    def value(steps: list[float]) -> float:
        return floor_step_us(steps) if statistic == "floor" else statistics.median(steps)

    by = {(r["round"], r["label"]): value(r["step_us"]) for r in doc["runs"] if r["step_us"]}
    rounds = sorted({r for r, _ in by})
    return [100.0 * (1.0 - by[(r, "aa")] / by[(r, "base")]) for r in rounds]


def test_the_host_runs_the_same_python_at_two_speeds(noise: dict[str, Any]) -> None:
    # Nearly every core was both fast and slow from one pass to the next (2.7 s apart): a
    # property of the host's cores over time, not of a few cores that pinning could avoid.
    for census in noise["census"].values():
        passes = census["passes"]
        switching = 0
        for cpu in passes[0]["probe_us"]:
            best = [min(p["probe_us"][cpu]) for p in passes]
            switching += max(best) / min(best) > 1.3
        assert switching >= 12, switching
        assert all(delta[7] <= 1 for delta in census["proc_stat_delta"].values())  # no steal
    probes = [t for doc in noise["documents"].values() for r in doc["runs"]
              for t in r["host_probe_us"]]
    assert max(probes) / min(probes) > 1.8


def test_the_floor_narrows_the_noise_between_processes(noise: dict[str, Any]) -> None:
    for name in ("mlp_2s", "bert_2s"):
        doc = noise["documents"][name]
        median_sd = statistics.pstdev(_aa_round_gains(doc, "median"))
        floor_sd = statistics.pstdev(_aa_round_gains(doc, "floor"))
        assert median_sd > 8.0, (name, median_sd)
        assert floor_sd < 0.7 * median_sd, (name, floor_sd, median_sd)
    bert = _aa_round_gains(noise["documents"]["bert_2s"], "floor")
    assert max(abs(g) for g in bert) < 2.0  # inside the issue's ±2-point band


def test_a_longer_window_helps_and_pinning_four_cores_does_not(noise: dict[str, Any]) -> None:
    docs = noise["documents"]
    short = statistics.pstdev(_aa_round_gains(docs["mlp_20"], "median"))
    long = statistics.pstdev(_aa_round_gains(docs["mlp_2s"], "median"))
    pinned = statistics.pstdev(_aa_round_gains(docs["mlp_fast4"], "median"))
    assert long < short and pinned > long


# The whole suite with the floor statistic (tests/data/trial/h200_try_suite_floor_{a,b}.json:
# 8 scripts, 20 fixes with hand-edited twins, 3 rounds, timed >= 1 s per process).


def _floor_pairs() -> list[tuple[str, dict[str, Any]]]:
    pairs = []
    for part in ("a", "b"):
        doc = _load(f"h200_try_suite_floor_{part}.json")
        assert doc["protocol"]["statistic"] == "floor"
        pairs += [(s["script"], p) for s in doc["scripts"] for p in s["comparison"]]
    return pairs


def _spread(side: dict[str, Any]) -> float:
    gains = side["round_gains_pct"]
    return float(max(gains) - min(gains))


def test_where_both_measurements_are_tight_the_fix_agrees_with_the_edited_script() -> None:
    pairs = _floor_pairs()
    assert len({script for script, _ in pairs}) == 8 and len(pairs) == 20
    tight = [(s, p) for s, p in pairs
             if max(_spread(p["aiprof"]), _spread(p["twin"])) <= p["bound_points"]]
    assert len(tight) >= 5
    assert all(p["agree"] for _, p in tight), [(s, p["fix"]) for s, p in tight]


def test_every_disagreement_is_inside_the_rounds_own_spread() -> None:
    # Not met: 7 of 20 agree. Each miss has a side whose rounds spread wider than the band
    # it was judged by, so three rounds on this host cannot tell the two apart.
    pairs = _floor_pairs()
    misses = [p for _, p in pairs if not p["agree"]]
    assert sum(1 for _, p in pairs if p["agree"]) == 7 and len(misses) == 13
    for p in misses:
        assert max(_spread(p["aiprof"]), _spread(p["twin"])) > p["bound_points"], p["fix"]


def _comparisons(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(s["script"], c["fix"]): c for s in doc["scripts"] for c in s.get("comparison", [])}


def _fastest_step_us(doc: dict[str, Any], script: str) -> dict[tuple[int, str], float]:
    (entry,) = [s for s in doc["scripts"] if s["script"] == script]
    return {(r["round"], r["label"]): min(r["step_us"]) for r in entry["try"]["runs"]
            if r["status"] == "ok" and r["step_us"]}


def test_three_second_windows_agree_on_3_of_the_11_host_bound_pairs() -> None:
    doc = _load("h200_try_suite_floor3s.json")
    assert doc["protocol"]["min_timed_s"] == 3.0 and doc["protocol"]["statistic"] == "floor"
    agree = {key for key, c in _comparisons(doc).items() if c["agree"]}
    assert len(_comparisons(doc)) == 11 and agree == {
        ("bert_train", "fused_optimizer"), ("unet_train", "expandable_segments"),
        ("segmentation_train", "cudnn_benchmark")}


def test_the_mlps_fused_fix_runs_faster_than_its_twin_in_every_round() -> None:
    """Not noise: the twin's fastest step is above the fix's in all 6 rounds of two runs."""
    above = []
    for name in ("h200_try_suite_floor3s.json", "h200_try_suite_floor_a.json"):
        fastest = _fastest_step_us(_load(name), "mlp_train")
        rounds = sorted({r for r, label in fastest if label == "fused_optimizer_twin"})
        above += [100 * (fastest[(r, "fused_optimizer_twin")] / fastest[(r, "fused_optimizer")]
                         - 1) for r in rounds]
    assert len(above) == 6 and 8.0 < min(above) and max(above) < 19.2


def test_turns_of_live_processes_agreed_no_better() -> None:
    pinned = _load("h200_try_turns_pinned.json")
    unpinned = _load("h200_try_turns_unpinned.json")
    assert pinned["summary"] == {"num_pairs": 11, "num_judged": 11, "num_agree": 0}
    assert unpinned["summary"] == {"num_pairs": 5, "num_judged": 5, "num_agree": 1}
    (bert,) = [s for s in unpinned["scripts"] if s["script"] == "bert_train"]
    base = [statistics.median(r["step_us"]) for r in bert["try"]["runs"]
            if r["label"] == "base" and r["status"] == "ok"]
    assert len(base) == 12 and min(base) < 16.5e3 and max(base) > 22.4e3
