"""The score of issue 15: its three checks on hand-built labels, and the diagnosis scored on
the recorded suites (the counterfactual suite once recorded, the one-fix-per-case suite now)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from aiprof.diagnose import diagnose
from aiprof.errors import InputError
from aiprof.evaluation import Claim, MeasuredFix, load_suite, score_suite, score_workload
from aiprof.evaluation.score import SuiteScore

DATA = Path(__file__).parents[1] / "data" / "diagnose"
COUNTERFACTUAL = DATA / "counterfactual"
REPLICATE = DATA / "counterfactual_1202"
"""The suite's second recording (H200, 2026-12-02 05:30-05:40 UTC): every workload and fix
again, traces and truths of one session, recorded after every model it checks."""
THIRD = DATA / "counterfactual_third"
FOURTH = DATA / "counterfactual_fourth"
FIFTH = DATA / "counterfactual_fifth"
SIXTH = DATA / "counterfactual_sixth"
SEVENTH = DATA / "counterfactual_seventh"
"""The seventh recording (H200, 2026-12-03 09:54-10:10 UTC): all 26 workloads, each one's
``aiprof.profile`` record and every fix timed in the same run, minutes apart, in three calls
on one machine (``labels-seventh-{a,b,c}.json``; compile on two in ``-compile``; compile on
the six whose step waits on host work in ``-compile-host``, 10:40 UTC, another machine)."""
"""The fourth recording (H200, 2026-12-02 17:13-17:30 UTC): truths only (no traces), every
workload and fix timed with the rounds rotated and fast steps given up to 15 rounds."""


def fix(category: str, gain: float | None, name: str = "") -> MeasuredFix:
    return MeasuredFix(name or category, category, gain)


FIXES = [fix("cpu_bound", 3.0), fix("tensor_cores_unused", 12.0, "tf32"),
         fix("tensor_cores_unused", 40.0, "bf16"), fix("dataloader", 0.0),
         fix("host_sync", None), fix("layout_conversion", 5.0)]


def test_a_category_is_measured_by_its_best_fix_and_unknown_fixes_are_left_out() -> None:
    score = score_workload("w", FIXES, [])
    assert score.measured_pct == {"cpu_bound": 3.0, "tensor_cores_unused": 40.0,
                                  "dataloader": 0.0, "layout_conversion": 5.0}


def test_top1_is_the_category_of_the_best_fix() -> None:
    hit = score_workload("w", FIXES, [Claim("tensor_cores_unused", 30.0), Claim("cpu_bound", 2.0)])
    miss = score_workload("w", FIXES, [Claim("cpu_bound", 30.0),
                                       Claim("tensor_cores_unused", 20.0)])
    silent = score_workload("w", FIXES, [])
    assert (hit.best_category, hit.top1_ok) == ("tensor_cores_unused", True)
    assert miss.top1_ok is False and silent.top1_ok is False


def test_top1_does_not_apply_below_15_pct() -> None:
    small = [fix("cpu_bound", 14.9), fix("host_sync", 3.0)]
    assert score_workload("w", small, [Claim("host_sync", 1.0)]).top1_ok is None
    assert score_workload("w", [fix("cpu_bound", 15.0)], [Claim("cpu_bound", 1.0)]).top1_ok


def test_gain_is_within_30_pct_relative_of_the_measured_gain() -> None:
    def check(estimate: float | None) -> bool:
        claims = [] if estimate is None else [Claim("tensor_cores_unused", estimate)]
        (only,) = [c for c in score_workload("w", FIXES, claims).gain_checks
                   if c.category == "tensor_cores_unused"]
        return only.ok

    assert check(52.0) and check(28.0) and check(40.0)
    assert not check(52.5) and not check(27.5) and not check(None)


def test_gain_checks_only_fixes_above_5_pct() -> None:
    checks = score_workload("w", FIXES + [fix("allocator_churn", 5.1)], []).gain_checks
    assert [c.category for c in checks] == ["allocator_churn", "tensor_cores_unused"]
    assert all(c.estimated_gain_pct is None and not c.ok for c in checks)


def test_false_positive_is_a_claim_over_10_pct_on_a_fix_of_5_pct_or_less() -> None:
    claims = [Claim("tensor_cores_unused", 40.0), Claim("cpu_bound", 10.5),
              Claim("dataloader", 11.0), Claim("layout_conversion", 10.0),
              Claim("host_sync", 50.0), Claim("low_occupancy", 20.0)]
    score = score_workload("w", FIXES, claims)
    # cpu_bound measured 3%, dataloader 0% (nothing to change); layout_conversion claims only
    # 10.0 (not > 10); host_sync's fix is unknown and low_occupancy has none: no check.
    assert [c.category for c in score.false_positives] == ["cpu_bound", "dataloader"]
    assert [c.category for c in score.unmeasured_claims] == ["host_sync", "low_occupancy"]
    assert not score_workload("w", [fix("cpu_bound", 5.1)],
                              [Claim("cpu_bound", 50.0)]).false_positives


def test_suite_totals_and_acceptance() -> None:
    good = score_workload("a", [fix("cpu_bound", 60.0)], [Claim("cpu_bound", 55.0)])
    wrong = score_workload("b", [fix("cpu_bound", 2.0), fix("dataloader", 30.0)],
                           [Claim("cpu_bound", 40.0), Claim("dataloader", 30.0)])
    suite = score_suite([good, wrong])
    assert (suite.top1_hits, suite.top1_cases) == (1, 2)
    assert (suite.gain_hits, suite.gain_cases) == (2, 2)
    assert suite.false_positives == 1 and not suite.accepted
    assert score_suite([good]).accepted and not SuiteScore(()).accepted


def write_labels(folder: Path, doc: dict[str, object], name: str = "labels-part1.json") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(doc))


def test_suite_labels_read_every_fix_and_skip_workloads_without_traces(tmp_path: Path) -> None:
    fixes = [{"name": "tf32", "category": "tensor_cores_unused", "applicable": True,
              "gain_pct": 41.5},
             {"name": "cuda_graph", "category": "cpu_bound", "applicable": True,
              "skipped": "not capturable: a DataLoader", "gain_pct": None},
             {"name": "sdpa", "category": "unfused_elementwise", "applicable": False,
              "reason": "no attention in the model", "gain_pct": 0.0}]
    doc = {"workloads": [
        {"workload": "w1", "causes": ["tf32"], "fixes": fixes,
         "traces": {"torch": "w1.torch.trace.json.gz", "aiprof": "w1.aiprof"}},
        {"workload": "w2", "causes": [], "fixes": fixes,
         "traces": {"torch": "w2.torch.trace.json.gz", "aiprof": "w2.aiprof"}},
        {"workload": "w3", "error": "TimeoutError()"}]}
    write_labels(tmp_path, doc)
    (tmp_path / "w1.aiprof").mkdir()
    (only,) = load_suite(tmp_path)
    assert only.name == "w1" and only.trace == tmp_path / "w1.aiprof"
    (tmp_path / "w2.torch.trace.json.gz").write_bytes(b"")  # w2's capture failed: plain trace
    assert [w.trace.name for w in load_suite(tmp_path)] == ["w1.aiprof", "w2.torch.trace.json.gz"]
    assert [(f.name, f.gain_pct) for f in only.fixes] == [
        ("tf32", 41.5), ("cuda_graph", None), ("sdpa", 0.0)]
    assert only.fixes[1].note.startswith("not capturable")


def test_labels_that_are_not_a_suite_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no labels"):
        load_suite(tmp_path)
    write_labels(tmp_path, {"something": []}, "labels.json")
    with pytest.raises(InputError, match="not a suite"):
        load_suite(tmp_path)


@cache
def claims_of(trace: Path) -> tuple[Claim, ...]:
    return tuple(Claim(f.category, f.estimated_gain_pct) for f in diagnose(trace).findings)


def suite_score(folder: Path, pattern: str = "labels*.json") -> SuiteScore:
    return score_suite([score_workload(w.name, w.fixes, claims_of(w.trace))
                        for w in load_suite(folder, pattern)])


def test_one_fix_suite_scores_as_its_own_checks() -> None:
    """The H200 suite of one planted fix per case (labels.json), read as counterfactual labels
    whose other fixes are unknown: every planted case is in the top-1 and gain checks, as
    test_real_traces checks them case by case, and no claim can be a false positive."""
    cases = [c for c in json.loads((DATA / "labels.json").read_text())["cases"]
             if c["category"] != "none"]
    suite = suite_score(DATA)
    assert suite.gain_cases == sum(c["gain_pct"] > 5 for c in cases) == len(suite.workloads)
    assert suite.top1_cases == sum(c["gain_pct"] >= 15 for c in cases)
    assert suite.false_positives == 0
    assert suite.accepted, (suite.top1_hits, suite.gain_hits)


def test_one_fix_labels_convert_to_the_suite_format(tmp_path: Path) -> None:
    """The diagnose suite's labels written in the counterfactual format (traces by absolute
    path) read back as the same workloads as read directly."""
    from aiprof.evaluation.labels import single_fix_as_suite

    converted = single_fix_as_suite(json.loads((DATA / "labels.json").read_text()))
    for row in converted["workloads"]:
        row["traces"]["aiprof"] = str(DATA / row["traces"]["aiprof"])
    write_labels(tmp_path, converted, "labels.json")
    assert load_suite(tmp_path) == load_suite(DATA)
    assert len(converted["workloads"]) == 10  # 12 cases, 2 healthy twins without a fix


needs_counterfactual = pytest.mark.skipif(
    not list(COUNTERFACTUAL.glob("labels*.json")),
    reason="the counterfactual suite has not been recorded on the H200 yet")


@cache
def counterfactual_score() -> SuiteScore:
    """The committed suite's score, computed once for the floors and the acceptance."""
    return suite_score(COUNTERFACTUAL)


