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
