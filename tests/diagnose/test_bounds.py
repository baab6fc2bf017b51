"""Issue 15, item 4 and failure class 4: no impossible gain; every number explained by its parts.

On every public trace (skipped when ../shared/traces/public is absent) and on traces built here
with the ``kineto_synth`` builder: gains within [0, 100], ms per step consistent with the %
and with the parts the replay removed, and the bounds of straggler, exposed communication,
low occupancy and the combined verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.kineto_synth import TraceBuilder

from aiprof.diagnose import Diagnosis, diagnose
from aiprof.diagnose.engine import diagnose_ranks

PUBLIC = Path(__file__).parents[2].parent / "shared" / "traces" / "public"
LARGE = {"df_index_resolver", "trace_diff"}
TARGETS = ((sorted(PUBLIC.glob("*/*.json.gz")) + [PUBLIC / "trace_filter"])
           if PUBLIC.is_dir() else [])
PART_KEYS = ("gpu_time_ms_per_step", "turnaround_ms_per_step", "cpu_time_ms_per_step",
             "sync_waits_ms_per_step", "profiler_time_before_syncs_ms_per_step")
ROUNDING_MS = 0.003  # the parts are rounded to µs each
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def assert_explained(result: Diagnosis, replay_step_ms: dict[int, float]) -> None:
    """Every gain in [0, 100]; its ms per step is its % of the step; replay gains are at most
    the parts the replay removed, and the parts add up."""
    for f in result.findings:
        assert 0.0 <= f.estimated_gain_pct <= 100.0, f
        parts = f.evidence.get("replay_removed")
        if parts is not None:
            total = sum(parts[k] for k in PART_KEYS)
            assert parts["parts_ms_per_step"] == pytest.approx(total, abs=ROUNDING_MS)
            assert f.estimated_gain_ms_per_step <= parts["parts_ms_per_step"] + ROUNDING_MS, f
            rank = int(f.evidence.get("rank", next(iter(replay_step_ms))))
            step_ms = replay_step_ms[rank]
        elif f.category == "communication_exposed":
            bound = min(f.evidence["exposed_comm_ms_per_step"], f.evidence["compute_ms_per_step"])
            assert f.estimated_gain_ms_per_step <= bound + ROUNDING_MS
            step_ms = result.step_us / 1000 if result.num_ranks == 1 else None
        else:
            assert f.category == "straggler"
            largest = f.evidence["largest_single_rank_wait_ms_per_step"]
            assert f.estimated_gain_ms_per_step <= largest + ROUNDING_MS
            assert f.estimated_gain_ms_per_step <= f.evidence["others_wait_ms_per_step"] + 1e-9
            step_ms = None
        if step_ms:
            assert f.estimated_gain_ms_per_step == pytest.approx(
                f.estimated_gain_pct / 100 * step_ms, rel=1e-6, abs=1e-6)
    gains = [f.estimated_gain_pct for f in result.findings]
    assert 0.0 <= result.combined_gain_pct <= min(100.0, sum(gains) + 1e-9)
    if gains:
        assert result.combined_gain_pct >= max(gains) - 1e-6 or result.num_ranks > 1


def _replay_steps_ms(target: Path) -> tuple[Diagnosis, dict[int, float]]:
    result, contexts = diagnose_ranks(target)
    steps = {c.trace.rank: c.base_us / max(len(c.trace.steps), 1) / 1000 for c in contexts}
    return result, steps


@pytest.mark.parametrize("path", [
    pytest.param(p, id=p.relative_to(PUBLIC).as_posix(),
                 marks=[pytest.mark.slow] if p.parent.name in LARGE else [])
    for p in TARGETS])
def test_every_public_trace_has_bounded_explained_gains(path: Path) -> None:
    result, steps = _replay_steps_ms(path)
    assert_explained(result, steps)


def _rank_traces(folder: Path, compute_us: list[float], steps: int = 3) -> Path:
    """One trace per rank: compute, then an all-reduce that ends when the slowest rank arrives."""
    folder.mkdir()
    slowest = max(compute_us)
    for rank, compute in enumerate(compute_us):
        b = TraceBuilder()
        t = 0.0
        for s in range(steps):
            b.kernel(GEMM, t + 1, t + 10, compute)
            b.kernel(ALLREDUCE, t + 3, t + 10 + compute, slowest - compute + 50.0, stream=9)
            b.step(s, t, slowest + 70.0)
            t += slowest + 100.0
        b.write(folder / f"rank{rank}.json.gz",
                distributedInfo={"backend": "nccl", "rank": rank, "world_size": len(compute_us)})
    return folder


def test_straggler_gain_is_the_largest_single_rank_wait_not_the_sum(tmp_path: Path) -> None:
    """Rank 0 computes 900 µs, ranks 1-3 300 µs: each waits 600 µs per step in the all-reduce.
    The sum of the waits (1,800 µs per ~1 ms step) would claim 185%; the step shortens by at
    most one rank's wait."""
    result = diagnose(_rank_traces(tmp_path / "ranks", [900.0, 300.0, 300.0, 300.0]))
    straggler = next(f for f in result.findings if f.category == "straggler")
    assert straggler.evidence["rank"] == 0
    assert straggler.evidence["others_wait_ms_per_step"] == pytest.approx(1.8, abs=0.01)
    assert straggler.evidence["largest_single_rank_wait_ms_per_step"] == pytest.approx(0.6,
                                                                                        abs=0.01)
    assert straggler.estimated_gain_ms_per_step == pytest.approx(0.6, abs=0.01)
    assert straggler.estimated_gain_pct == pytest.approx(100 * 600 / 970, abs=3.0)
    assert_explained(result, {r: 0.0 for r in range(4)})