@needs_counterfactual
def test_counterfactual_suite_holds_its_floors() -> None:
    """What the models reach today (parts 1 and 2, 26 workloads, the re-run of the nine
    noisiest, pooled, torch.compile measured on the 13 whose part had skipped it, and the
    fixes measured in 3 rounds that spread over 15 points re-measured in 6; H200,
    2026-12-01; the compile model's host and convolution costs, the NHWC BatchNorm model, and
    a CUDA graph ranked after the fix it needs first, and the fix twins' timed rounds pooled
    in, since; then the second recording's every fix pooled in, 2026-12-02, which took gain
    from 35/48 to 30/47; then the third recording's, with CUDA graphs timed once the sync
    that kept three steps from being captured is removed, which took gain to 34/47, top-1 to
    21/26 and false positives to 2; then the fourth recording's truths (rotated rounds, up to
    15), which took gain to 31/47 and top-1 to 21/25 (resnet34's best fix fell under 15%), and
    the steps' GPU work counted without the backlog queued before them, which took false
    positives to 3; then graphs timed after the pageable copies are prefetched, which made
    efficientnet_b0's and resnet50's graphs, claimed 20.5% and 25.2% and measured 1.4 and 2.6
    points, false positives 4 and 5, beside distilbert's graphs after its syncs, claimed
    54.8%, resnet34's torch.compile, claimed 24.4%, and gpt2_vocab's graphs, claimed 13.2%,
    all measured <= 5%; then the ops that only fed a removed read removed with it, and the
    findings ranked by gain again, a graph above the sync it needs fixed first (gain 32/46:
    rl_policy's reads, timed again with 15 rounds, pooled to 4.6%, under the 5% of a check);
    then a fifth recording's truths (every fix, on a host twice as fast on the launch-bound
    steps), which took top-1 to 22/26, gain to 31/47 (compile's truths moved most: bert_small
    17.1 to 9.6, efficientnet_b0 9.3 to 20.7) and false positives to 4 (resnet34's compile, a
    hit at 19.9); then the graphs timed again with their step kept alive (2026-12-03, a host
    about twice as fast again and quiet: llama_fp32's graph after empty_cache, first timed,
    4.2 points against the 37.8 its slow-host trace claims; bert_small's graph -5.8% in 15
    rounds, which outweigh the other sessions' 3-5), which took top-1 to 21/25, gain to 31/45
    and false positives to 6; then the seventh recording's truths (every workload and fix,
    2026-12-03 09:54-10:10 UTC, a slower host: llama_fp32's base 26.3 ms, resnet34's rounds
    18.9-29.1), which took top-1 to 20/24 and gain to 29/45: a change that loses a hit, or adds
    a false positive, fails here, apart from the acceptance below, which still fails."""
    suite = counterfactual_score()
    assert len(suite.workloads) >= 24 and suite.gain_cases >= 45
    assert (suite.top1_hits >= 20 and suite.gain_hits >= 29
            and suite.false_positives <= 6), (
        suite.top1_hits, suite.gain_hits, suite.false_positives)


