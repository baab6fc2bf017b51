"""The NCCL-shaped cost model: hand-computed entries and the protocol sequence of reference §B2."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiprof.cli.main import main
from aiprof.distributed.nccl_model import NcclTopology, model_nccl, nccl_costs
from aiprof.errors import InputError


def test_ring_simple_entry_by_hand():
    topo = NcclTopology(num_ranks=8, bus_bandwidth_gbps=300)
    n = 2**28
    # Ring/Simple: base 8.4 + 2(p−1)·3.4 µs (NVLink hop); algBw = busBw · p / (2(p−1)).
    expected = 8.4 + 14 * 3.4 + n / (1000 * 300 * 8 / 14)
    assert nccl_costs("allreduce", n, topo)["Ring/Simple"].time_us == pytest.approx(expected)
    # Tree/LL: base 6.8 + 2·(7·0.6) µs inside one node; algBw = busBw/3.8 · 0.5.
    expected_tree = 6.8 + 2 * 7 * 0.6 + n / (1000 * 300 / 3.8 * 0.5)
    assert nccl_costs("allreduce", n, topo)["Tree/LL"].time_us == pytest.approx(expected_tree)


def test_one_node_moves_from_ll_to_ll128_to_simple():
    # Reference §B2, one 8-GPU node: LL (≤ ~1 MB) → LL128 (~16 MB) → Simple (256 MB).
    topo = NcclTopology(num_ranks=8)
    protocols = [
        model_nccl("allreduce", n, topo).algorithm.split("/")[1] for n in (2**10, 2**24, 2**28)
    ]
    assert protocols == ["LL", "LL128", "Simple"]


def test_multi_node_small_messages_use_tree():
    topo = NcclTopology(num_ranks=32, num_nodes=4, bus_bandwidth_gbps=50)
    assert model_nccl("allreduce", 8, topo).algorithm.startswith("Tree")
    assert model_nccl("allreduce", 2**28, topo).algorithm.startswith("Ring")
    assert set(nccl_costs("allgather", 8, topo)) == {"Ring/LL", "Ring/LL128", "Ring/Simple"}


@given(st.integers(0, 2**31), st.integers(1, 2**20), st.sampled_from([2, 4, 8, 16]))
def test_monotone_in_size(n, extra, p):
    topo = NcclTopology(num_ranks=p)
    a, b = nccl_costs("allreduce", n, topo), nccl_costs("allreduce", n + extra, topo)
    assert all(b[k].time_us >= a[k].time_us for k in a)


def test_bad_topologies():
    for kwargs in (
        {"num_ranks": 0},
        {"num_ranks": 6, "num_nodes": 4},
        {"num_ranks": 2, "intra_link": "x"},
        {"num_ranks": 2, "bus_bandwidth_gbps": 0},
    ):
        with pytest.raises(InputError):
            NcclTopology(**kwargs)
    with pytest.raises(InputError):
        nccl_costs("alltoall", 8, NcclTopology(num_ranks=2))


def test_cli_nccl_model(capsys):
    assert (
        main(["comm", "model", "--model", "nccl", "--ranks", "8", "--bytes", "256MiB", "--json"])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "aiprof.comm_model/1" and data["algorithm"] == "Ring/Simple"
    assert (
        main(["comm", "model", "--model", "nccl", "--ranks", "6", "--nodes", "4", "--bytes", "8"])
        == 2
    )
