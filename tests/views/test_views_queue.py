"""GIVEN hand-built launches with known waits WHEN the queue is measured THEN the series and
the empty shares match the hand count; on the public traces HTA 0.5's summary is reproduced."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import DATA, require
from views_synth import Builder

from aiprof import load_trace
from aiprof.analysis.queue import queue_length
from aiprof.cli.main import main

HTA = json.loads((DATA / "views" / "hta_0.5.0.json").read_text())


@pytest.fixture
def three_queued(tmp_path: Path) -> Path:
    """Three kernels launched at 10, 12, 14 run back to back 20-50; step 0-100."""
    b = Builder()
    b.step(1, 0, 100)
    for i in range(3):
        b.kernel("k", 10 + 2 * i, 20 + 10 * i, 10)
    return b.write(tmp_path / "q.json")


def test_series_and_shares_match_the_hand_count(three_queued: Path) -> None:
    (s,) = queue_length(load_trace(three_queued)).streams
    assert s.ts_us.tolist() == [10, 12, 14, 20, 30, 40]
    assert s.length.tolist() == [1, 2, 3, 2, 1, 0]
    assert s.hta_max == 3 and s.hta_min == 0
    # waiting 10-40 (30 of 100 µs); waiting or running 10-50 (40 of 100)
    assert s.empty_pct == pytest.approx(70.0)
    assert s.empty_idle_pct == pytest.approx(60.0)
    # time mean: 1*2 + 2*2 + 3*6 + 2*10 + 1*10 = 54 µs·ops over 100 µs
    assert s.time_mean == pytest.approx(0.54)


def test_json_and_pandas(three_queued: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["queue", "--json", "--series", str(three_queued)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "aiprof.queue/1"
    stream = doc["ranks"][0]["streams"][0]
    assert stream["length"] == [1, 2, 3, 2, 1, 0] and stream["empty_pct"] == pytest.approx(70)
    pytest.importorskip("pandas")
    result = queue_length(load_trace(three_queued))
    assert result.to_pandas()["empty_pct"].tolist() == pytest.approx([70.0])
    assert result.series_to_pandas()["length"].tolist() == [1, 2, 3, 2, 1, 0]


CASES = sorted({(folder, row["file"]) for folder, rows in HTA["queue_length"].items()
                for row in rows})


@pytest.mark.parametrize(("folder", "file"), CASES, ids=[f"{f}/{n}" for f, n in CASES])
def test_hta_queue_summary(public_traces: Path, folder: str, file: str) -> None:
    result = queue_length(load_trace(require(public_traces / folder / file)), hta=True)
    ours = {s.stream: s for s in result.streams}
    theirs = [r for r in HTA["queue_length"][folder] if r["file"] == file]
    assert sorted(ours) == sorted(r["stream"] for r in theirs)
    for row in theirs:
        s = ours[row["stream"]]
        assert len(s.length) == row["count"]
        assert (s.hta_min, s.hta_p25, s.hta_p50, s.hta_p75, s.hta_max) == (
            row["min"], row["25%"], row["50%"], row["75%"], row["max"])
        # equal launch and start times are ordered differently (HTA's sort is not stable)
        assert s.hta_mean == pytest.approx(row["mean"], rel=2e-3, abs=1e-2)
        assert s.hta_std == pytest.approx(row["std"], rel=2e-3, abs=1e-2)
        assert np.all(s.length >= 0)
