"""Every fix timed on the H200 outside the suite, in its protocol (the fix twins, the compiled
steps), is pooled into the suite's truths: converted from the recorded file, not edited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiprof.evaluation.labels import load_suite, timed_pairs_as_suite

DATA = Path(__file__).parents[1] / "data" / "diagnose"
SUITE = DATA / "counterfactual"
SOURCES = {
    "fix_twins/fix_twins.json": "labels-twins-1201.json",
    "fix_twins_0103/fix_twins.json": "labels-twins-0103.json",
    "compiled/compiled_steps.json": "labels-compiled-first.json",
    "compiled_second/compiled_steps.json": "labels-compiled-second.json",
    "compiled_third/compiled_steps.json": "labels-compiled-third.json",
    "compiled_fourth/compiled_steps.json": "labels-compiled-fourth.json",
    "compiled_fifth/compiled_steps.json": "labels-compiled-fifth.json",
    "compiled_sixth/compiled_steps.json": "labels-compiled-sixth.json",
    "fix_twins_0311/fix_twins.json": "labels-twins-0311.json",
    "read_feeders_twins/read_feeders_twins.json": "labels-twins-2033.json",
    "fix_twins_1033/fix_twins.json": "labels-twins-1033.json",
}
HELD_OUT = {"counterfactual_calls/compiled_steps.json"}
"""Timed files of workloads outside the suite (``scripts/h200/counterfactual/calls.py``),
scored in their own folder: their truths have no suite row to pool into."""


def test_every_timed_file_is_pooled() -> None:
    recorded = {str(p.relative_to(DATA)) for p in DATA.glob("*/fix_twins.json")}
    recorded |= {str(p.relative_to(DATA)) for p in DATA.glob("*/compiled_steps.json")}
    recorded |= {str(p.relative_to(DATA)) for p in DATA.glob("*/read_feeders_twins.json")}
    recorded -= HELD_OUT
    assert recorded == set(SOURCES)
    assert {p.name for p in SUITE.glob("labels-twins-*.json")} | {
        p.name for p in SUITE.glob("labels-compiled-*.json")} == set(SOURCES.values())


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_suite_labels_are_the_recorded_rounds_converted(source: str) -> None:
    categories = json.loads((SUITE / "labels-part1.json").read_text())["fix_categories"]
    recorded = json.loads((DATA / source).read_text())
    converted = json.loads((SUITE / SOURCES[source]).read_text())
    assert converted == timed_pairs_as_suite(recorded, categories)
    pooled = {w.name: w for w in load_suite(SUITE)}
    for row in converted["workloads"]:
        for fix in row["fixes"]:
            measured = next(f for f in pooled[row["workload"]].fixes if f.name == fix["name"])
            assert "sessions" in measured.note, (row["workload"], fix["name"])  # pooled


def test_a_round_gain_is_against_the_base_block_of_its_round() -> None:
    doc = {"pairs": [{"workload": "w", "fix": "tf32", "gain_pct": 25.0,
                      "rounds_ms": {"base": [10.0, 20.0], "tf32": [7.5, 16.0]}}]}
    fix = timed_pairs_as_suite(doc, {"tf32": "tensor_cores_unused"})["workloads"][0]["fixes"][0]
    assert fix["round_gain_pct"] == [25.0, 20.0] and fix["category"] == "tensor_cores_unused"


RECORDINGS = {"counterfactual_1202": ("labels-replicate-1202-part1.json",
                                      "labels-replicate-1202-part2.json"),
              "counterfactual_third": (
                  "labels-replicate-third-part1.json", "labels-replicate-third-part2.json",
                  "labels-graph-after-third.json",
                  "labels-graph-after-third-deeplabv3_mnv3_mask_train.json",
                  "labels-graph-after-third-rl_policy_item_sync.json",
                  "labels-graph-after-third-unet_bn_nchw_empty_cache_train.json"),
              "counterfactual_fourth": (
                  "labels-fourth-compile.json", "labels-fourth-rest.json",
                  "labels-fourth-rotated.json",
                  "labels-graph-after-fourth-efficientnet_b0_pageable_nchw_train.json",
                  "labels-graph-after-fourth-resnet50_pageable_bf16_infer.json"),
              "counterfactual_fifth": ("labels-fifth.json", "labels-fifth-compile.json"),
              "counterfactual_graphs_kept": ("labels-graphs-kept.json",),
              "counterfactual_sixth": ("labels-sixth.json",),
              "counterfactual_seventh": ("labels-seventh-a.json", "labels-seventh-b.json",
                                         "labels-seventh-c.json", "labels-seventh-compile.json",
                                         "labels-seventh-compile-host.json")}
"""Later recordings of the whole suite: each scored alone in its own folder, its every fix
pooled into the first recording's truths. The third session's ``graph-after`` files time
CUDA graphs once the sync or ``empty_cache`` that kept a step from being captured is fixed,
each workload in its own process (two of them failed with an illegal memory access). The
fourth recorded truths only (``--no-traces``), with the rounds rotated and up to 15 of them; its
``graph-after`` files time graphs once the pageable copies are pinned and prefetched. The
fifth (2026-12-02 21:22 UTC) timed every fix but ``torch.compile`` on all 26 workloads, on a
host that ran rl_policy's launch-bound step at 22 ms where the others had taken 36-55. The
sixth (2026-12-03 07:05 UTC) timed the CUDA graphs again, and the fixes they are timed after,
once ``protocol.graphed`` kept each graph's step alive; it also timed the graphs of the two
``empty_cache`` workloads for the first time, on a host faster still (rl_policy's step 16.7
ms) and quiet (its rounds within a point). The sixth with traces (07:24 UTC) recorded seven
workloads and every fix on a slow host again (llama_fp32's base 25.5 ms). The seventh
(2026-12-03 09:54-10:10 UTC) recorded all 26 so, traces and every fix in one run, in three calls
on one machine, compile on two of them apart (``--no-traces``); compile on the six whose step
waits on host work, which the suite leaves out by default, was timed at 10:40 UTC on another
machine (``--compile-host-waiting``), to check the compile claims the seventh's records make
there."""


@pytest.mark.parametrize(("folder", "name"),
                         [(f, n) for f, names in sorted(RECORDINGS.items()) for n in names])
def test_a_later_recordings_truths_are_pooled_as_recorded(folder: str, name: str) -> None:
    from aiprof.evaluation.labels import truths_only

    assert {p.name for p in (DATA / folder).glob("labels*.json")} == set(RECORDINGS[folder])
    recorded = json.loads((DATA / folder / name).read_text())
    assert json.loads((SUITE / name).read_text()) == truths_only(recorded)
    assert all("traces" in row for row in recorded["workloads"] if "error" not in row)


@pytest.mark.parametrize("source", sorted(HELD_OUT))
def test_a_held_out_folders_timed_pairs_are_its_labels_converted(source: str) -> None:
    categories = json.loads((SUITE / "labels-part1.json").read_text())["fix_categories"]
    recorded = json.loads((DATA / source).read_text())
    folder = (DATA / source).parent
    assert json.loads((folder / "labels-calls-compiled.json").read_text()) == (
        timed_pairs_as_suite(recorded, categories))
