"""Tensor-parallel volumes and gradient-compression trade-offs."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiprof.cli.main import main
from aiprof.distributed.compression import CompressionOptions, compression_tradeoffs
from aiprof.distributed.links import link_preset
from aiprof.distributed.tensor_parallel import tensor_parallel_volume
from aiprof.errors import InputError

MIB = 2**20


def test_megatron_example_336_mib_per_layer():
    # Reference §B5: b = 1, s = 2048, h = 12288, bf16, t = 8.
    v = tensor_parallel_volume(micro_batch=1, seq_len=2048, hidden_size=12288, tensor_parallel=8)
    assert v.allreduce_bytes == 48 * MIB
    assert v.bytes_sent_per_rank_per_layer == pytest.approx(336 * MIB)
    full = tensor_parallel_volume(
        micro_batch=1,
        seq_len=2048,
        hidden_size=12288,
        tensor_parallel=8,
        full_recompute=True,
        layers_per_stage=12,
        num_microbatches=4,
    )
    assert full.bytes_sent_per_rank_per_layer == pytest.approx(336 * MIB * 6 / 4)
    assert full.bytes_sent_per_rank_per_step == pytest.approx(
        full.bytes_sent_per_rank_per_layer * 48
    )


def test_tp_time_uses_the_collective_model():
    v = tensor_parallel_volume(
        micro_batch=1, seq_len=1024, hidden_size=4096, tensor_parallel=4, link=link_preset("nvlink")
    )
    assert v.comm_time_per_layer_us > 0
    assert (
        tensor_parallel_volume(
            micro_batch=1, seq_len=1, hidden_size=1, tensor_parallel=1
        ).bytes_sent_per_rank_per_layer
        == 0
    )
    with pytest.raises(InputError):
        tensor_parallel_volume(micro_batch=0, seq_len=1, hidden_size=1, tensor_parallel=2)


def _by_method(rows):
    return {r.method: r for r in rows}


def test_powersgd_sends_rank_r_factors():
    shapes = [(1024, 4096), (4096,), (8, 8)]
    rows = _by_method(compression_tradeoffs(CompressionOptions(shapes=shapes, num_ranks=8, rank=4)))
    # 1024×4096 sent as 4·(1024 + 4096); the 1-D bias and the tiny 8×8 (64 < 2·4·16) go whole.
    expected_elems = 4 * (1024 + 4096) + 4096 + 64
    assert rows["powersgd"].bytes_per_step == expected_elems * 4
    assert rows["fp16"].bytes_per_step == (1024 * 4096 + 4096 + 64) * 2
    assert rows["fp16"].compression_ratio == pytest.approx(2.0)
    assert rows["none"].breakeven_gbps == 0


@given(st.integers(2, 64), st.integers(1, 16), st.floats(1, 500))
def test_breakeven_bandwidth_balances_saved_comm_and_added_compute(d, r, tflops):
    options = CompressionOptions(
        shapes=[(4096, 4096)] * 4, num_ranks=d, rank=r, compute_tflops=tflops
    )
    for row in compression_tradeoffs(options):
        if row.method == "none":
            continue
        saved_us_at_breakeven = row.bytes_saved_per_rank / (row.breakeven_gbps * 1e3)
        assert saved_us_at_breakeven == pytest.approx(row.added_compute_us, rel=1e-9)


def test_cli_compression_json_and_errors(capsys):
    assert main(["compression", "--shapes", "4096x4096,4096", "--ranks", "8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "aiprof.compression/1"
    assert [m["method"] for m in data["methods"]] == ["none", "fp16", "bf16", "powersgd"]
    assert main(["compression", "--shapes", "4096xabc", "--ranks", "8"]) == 2
    assert main(["compression", "--ranks", "8"]) == 2
    assert main(["compression", "--shapes", "16x16", "--ranks", "0"]) == 2
