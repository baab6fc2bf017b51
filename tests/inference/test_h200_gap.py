"""The gap between batches, simulated on the committed H200 runs of 2026-12-02 03:34 and 04:19
UTC (``SimulationOptions.gap_us``), out of sample for every point compared.

Neither run measured the gap per batch (``StackCosts.gap_under_load_us`` came after them). The
04:19 run recorded its calibration run's mean forming time (60% of capacity), so a gap is found
there: the one that makes the simulated calibration run form batches as long as the real one
did (``gap_replay.calibration_gap_us``). For the one-instance models that gives 105.7 us
(ResNet-50 FP32) and 91.4 us (BERT-base FP32); for the two-instance models, whose calibration
batches mostly wait for the delay with an instance free, 780.6 and 291.7 us: their forming
time holds the delay timer's lateness too (87-211 us per batch in the closed-loop runs of 1-8
clients, where every batch waits the delay), which one gap cannot stand for. The gap is the
serving path's (the same Python between any model's batches), so each run is replayed with the
median of the one-instance models' calibration gaps, 98.5 us, for every model: fitted to no
point compared; the 03:34 run, 45 minutes before on the same serving code, takes it too.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from tests.inference.gap_replay import (
    calibration_forming_us,
    calibration_gap_us,
    errors_pct,
    replay,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "inference"
pytestmark = pytest.mark.slow  # about 6 s: 76 simulations of the recorded points
LOADS = ("40% of capacity", "80% of capacity")


def _runs(name):
    document = json.loads((DATA / f"h200_serving_{name}.json").read_text())
    return {(r["model"], r["dtype"]): r["comparison"] for r in document["runs"]}



@pytest.fixture(scope="module")
def replayed():
    """Per run, per (model, dtype, load): (P50, P99) error without the gap, with it; and the
    calibration gaps of 04:19."""
    fits = {key: calibration_gap_us(result) for key, result in _runs("0419").items()
            if result["num_instances"] == 1}
    gap = statistics.median(fits.values())
    out = {}
    for name in ("0334", "0419"):
        for key, result in _runs(name).items():
            for point in result["open_loop"]:
                as_run = replay(result, point)
                assert as_run.latency_p99_us == pytest.approx(  # the replay is the record's
                    point["simulated"]["latency_p99_us"])
                with_gap = replay(result, point, gap_us=(gap,))
                out[name, *key, point["label"]] = (errors_pct(as_run, point),
                                                   errors_pct(with_gap, point))
    return fits, gap, out


def _within(errors):
    return all(abs(e) <= 10 for e in errors)


def test_the_calibration_gap_of_one_instance_is_the_servers_and_of_two_is_not(replayed):
    fits, gap, _ = replayed
    assert fits["resnet50", "float32"] == pytest.approx(105.7, abs=0.5)
    assert fits["bert-base", "float32"] == pytest.approx(91.4, abs=0.5)
    assert gap == pytest.approx(98.5, abs=0.5)
    for key in (("resnet50", "bfloat16"), ("bert-base", "bfloat16")):  # two instances
        result = _runs("0419")[key]
        assert result["num_instances"] == 2
        assert calibration_forming_us(result, 250.0) < result["stack"]["forming_under_load_us"]


@pytest.mark.parametrize(("run", "before", "after"), [("0334", 6, 7), ("0419", 7, 8)])
def test_the_gap_brings_more_points_within_10_pct_and_takes_none_out(replayed, run, before,
                                                                     after):
    """03:34: 6 -> 7 of 8 (BERT-base FP32 at 80%: P99 -10.2 -> -8.8%; ResNet-50 BF16 at 40%,
    a stall, stays at -47.8%); 04:19: 7 -> 8 of 8 (ResNet-50 FP32 at 80%: P50 -14.4 -> -6.4%,
    the miss of that run). No point within 10% without the gap leaves it with the gap."""
    _, _, out = replayed
    points = {k[1:]: v for k, v in out.items() if k[0] == run}
    assert len(points) == 8
    assert sum(_within(plain) for plain, _ in points.values()) == before
    assert sum(_within(gapped) for _, gapped in points.values()) == after
    assert all(_within(gapped) for plain, gapped in points.values() if _within(plain))
    # and none within 10% gets worse by more than 1.6 points (03:34 ResNet-50 BF16 at 80%,
    # P99 -6.1 -> -7.6%, the most)
    assert all(abs(g) - abs(p) <= 1.6 for plain, gapped in points.values() if _within(plain)
               for p, g in zip(plain, gapped, strict=True))


def test_the_misses_the_gap_settles(replayed):
    _, _, out = replayed
    plain, gapped = out["0419", "resnet50", "float32", LOADS[1]]
    assert plain[0] < -14 and -7 < gapped[0] < -6
    plain, gapped = out["0334", "bert-base", "float32", LOADS[1]]
    assert plain[1] < -10 < gapped[1]
    plain, gapped = out["0334", "resnet50", "bfloat16", LOADS[0]]  # a stall: no gap settles it
    assert plain[1] == pytest.approx(gapped[1], abs=0.1) and gapped[1] < -40
