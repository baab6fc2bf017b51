"""Scaling what-if: the bucket/overlap model on hand inputs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiprof.distributed.collectives import collective_time_us
from aiprof.distributed.links import LinkParams
from aiprof.distributed.scaling import ScalingInputs, parse_ranks, predict_scaling
from aiprof.errors import InputError

LINK = LinkParams(name="x", alpha_us=5, bandwidth_gbps=10)


def test_one_bucket_is_fully_exposed():
    inputs = ScalingInputs(
        base_step_us=1000, backward_us=600, grad_bytes=1e6, grad_bytes_source="t"
    )
    point = predict_scaling(inputs, [8], LINK, bucket_bytes=2**30).points[0]
    t = min(
        collective_time_us("allreduce", 10**6, 8, LINK, a)
        for a in ("ring", "double_binary_tree", "recursive_doubling", "rabenseifner")
    )
    assert point.exposed_comm_us == pytest.approx(t)
    assert point.efficiency_pct == pytest.approx(100 * 1000 / (1000 + t))


def test_long_backward_hides_all_but_the_last_bucket():
    inputs = ScalingInputs(
        base_step_us=1e6, backward_us=9e5, grad_bytes=10 * 2**20, grad_bytes_source="t"
    )
    point = predict_scaling(inputs, [4], LINK, bucket_bytes=2**20, ring_only=True).points[0]
    assert point.exposed_comm_us == pytest.approx(
        collective_time_us("allreduce", 2**20, 4, LINK, "ring")
    )
    assert point.comm_us == pytest.approx(10 * point.exposed_comm_us)


@given(st.floats(1e3, 1e6), st.floats(0, 1), st.floats(1e3, 1e10))
def test_efficiency_never_rises_with_ranks(step, share, grad):
    inputs = ScalingInputs(
        base_step_us=step, backward_us=share * step, grad_bytes=grad, grad_bytes_source="t"
    )
    points = predict_scaling(inputs, [2, 4, 8, 16, 64, 256], LINK, ring_only=True).points
    effs = [p.efficiency_pct for p in points]
    assert all(a >= b - 1e-9 for a, b in zip(effs, effs[1:], strict=False))
    assert all(0 < e <= 100 for e in effs)


def test_parse_ranks_and_errors():
    assert parse_ranks("2-64") == [2, 4, 8, 16, 32, 64]
    assert parse_ranks("3,5") == [3, 5]
    with pytest.raises(InputError):
        parse_ranks("two")
    with pytest.raises(InputError):
        predict_scaling(
            ScalingInputs(base_step_us=0, backward_us=0, grad_bytes=1, grad_bytes_source="t"),
            [2],
            LINK,
        )