def test_exposed_communication_is_bounded_by_the_compute_that_can_hide_it(tmp_path: Path) -> None:
    """8.6 ms of compute and 40 ms of all-reduce after it in a 49 ms step: overlapping can hide
    at most the 8.6 ms (17.6%), not the 40 ms exposed (82%)."""
    b = TraceBuilder()
    t = 0.0
    for s in range(3):
        b.kernel(GEMM, t + 1, t + 10, 8600.0)
        b.kernel(ALLREDUCE, t + 3, t + 8620, 40000.0, stream=9)
        b.step(s, t, 49000.0)
        t += 49001.0
    result = diagnose(b.write(tmp_path / "t.json.gz"))
    comm = next(f for f in result.findings if f.category == "communication_exposed")
    assert comm.evidence["exposed_comm_ms_per_step"] == pytest.approx(40.0, abs=0.1)
    assert comm.estimated_gain_pct == pytest.approx(100 * 8.6 / 49, abs=0.5)


def test_communication_kernels_are_not_low_occupancy(tmp_path: Path) -> None:
    """Small-grid NCCL kernels (few blocks by design) give no low_occupancy finding; the same
    grid on a compute kernel does."""
    def trace(name: str, path: Path) -> Path:
        b = TraceBuilder()
        t = 0.0
        for s in range(3):
            b.kernel(GEMM, t + 1, t + 10, 100.0)
            b.kernel(name, t + 2, t + 111, 400.0, grid=(4, 1, 1))
            b.step(s, t, 20.0)  # the CPU span; the step extends to its last kernel's end
            t += 521.0
        return b.write(path)

    nccl = diagnose(trace(ALLREDUCE, tmp_path / "nccl.json.gz"))
    assert "low_occupancy" not in {f.category for f in nccl.findings}
    compute = diagnose(trace("void splitKreduce_kernel<32, 16, int, float>", tmp_path / "k.gz"))
    occupancy = next(f for f in compute.findings if f.category == "low_occupancy")
    assert occupancy.estimated_gain_pct > 10.0


def test_verdict_combines_all_fixes_in_one_replay_not_a_sum(tmp_path: Path) -> None:
    """A DataLoader wait and a per-layer sync in one step: each fix alone claims its share; both
    at once are one replay, below the sum of the two and at least the larger."""
    b = TraceBuilder()
    t = 0.0
    for s in range(3):
        start = t
        b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 1, 500.0)
        t += 510.0
        for _ in range(5):
            b.kernel(GEMM, t, t + 8, 100.0)
            b.runtime("cudaStreamSynchronize", t + 6, 104.0)
            t += 6 + 104 + 30
        b.step(s, start, t - start)
        t += 1
    result = diagnose(b.write(tmp_path / "t.json.gz"))
    gains = {f.category: f.estimated_gain_pct for f in result.findings}
    assert {"dataloader", "host_sync"} <= set(gains)
    assert max(gains.values()) <= result.combined_gain_pct < sum(gains.values())
    assert f"{result.combined_gain_pct:.0f}%" in result.verdict
    assert result.document()["combined_gain_pct"] == pytest.approx(result.combined_gain_pct,
                                                                   abs=0.01)

