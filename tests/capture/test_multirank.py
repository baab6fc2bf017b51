"""A 2-process gloo job through torchrun: two rank traces on one aligned clock."""

from __future__ import annotations

import subprocess
import sys

import pytest
from capture_helpers import raw_trace

from aiprof.cli.main import main
from aiprof.record.runrecord import load_run, read_meta

pytestmark = pytest.mark.cpu_hog

pytest.importorskip("torch")


def allreduce_ends_ns(trace: dict) -> list[int]:
    """Wall-clock end of each gloo all-reduce: baseTimeNanoseconds + (ts + dur) * 1000."""
    base = trace["baseTimeNanoseconds"]
    spans = sorted((e["ts"], e["dur"]) for e in trace["traceEvents"]
                   if e.get("ph") == "X" and e.get("name") == "gloo:all_reduce")
    return [base + round((ts + dur) * 1000) for ts, dur in spans]


def test_nproc_2_gloo_job(tmp_path, workload):
    out = tmp_path / "runs"
    code = main(["run", "--out", str(out), "--nproc", "2", "--skip", "2", "--warmup", "1",
                 "--active", "3", "--", "python", workload("ddp_gloo.py")])
    assert code == 0
    record = (out / "latest").resolve()
    meta = read_meta(record)
    assert meta.world_size == 2 and meta.ended == "completed"
    traces = [raw_trace(record / f"rank{rank}.trace.json.gz") for rank in (0, 1)]
    assert [t["distributedInfo"]["rank"] for t in traces] == [0, 1]
    ends = [allreduce_ends_ns(t) for t in traces]
    assert len(ends[0]) == len(ends[1]) >= 3
    # a collective ends on both ranks at nearly the same wall time once clocks are aligned
    assert max(abs(a - b) for a, b in zip(*ends, strict=True)) < 50e6
    loaded = load_run(record)
    assert loaded.traces is not None and loaded.traces.ranks == [0, 1]
    assert "wall clock" in loaded.traces.alignment
    assert (record / "stdout.log").read_text().strip() == "rank 0 done"
    assert (record / "rank1.stdout.log").read_text().strip() == "rank 1 done"


@pytest.mark.slow
def test_ranks_of_a_users_own_torchrun_share_one_record(tmp_path, workload):
    out = tmp_path / "runs"
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
         "-m", "aiprof.cli.main", "run", "--out", str(out), "--skip", "2", "--",
         "python", workload("ddp_gloo.py")],
        capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    records = [p for p in out.iterdir() if p.is_dir() and not p.is_symlink()]
    assert len(records) == 1  # both ranks agreed on one directory
    assert sorted(p.name for p in records[0].glob("rank*.trace.json.gz")) == [
        "rank0.trace.json.gz", "rank1.trace.json.gz"]
    assert not list(out.glob(".claim-*"))  # rank 0 removed the claim
    assert read_meta(records[0]).world_size == 2
