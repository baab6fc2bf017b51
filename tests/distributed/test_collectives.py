"""Collective cost models against the reference's worked example, busbw factors and bounds."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiprof.distributed.busbw import busbw_factor, busbw_gbps, canonical_collective
from aiprof.distributed.collectives import ALGORITHMS, collective_time_us, model_collective
from aiprof.distributed.links import LinkParams, link_preset
from aiprof.distributed.sizes import format_bytes, parse_bytes
from aiprof.errors import InputError

EXAMPLE = LinkParams(name="example", alpha_us=5.0, bandwidth_gbps=25.0)


@pytest.mark.parametrize(
    ("n", "algorithm", "expected_us"),
    [
        # Reference §B3 table: α = 5 µs, β = 1/(25 GB/s), p = 64.
        (8192, "ring", 631),
        (8192, "rabenseifner", 61),
        (8192, "recursive_doubling", 32),
        (2**28, "ring", 21_800),
        (2**28, "rabenseifner", 21_200),
        (2**28, "recursive_doubling", 64_000),
    ],
)
def test_reference_example_table(n, algorithm, expected_us):
    got = collective_time_us("allreduce", n, 64, EXAMPLE, algorithm)
    assert got == pytest.approx(expected_us, rel=0.01)


def test_small_messages_pick_log_depth_large_pick_bandwidth_optimal():
    assert model_collective("allreduce", 8192, 64, EXAMPLE).algorithm == "recursive_doubling"
    big = model_collective("allreduce", 2**28, 64, EXAMPLE)
    assert big.algorithm in ("ring", "rabenseifner")


@pytest.mark.parametrize(
    ("collective", "n", "factor"),
    [
        ("allreduce", 8, 2 * 7 / 8),
        ("allgather", 8, 7 / 8),
        ("reducescatter", 8, 7 / 8),
        ("alltoall", 4, 3 / 4),
        ("broadcast", 8, 1.0),
        ("reduce", 8, 1.0),
        ("sendrecv", 2, 1.0),
    ],
)
def test_busbw_factors_follow_nccl_tests(collective, n, factor):
    assert busbw_factor(collective, n) == pytest.approx(factor)
    assert busbw_gbps(collective, n, 1e9, 1e6) == pytest.approx(factor)  # 1 GB in 1 s


def test_ring_allreduce_is_independent_formula():
    n, p, link = 2**26, 8, link_preset("nvlink")
    alpha, beta = link.alpha_us, 1 / (link.bandwidth_gbps * 1e3)
    expected = 2 * (p - 1) * alpha + 2 * n * (p - 1) / p * beta
    assert collective_time_us("allreduce", n, p, link, "ring") == pytest.approx(expected)


def test_gamma_adds_reduction_time():
    n, p = 2**20, 4
    slow = LinkParams(name="x", alpha_us=1, bandwidth_gbps=10, reduce_gbps=5)
    fast = LinkParams(name="x", alpha_us=1, bandwidth_gbps=10)
    extra = collective_time_us("allreduce", n, p, slow, "ring") - collective_time_us(
        "allreduce", n, p, fast, "ring"
    )
    assert extra == pytest.approx(n * (p - 1) / p / 5e3)


@given(
    st.sampled_from(sorted(ALGORITHMS)),
    st.integers(2, 512),
    st.integers(0, 2**31),
    st.floats(0.1, 20),
    st.floats(1, 900),
)
def test_every_algorithm_respects_the_lower_bound(collective, p, n, alpha, bw):
    link = LinkParams(name="x", alpha_us=alpha, bandwidth_gbps=bw)
    beta = 1 / (bw * 1e3)
    # Chan et al. 2007 lower bounds: all-reduce ⌈lg p⌉α + 2n(p−1)/p·β; gathers ⌈lg p⌉α + n(p−1)/p·β.
    bytes_factor = {
        "allreduce": 2 * (p - 1) / p,
        "allgather": (p - 1) / p,
        "reducescatter": (p - 1) / p,
        "broadcast": 1.0,
    }[collective]
    if collective == "broadcast":
        bytes_factor = 1.0
    bound = math.ceil(math.log2(p)) * alpha + bytes_factor * n * beta
    for name in ALGORITHMS[collective]:
        assert collective_time_us(collective, n, p, link, name) >= bound * (1 - 1e-9) - 1e-9


@given(
    st.sampled_from(sorted(ALGORITHMS)),
    st.integers(2, 256),
    st.integers(0, 2**30),
    st.integers(1, 2**20),
)
def test_cost_is_monotone_in_message_size(collective, p, n, extra):
    link = link_preset("infiniband")
    for name in ALGORITHMS[collective]:
        assert collective_time_us(collective, n + extra, p, link, name) >= collective_time_us(
            collective, n, p, link, name
        )


def test_one_rank_costs_nothing():
    assert model_collective("allreduce", 2**20, 1, EXAMPLE).time_us == 0


@pytest.mark.parametrize(
    "bad",
    [
        lambda: model_collective("allreduce", 8, 0, EXAMPLE),
        lambda: model_collective("allreduce", -1, 2, EXAMPLE),
        lambda: canonical_collective("gossip"),
        lambda: link_preset("carrier-pigeon"),
        lambda: LinkParams(name="x", alpha_us=1, bandwidth_gbps=0),
    ],
)
def test_bad_input_raises_input_error(bad):
    with pytest.raises(InputError):
        bad()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8", 8),
        ("256MiB", 256 * 2**20),
        ("1GB", 10**9),
        ("1.5KiB", 1536),
        ("1e3", 1000),
        ("64kib", 65536),
        ("8K", 8192),
        ("8KB", 8000),
        ("128M", 2**27),
    ],
)
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


def test_parse_bytes_rejects_garbage_and_negatives():
    for text in ("-5", "12 parsecs", "abc"):
        with pytest.raises(InputError):
            parse_bytes(text)
    assert format_bytes(2**20) == "1 MiB"