@pytest.mark.parametrize(("folder", "pattern", "floors"), [
    (COUNTERFACTUAL, "labels-part*.json", (16, 27, 0)),
    (REPLICATE, "labels*.json", (19, 25, 1)),
    (THIRD, "labels*.json", (20, 26, 2)),
    (SEVENTH, "labels*.json", (24, 35, 2))],
    ids=["first session", "second session", "third", "seventh"])
def test_each_recording_holds_its_floors_on_its_own_sessions_truths(
        folder: Path, pattern: str, floors: tuple[int, int, int]) -> None:
    """Each recording scored against the truths timed in the session that recorded it
    (first: top-1 17/21, gain 27/41, 0 false positives; second: 21/22, 25/44, 0; third, whose
    host slowed launch-bound eager blocks up to 2.5x: 19/25, 25/47, 2; with the backlog
    queued before the steps left out of their GPU work, the first gained a hit and lost its
    false positive, the second lost a hit, the third lost a false positive; with the ops that
    only fed a removed read removed with it and the findings ranked by gain again: first
    16/21, 27/41, 0; second 19/22, 25/44, 1 (distilbert's reads, claimed 16.1%, measured 2.1%
    there in rounds of -20.5, 2.1 and +30.1%); third 20/25, 26/47, 2; the seventh 24/26,
    35/58, 3, then 1 once compile paid its graph calls per call of the model, the rollouts'
    policy 32 a step, then 2 once the ops queued before the steps changed with their twins of
    the last step: efficientnet_b0's compile 10.0 -> 11.1% against 1.7% measured in that
    session, 15.0% pooled): what a model change
    does to recordings none of the models was fitted to shows on the second and third."""
    suite = suite_score(folder, pattern)
    top1, gain, false_positives = floors
    assert len(suite.workloads) == 26
    assert (suite.top1_hits >= top1 and suite.gain_hits >= gain
            and suite.false_positives <= false_positives), (
        suite.top1_hits, suite.gain_hits, suite.false_positives)


