"""Interval algebra against a unit-grid brute force; overlap and waits on hand-built inputs."""

from __future__ import annotations

import numpy as np
import pytest

from aiprof.distributed.commtrace import CollectiveCalls, parse_nccl_kernel
from aiprof.distributed.overlap import overlap_pct, step_overlaps
from aiprof.distributed.stragglers import (
    best_shift,
    collective_waits,
    compute_outliers,
    imbalance_pct,
    matched_rows,
)


def test_overlap_and_exposed_comm_per_step():
    compute = (np.array([0.0, 50.0]), np.array([40.0, 90.0]))
    comm = (np.array([30.0, 85.0]), np.array([60.0, 100.0]))
    steps = step_overlaps(
        compute, comm, np.array([0, 1]), np.array([0.0, 50.0]), np.array([50.0, 100.0])
    )
    # Step 0: comm 30..50 (20), compute covers 30..40 -> overlapped 10, exposed 10.
    assert (steps[0].comm_us, steps[0].overlapped_us, steps[0].exposed_comm_us) == (20, 10, 10)
    # Step 1: comm 50..60 and 85..100 (25); compute covers 50..60 and 85..90 -> 15 overlapped.
    assert (steps[1].comm_us, steps[1].overlapped_us, steps[1].exposed_comm_us) == (25, 15, 10)
    assert overlap_pct(steps) == pytest.approx(100 * 25 / 45)


def _calls(ts, dur, kinds):
    n = len(ts)
    return CollectiveCalls(
        ts_us=np.array(ts, float),
        dur_us=np.array(dur, float),
        kind=kinds,
        num_bytes=np.full(n, -1.0),
        group_size=np.full(n, 2),
        algorithm=[""] * n,
        source="test",
    )


def test_waits_are_attributed_to_the_late_rank():
    fast = _calls([0, 100, 200], [50, 40, 60], ["allreduce", "broadcast", "allreduce"])
    late = _calls([45, 135, 250], [5, 5, 10], ["allreduce", "broadcast", "allreduce"])
    waits = collective_waits([fast, late])
    assert waits.num_matched_calls == 3
    assert waits.wait_us == pytest.approx([45 + 35 + 50, 0])
    assert waits.caused_us == pytest.approx([0, 130])
    assert waits.last_arrival_share_pct == pytest.approx([0, 100])


def test_concurrent_waits_are_not_double_counted():
    fast = _calls([0, 0], [50, 50], ["broadcast", "broadcast"])
    late = _calls([45, 45], [5, 5], ["broadcast", "broadcast"])
    assert collective_waits([fast, late]).wait_us[0] == pytest.approx(45)


def test_imbalance_and_outliers():
    assert imbalance_pct([100, 100, 100, 140]) == pytest.approx((140 / 110 - 1) * 100)
    assert imbalance_pct([5.0]) == 0
    assert compute_outliers([100, 101, 99, 130], 10) == [3]


@pytest.mark.parametrize(
    ("name", "kind", "algo"),
    [
        (
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
            "allreduce",
            "RING_LL",
        ),
        (
            "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "allgather",
            "RING_LL",
        ),
        (
            "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL128(ncclDevKernelArgsStorage<4096ul>)",
            "reducescatter",
            "RING_LL128",
        ),
        ("ncclDevKernel_AllReduce_Sum_f32_TREE_SIMPLE(x)", "allreduce", "TREE_SIMPLE"),
        (
            "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
            "sendrecv",
            "RING_SIMPLE",
        ),
        ("ncclDevKernel_Broadcast_RING_LL(x)", "broadcast", "RING_LL"),
    ],
)
def test_nccl_kernel_names_old_and_new(name, kind, algo):
    assert parse_nccl_kernel(name) == (kind, algo)
    assert parse_nccl_kernel("volta_sgemm_128x64_nn") is None


def test_windows_that_start_on_different_calls_are_paired_by_end_time():
    # Rank 0's window holds 3 extra calls at the start; the shared calls end together.
    ends = np.array([10.0, 20.0, 35.0, 60.0, 62.0, 90.0, 130.0])
    fast = _calls(ends - 8, np.full(7, 8.0), ["allreduce"] * 7)
    late = _calls(ends[3:] - 1, np.ones(4), ["allreduce"] * 4)
    rows = matched_rows([fast, late], "allreduce")
    assert rows[0].tolist() == [3, 4, 5, 6] and rows[1].tolist() == [0, 1, 2, 3]
    waits = collective_waits([fast, late])
    assert waits.num_matched_calls == 4
    assert waits.wait_us[0] == pytest.approx(4 * 7 - 5)  # calls at 52..59 and 54..61 overlap 5 µs
    assert best_shift(ends, ends) == 0
