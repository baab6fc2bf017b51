"""Assertions on results recorded on 2 H200s (scripts/h200/distributed_*); skipped until there."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests.conftest import DATA

from aiprof.cli.main import main
from aiprof.distributed.collectives import collective_time_us
from aiprof.distributed.fit import fit_protocols

HERE = DATA / "distributed"
BENCH = HERE / "comm_bench.json"


def _need(path):
    if not path.exists():
        pytest.skip(f"{path.name} not recorded yet (run scripts/h200/distributed_*)")
    return path


def test_bench_covers_8_bytes_to_1_gib_for_four_collectives():
    data = json.loads(_need(BENCH).read_text())
    assert data["backend"] == "nccl" and data["num_ranks"] == 2
    for name in ("allreduce", "allgather", "reducescatter", "broadcast"):
        sizes = [p["num_bytes"] for p in data["points"] if p["collective"] == name]
        assert min(sizes) <= 8 and max(sizes) == 1 << 30, name


def test_fitted_model_predicts_allreduce_within_20_pct_from_1_mib_to_1_gib():
    data = json.loads(_need(BENCH).read_text())
    rows = [
        p for p in data["points"] if p["collective"] == "allreduce" and p["num_bytes"] >= 1 << 20
    ]
    sizes = np.array([p["num_bytes"] for p in rows], dtype=float)
    times = np.array([p["time_us"] for p in rows])
    # One α-β line per protocol regime, refitted here; the model is the ring formula per line.
    fits = fit_protocols("allreduce", 2, sizes, times, min_bytes=1 << 20)
    predicted = np.array(
        [min(collective_time_us("allreduce", n, 2, f.link(), "ring") for f in fits) for n in sizes]
    )
    errors = np.abs(predicted - times) / times
    assert errors.max() < 0.20, dict(
        zip(sizes.astype(int).tolist(), errors.round(3).tolist(), strict=True)
    )


def test_busbw_at_1_gib_is_a_plausible_nvlink_share():
    data = json.loads(_need(BENCH).read_text())
    big = next(
        p for p in data["points"] if p["collective"] == "allreduce" and p["num_bytes"] == 1 << 30
    )
    # H200 NVLink 4: 450 GB/s per direction (datasheet); NVLS off, so busbw stays below it.
    assert 50 < big["busbw_gbps"] < 450


@pytest.mark.parametrize("folder", ["ddp_straggler", "run_ddp_straggler"])
def test_straggler_run_names_rank_1(folder, capsys):
    path = _need(HERE / folder)
    assert main(["distributed", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["collective_source"] == "nccl kernels"
    assert [s["rank"] for s in report["stragglers"]][:1] == [1]
    assert report["stragglers"][0]["others_wait_us_per_step"] > 0.5 * 50_000  # 50 ms sleep


@pytest.mark.parametrize("folder", ["ddp", "run_ddp"])
def test_clean_run_reports_overlap_and_no_late_rank(folder, capsys):
    path = _need(HERE / folder)
    assert main(["distributed", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert all("late arrival" not in s["reason"] for s in report["stragglers"])
    for rank in report["ranks"]:
        assert 0 < rank["overlap_pct"] <= 100  # DDP buckets overlap the backward pass
        allreduce = [
            c
            for c in report["collectives"]
            if c["rank"] == rank["rank"] and c["collective"] == "allreduce"
        ]
        assert allreduce and allreduce[0]["busbw_gbps"] > 0