SIXTH_WORKLOADS = ("bert_small_fp32_train", "gpt2_vocab_bf16_train",
                   "resnet50_pageable_bf16_infer", "efficientnet_b0_pageable_nchw_train",
                   "llama_fp32_empty_cache_train", "deeplabv3_mnv3_mask_train",
                   "vit_small_fp32_train")
"""The seven the sixth recording reached (2026-12-03 07:24 UTC, traces and every fix, compile
on the first three and efficientnet_b0), chosen for their misses on the pooled truths."""


def _on(suite: SuiteScore, names: tuple[str, ...]) -> tuple[int, int, int, int, int]:
    """top-1 hits and cases, gain hits and cases, false positives, over ``names`` only."""
    picked = [w for w in suite.workloads if w.workload in names]
    top1 = [w.top1_ok for w in picked if w.top1_ok is not None]
    gains = [c.ok for w in picked for c in w.gain_checks]
    return (sum(top1), len(top1), sum(gains), len(gains),
            sum(len(w.false_positives) for w in picked))


def test_the_sixth_recording_meets_its_own_truths_where_the_pool_misses() -> None:
    """GIVEN the sixth recording, whose traces and truths one session timed minutes apart, WHEN
    its seven workloads are scored on that session's truths, THEN they pass 9 of 12 gain
    checks, top-1 4 of 6, with 2 false positives; the first recording's traces of the same
    seven on the truths of every session pooled pass 4 of 13 (top-1 4 of 6, 5 false
    positives): the pool, of hosts up to twice as fast, is what the gain checks of these
    host-bound steps miss (docs/diagnose.md, "A sixth recording")."""
    own = suite_score(SIXTH, "labels*.json")
    assert sorted(w.workload for w in own.workloads) == sorted(SIXTH_WORKLOADS)
    assert _on(own, SIXTH_WORKLOADS) == (4, 6, 9, 12, 2)
    assert _on(counterfactual_score(), SIXTH_WORKLOADS) == (4, 6, 4, 13, 5)


