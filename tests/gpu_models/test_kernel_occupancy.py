"""Occupancy over trace columns: each row agrees with the scalar model; grid flag and waves."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import require

from aiprof.gpu import kernel_occupancy, occupancy


def test_rows_match_the_scalar_model_and_flag_small_grids():
    grid = np.array([[1, 1, 1], [1000, 1, 1], [64, 2, 1], [8, 8, 8]])
    block = np.array([[256, 1, 1], [128, 1, 1], [0, 0, 0], [16, 16, 1]])
    result = kernel_occupancy(grid, block, [32, 255, 0, 64], [8192, 0, 0, 100_000], "NVIDIA H200")
    assert result.num_blocks.tolist() == [1, 1000, 128, 512]
    assert result.grid_below_sm_count.tolist() == [True, False, True, False]  # 132 SMs
    assert result.limiter[2] == "unknown" and np.isnan(result.occupancy[2])
    for row in (0, 1, 3):
        expected = occupancy("sm_90", int(np.prod(block[row])), [32, 255, 0, 64][row],
                             [8192, 0, 0, 100_000][row])
        assert result.occupancy[row] == expected.occupancy
        assert result.limiter[row] == expected.limiter
    # 1000 blocks, 2 per SM on 132 SMs: 1000 / 264 waves
    assert result.waves[1] == 1000 / (2 * 132)


def test_amd_device_gives_unknown_rows():
    from aiprof.hardware import spec_from_device_properties

    amd = spec_from_device_properties({"name": "AMD Radeon Graphics", "warpSize": 64,
                                       "computeMajor": 9, "computeMinor": 0, "numSms": 104})
    result = kernel_occupancy([10, 200], [256, 256], [32, 32], [0, 0], amd)
    assert not result.supported and np.isnan(result.occupancy).all()
    assert result.grid_below_sm_count.tolist() == [True, False]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 1024), st.integers(0, 255), st.integers(0, 150_000)),
                min_size=1, max_size=20))
def test_vectorized_equals_scalar(rows):
    threads, regs, smem = (np.array(c) for c in zip(*rows, strict=True))
    result = kernel_occupancy(np.ones(len(rows)), threads, regs, smem, "sm_80")
    for i, (t, r, s) in enumerate(rows):
        assert result.active_blocks_per_sm[i] == occupancy("sm_80", t, r, s).active_blocks_per_sm


# Real traces (A100 and V100): Kineto wrote its own occupancy estimate per kernel. Recomputing it
# from our per-kernel block limits must give the same integer for every kernel Kineto could
# evaluate (shared memory <= 48 KB: above that Kineto's DEFAULT config reads 0, §1.10).
TRACES = ["negative_queue_length_values_check/rank0.json.gz", "trace_diff/test.json.gz",
          "critical_path/benchmark_result_2869224_1695835535_trace.json.gz",
          "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"]


@pytest.mark.parametrize("name", TRACES)
def test_reproduces_kineto_estimates_on_public_traces(public_traces, name):
    import aiprof
    from aiprof.gpu import kineto_estimate_pct, trace_kernel_occupancy
    from aiprof.gpu.trace_occupancy import trace_spec

    trace = aiprof.load_trace(require(public_traces / name))
    k = trace.kernels
    result = trace_kernel_occupancy(trace)
    spec = trace_spec(trace)
    ours = kineto_estimate_pct(result, k.threads_per_block, spec.arch.max_threads_per_sm)
    rows = (k.est_occupancy_pct >= 0) & (k.shared_mem_bytes <= 48 * 1024)
    assert rows.sum() > 50
    assert np.array_equal(ours[rows], k.est_occupancy_pct[rows])
    assert (result.grid_below_sm_count == (k.blocks < spec.num_sms)).all()


def test_amd_trace_has_no_occupancy(public_traces):
    import aiprof
    from aiprof.gpu import trace_kernel_occupancy

    trace = aiprof.load_trace(public_traces / "amd_trace" /
                              "mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    result = trace_kernel_occupancy(trace)
    assert not result.supported and np.isnan(result.occupancy).all()
