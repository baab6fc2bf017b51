"""GIVEN a run record or several ranks WHEN exported for Perfetto THEN the file loads back in
aiprof with the same events, every rank is its own process with its own flow ids, and the
queue, NVML and finding tracks are there; HTA 0.5 reads it when its interpreter is given."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from tests.conftest import DATA, require
from views_synth import Builder

from aiprof import load_trace
from aiprof.cli.main import main

RUN = DATA / "capture" / "h200_resnet50_run"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "run.json"
    assert main(["export", "--perfetto", str(RUN), "-o", str(out)]) == 0
    return out


def test_round_trip_keeps_every_event(exported: Path) -> None:
    before, after = load_trace(RUN / "rank0.trace.json.gz"), load_trace(exported)
    for name in ("kernels", "memcpy", "cpu_ops", "runtime", "flows", "memory"):
        assert len(getattr(after, name)) == len(getattr(before, name)), name
    assert after.kernels.dur_us.sum() == pytest.approx(before.kernels.dur_us.sum())
    assert after.steps.duration_us == pytest.approx(before.steps.duration_us)
    assert (after.kernels.op_row >= 0).sum() == (before.kernels.op_row >= 0).sum()


def test_tracks_are_added(exported: Path) -> None:
    events = json.loads(exported.read_text())["traceEvents"]
    counters = Counter(e["name"] for e in events if e["ph"] == "C")
    assert any(n.startswith("queue GPU 0 stream") for n in counters)
    assert counters["GPU 0 SM util %"] > 0 and counters["GPU 0 power W"] > 0
    findings = [e for e in events if e.get("cat") == "aiprof_finding"]
    assert findings and all(e["dur"] >= 0 and "category" in e["args"] for e in findings)
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert any(n.startswith("GPU 0 stream") for n in names)


def _rank_file(tmp_path: Path, rank: int) -> Path:
    b = Builder()
    b.step(1, 0, 100)
    for i in range(3):
        corr = b.kernel("gemm_kernel", 10 + 20 * i, 15 + 20 * i, 10)
        for ph, ts, pid, tid in (("s", 10 + 20 * i, 1, 1), ("f", 15 + 20 * i, 0, 7)):
            b.events.append({"ph": ph, "id": corr, "pid": pid, "tid": tid, "ts": ts,
                             "cat": "ac2g", "name": "ac2g", "bp": "e"})
    path = b.write(tmp_path / f"rank{rank}.json")
    doc = json.loads(path.read_text())
    doc["distributedInfo"] = {"rank": rank, "world_size": 2}
    path.write_text(json.dumps(doc))
    return path


def test_every_rank_is_a_process(tmp_path: Path) -> None:
    _check_ranks([_rank_file(tmp_path, 0), _rank_file(tmp_path, 1)], tmp_path / "two.json")


@pytest.mark.slow
def test_every_rank_is_a_process_public(public_traces: Path, tmp_path: Path) -> None:
    ranks = sorted(require(public_traces / "trace_diff").glob("*.json.gz"))
    _check_ranks(ranks, tmp_path / "t.json")


def _check_ranks(ranks: list[Path], out: Path) -> None:
    assert main(["export", "--perfetto", *map(str, ranks), "-o", str(out),
                 "--no-findings"]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert len(processes) == 2 and all(v.startswith("rank ") for v in processes.values())
    flow_pids: dict[int, set[int]] = {}
    for e in events:
        if e["ph"] in ("s", "f"):
            flow_pids.setdefault(e["id"], set()).add(e["pid"])
    assert flow_pids and all(len(p) == 1 for p in flow_pids.values())
    assert len(load_trace(out).kernels) == sum(len(load_trace(r).kernels) for r in ranks)


@pytest.mark.skipif(not os.environ.get("AIPROF_HTA_PYTHON"),
                    reason="set AIPROF_HTA_PYTHON to a Python with HolisticTraceAnalysis 0.5")
def test_hta_reads_the_export(exported: Path, tmp_path: Path) -> None:
    folder = tmp_path / "hta"
    folder.mkdir()
    shutil.copy(exported, folder / "rank0.json")
    code = ("import sys; from hta.trace_analysis import TraceAnalysis; "
            "a = TraceAnalysis(trace_dir=sys.argv[1]); print(len(a.t.get_trace(0)))")
    done = subprocess.run([os.environ["AIPROF_HTA_PYTHON"], "-c", code, str(folder)],
                          capture_output=True, text=True, timeout=300, check=True)
    assert int(done.stdout.strip().splitlines()[-1]) > 1000