def test_the_two_sessions_truths_agree_only_as_far_as_their_hosts() -> None:
    """The ceiling of the gain check: one session's measured gains taken as the estimates of
    the other's pass 28 of its 42 checks (67%), and 29 of 41 the other way, below the 80% the
    acceptance asks of a model (docs/diagnose.md, "Two recordings of the suite"); the third
    session's, timed on a noisier host, agree less: 22 of 43 and 25 of 41 with the first, 28
    of 45 and 29 of 44 with the second."""
    from aiprof.evaluation.reproducibility import truth_agreement

    agreement = truth_agreement(load_suite(COUNTERFACTUAL, "labels-part*.json"),
                                load_suite(REPLICATE))
    assert (agreement.second_hits, agreement.second_checks) == (28, 42)
    assert (agreement.first_hits, agreement.first_checks) == (29, 41)
    third = load_suite(THIRD)
    with_first = truth_agreement(load_suite(COUNTERFACTUAL, "labels-part*.json"), third)
    assert (with_first.second_hits, with_first.second_checks) == (22, 43)
    assert (with_first.first_hits, with_first.first_checks) == (25, 41)
    with_second = truth_agreement(load_suite(REPLICATE), third)
    assert (with_second.second_hits, with_second.second_checks) == (28, 45)
    assert (with_second.first_hits, with_second.first_checks) == (29, 44)


def test_the_fourth_sessions_rotated_rounds_agree_with_the_others_no_better_than_71_pct() -> None:
    """The fourth recording (truths only, 2026-12-02 17:13-17:30 UTC) timed with the rounds
    rotated and fast steps given up to 15, its graphs after the pageable copies included: the
    others' gains taken as its estimates pass 27 of 40 (the first's), 29 of 42 (the second's)
    and 32 of 45 (the third's); its gains as theirs, 28 of 41, 31 of 44 and 31 of 47. 66-71%:
    more rounds did not lift the ceiling the host's changing speed puts on the gain check
    (docs/diagnose.md)."""
    from aiprof.evaluation.labels import load_truths
    from aiprof.evaluation.reproducibility import truth_agreement

    fourth = load_truths(FOURTH)
    assert len(fourth) == 26
    expected = {"first": ((27, 40), (28, 41)), "second": ((29, 42), (31, 44)),
                "third": ((32, 45), (31, 47))}
    for name, other in [("first", load_suite(COUNTERFACTUAL, "labels-part*.json")),
                        ("second", load_suite(REPLICATE)), ("third", load_suite(THIRD))]:
        agreement = truth_agreement(other, fourth)
        assert ((agreement.second_hits, agreement.second_checks),
                (agreement.first_hits, agreement.first_checks)) == expected[name], name


def test_the_fifth_sessions_truths_agree_with_the_others_no_better_than_64_pct() -> None:
    """The fifth recording (truths only, 2026-12-02 21:22 UTC, compile at 21:30) ran on a host
    that took rl_policy's launch-bound step 22 ms (36-55 in the others) and on which
    resnet34's channels_last gained 45% (−5 to 13% before) and its compile 46.7% (≤ 10.5).
    The others' gains as its estimates pass 23 of 42, 25 of 43, 24 of 46 and 31 of 49 of its
    checks (first to fourth); its gains as theirs 23 of 41, 25 of 44, 25 of 47 and 30 of 47."""
    from aiprof.evaluation.labels import load_truths
    from aiprof.evaluation.reproducibility import truth_agreement

    fifth = load_truths(FIFTH)
    assert len(fifth) == 26
    expected = {"first": ((23, 42), (23, 41)), "second": ((25, 43), (25, 44)),
                "third": ((24, 46), (25, 47)), "fourth": ((31, 49), (30, 47))}
    for name, other in [("first", load_suite(COUNTERFACTUAL, "labels-part*.json")),
                        ("second", load_suite(REPLICATE)), ("third", load_suite(THIRD)),
                        ("fourth", load_truths(FOURTH))]:
        agreement = truth_agreement(other, fifth)
        assert ((agreement.second_hits, agreement.second_checks),
                (agreement.first_hits, agreement.first_checks)) == expected[name], name


def test_truth_agreement_compares_only_fixes_both_sessions_measured() -> None:
    from aiprof.evaluation import LabelledWorkload
    from aiprof.evaluation.reproducibility import truth_agreement

    def workload(*fixes: MeasuredFix) -> LabelledWorkload:
        return LabelledWorkload("w", "", (), fixes, Path("w.aiprof"))

    first = workload(fix("unfused_elementwise", 20.0, "sdpa"),
                     fix("unfused_elementwise", None, "compile"), fix("cpu_bound", 40.0),
                     fix("host_sync", 8.0))
    second = workload(fix("unfused_elementwise", 19.0, "sdpa"),
                      fix("unfused_elementwise", 70.0, "compile"), fix("cpu_bound", 25.0),
                      fix("host_sync", 2.0))
    agreement = truth_agreement([first], [second])
    assert [(p.category, p.first_pct, p.second_pct) for p in agreement.pairs] == [
        ("cpu_bound", 40.0, 25.0), ("host_sync", 8.0, 2.0), ("unfused_elementwise", 20.0, 19.0)]
    # the second's checks: cpu_bound (40 against 25: apart), fusion (20 against 19: ok)
    assert (agreement.second_hits, agreement.second_checks) == (1, 2)
    # the first's: cpu_bound (25 against 40), host_sync (2 against 8), fusion (19 against 20)
    assert (agreement.first_hits, agreement.first_checks) == (1, 3)


@needs_counterfactual
@pytest.mark.xfail(strict=True, reason=(
    "parts 1 and 2 (26 workloads, H200, 2026-12-01), the nine noisiest re-run and pooled, "
    "compile measured on the 13 that had skipped it, the noisy 3-round fixes re-measured, "
    "the second to fifth recordings and the read twins (2026-12-02), the graphs timed "
    "again and the seventh recording (2026-12-03) pooled: top-1 20/24 (83%), gain within "
    "±30% 29/45 (64%), 6 false positives; the seventh scored on its own truths: 24/26 (92%), "
    "35/58 (60%), 2 (compile on resnet18_b4 and efficientnet_b0; the rollouts' two went with "
    "their policy's 32 graph calls a step); the sessions' own truths agree "
    "with each other in 51-71% of the gain checks; docs/diagnose.md lists every miss"))
def test_counterfactual_suite_meets_issue_15_acceptance() -> None:
    suite = counterfactual_score()
    assert suite.top1_pct >= 90.0 and suite.gain_pct >= 80.0 and suite.false_positives == 0, (
        suite.top1_hits, suite.top1_cases, suite.gain_hits, suite.gain_cases,
        suite.false_positives)


def test_parts_merge_into_one_labels_file_with_each_workload_once(tmp_path: Path) -> None:
    from aiprof.evaluation.labels import merged

    measured = {"workload": "w1", "fixes": [], "traces": {"aiprof": "w1.aiprof"}}
    write_labels(tmp_path, {"device": "H200", "workloads": [
        {"workload": "w1", "error": "skipped: time budget"}, {"workload": "w2", "fixes": []}]})
    write_labels(tmp_path, {"device": "H200", "workloads": [measured]}, "labels-rerun.json")
    doc = merged(tmp_path)
    assert sorted(doc["parts"]) == ["labels-part1.json", "labels-rerun.json"]
    assert [w["workload"] for w in doc["workloads"]] == ["w1", "w2"]
    assert doc["workloads"][0] == measured


MISSES = {"a": (0, 0), "b": (0, 1), "d": (0, 0)}
"""Top-1 and gain misses of the other recordings of the one-fix suite, as
test_real_traces.KNOWN_MISSES lists them case by case (b: the .item() gain; d's empty_cache
top finding is a hit since a CUDA graph ranks after the allocator churn it cannot capture)."""


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MISSES))
def test_one_fix_suites_score_their_known_misses(name: str) -> None:
    suite = suite_score(DATA / "more_suites" / name)
    top_misses, gain_misses = MISSES[name]
    assert suite.top1_cases - suite.top1_hits == top_misses
    assert suite.gain_cases - suite.gain_hits == gain_misses
    assert suite.false_positives == 0


def test_a_category_with_an_unmeasured_fix_is_no_false_positive() -> None:
    """SDPA had nothing to change (0%) and torch.compile was not measured: the fusion
    category's best fix is unknown, so a fusion claim is in no false-positive check."""
    fixes = [fix("unfused_elementwise", 0.0, "sdpa"), fix("unfused_elementwise", None, "compile"),
             fix("cpu_bound", 2.0)]
    score = score_workload("w", fixes, [Claim("unfused_elementwise", 30.0),
                                        Claim("cpu_bound", 12.0)])
    assert [c.category for c in score.false_positives] == ["cpu_bound"]
    assert [c.category for c in score.unmeasured_claims] == ["unfused_elementwise"]


def test_a_fix_measured_in_two_sessions_is_the_median_of_their_paired_rounds(
        tmp_path: Path) -> None:
    """The first session ran on a slow host (its graph gained 15.6, 33.2, 3.4%), the re-run on a
    fast one (0.1, -0.2, 0.0): pooled, the median of the six paired rounds; a fix measured in
    one session only keeps its gain; the traces are the first session's."""
    first = {"workload": "w", "traces": {"aiprof": "w.aiprof"}, "fixes": [
        {"name": "cuda_graph", "category": "cpu_bound", "gain_pct": 15.6,
         "round_gain_pct": [15.6, 33.2, 3.4]},
        {"name": "tf32", "category": "tensor_cores_unused", "gain_pct": 0.2,
         "round_gain_pct": [0.2, 0.1, 0.3]}]}
    rerun = {"workload": "w", "traces": {"aiprof": "other.aiprof"}, "fixes": [
        {"name": "cuda_graph", "category": "cpu_bound", "gain_pct": 0.0,
         "round_gain_pct": [0.1, -0.2, 0.0]}]}
    write_labels(tmp_path, {"workloads": [first]})
    write_labels(tmp_path, {"workloads": [rerun]}, "labels-rerun.json")
    (tmp_path / "w.aiprof").mkdir()
    (w,) = load_suite(tmp_path)
    fixes = {f.name: f for f in w.fixes}
    assert fixes["cuda_graph"].gain_pct == pytest.approx((0.1 + 3.4) / 2)
    assert "6 paired rounds over 2 sessions" in fixes["cuda_graph"].note
    assert fixes["tf32"].gain_pct == 0.2 and w.trace == tmp_path / "w.aiprof"


def test_a_fix_measured_only_in_a_file_without_traces_is_taken_with_the_first_traces(
        tmp_path: Path) -> None:
    """A re-run of one fix that records no traces (``--only compile --no-traces``) sorts before
    the part whose traces it pools with: the workload keeps the part's traces and takes the
    re-run's measurement where the part skipped that fix."""
    part = {"workload": "w", "traces": {"aiprof": "w.aiprof"}, "fixes": [
        {"name": "compile", "category": "unfused_elementwise", "gain_pct": None,
         "skipped": "not measured: the part's compile budget (100 s) is spent"},
        {"name": "tf32", "category": "tensor_cores_unused", "gain_pct": 4.0,
         "round_gain_pct": [4.0, 3.0, 5.0]}]}
    rerun = {"workload": "w", "traces": {}, "fixes": [
        {"name": "compile", "category": "unfused_elementwise", "gain_pct": 21.4,
         "round_gain_pct": [20.0, 21.4, 23.0]},
        {"name": "tf32", "category": "tensor_cores_unused", "gain_pct": None,
         "skipped": "not measured: this run measured only compile"}]}
    write_labels(tmp_path, {"workloads": [rerun]}, "labels-a-compile.json")
    write_labels(tmp_path, {"workloads": [part]})
    (tmp_path / "w.aiprof").mkdir()
    (w,) = load_suite(tmp_path)
    fixes = {f.name: f.gain_pct for f in w.fixes}
    assert fixes == {"compile": 21.4, "tf32": 4.0} and w.trace == tmp_path / "w.aiprof"
