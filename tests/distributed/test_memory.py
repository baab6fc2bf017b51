"""Training memory: the ZeRO paper's example, Korthikanti's activation table, CLI."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiprof.cli.main import main
from aiprof.distributed.memory import MemoryOptions, activation_bytes_per_layer, estimate_memory

MIB = 2**20


@pytest.mark.parametrize(("stage", "expected_gb"), [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_example_7_5b_on_64_gpus(stage, expected_gb):
    # Rajbhandari et al. SC'20, Figure 1: Ψ = 7.5 B, N_d = 64, K = 12.
    got = estimate_memory(MemoryOptions(num_params=7.5e9, num_gpus=64, zero_stage=stage))
    assert round(got.model_states_gb_per_gpu, 1) == expected_gb


@pytest.mark.parametrize(
    ("kwargs", "expected_mib"),
    [
        # Reference §B6 example: s = 2048, b = 1, h = 12288, a = 96, t = 8.
        ({"tensor_parallel": 1}, 2736),
        ({}, 552),
        ({"sequence_parallel": True}, 342),
        ({"sequence_parallel": True, "recompute": "selective"}, 102),
        ({"recompute": "full"}, 48),
    ],
)
def test_korthikanti_activation_table(kwargs, expected_mib):
    options = MemoryOptions(
        num_params=1e9,
        tensor_parallel=8,
        seq_len=2048,
        micro_batch=1,
        hidden_size=12288,
        num_heads=96,
        num_layers=1,
    )
    options = dataclasses.replace(options, **kwargs)
    assert activation_bytes_per_layer(options) / MIB == pytest.approx(expected_mib, rel=0.005)


def test_flash_attention_drops_the_scores_term():
    base = MemoryOptions(num_params=1e9, seq_len=2048, hidden_size=4096, num_heads=32, num_layers=1)
    flash = dataclasses.replace(base, flash_attention=True)
    assert activation_bytes_per_layer(flash) == 34 * 2048 * 4096


@given(st.floats(1e6, 1e12), st.integers(1, 4096))
def test_each_stage_needs_no_more_memory_than_the_previous(params, gpus):
    totals = [
        estimate_memory(
            MemoryOptions(num_params=params, num_gpus=gpus, zero_stage=s)
        ).total_gb_per_gpu
        for s in range(4)
    ]
    assert all(a >= b - 1e-9 for a, b in zip(totals, totals[1:], strict=False))
    assert totals[0] == pytest.approx(16 * params / 1e9)


def test_cli_json_schema_and_fsdp(capsys):
    assert (
        main(["memory", "--params", "7.5e9", "--gpus", "64", "--fsdp", "full_shard", "--json"]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "aiprof.memory/1"
    assert data["zero_stage"] == 3 and round(data["model_states_gb_per_gpu"], 3) == 1.875
    assert set(data) >= {"model_states_gb_per_gpu", "activations_gb_per_gpu", "total_gb_per_gpu"}


@pytest.mark.parametrize(
    "argv", [["--params", "0"], ["--params", "1e9", "--gpus", "0"], ["--params", "-3"]]
)
def test_cli_bad_input_is_one_line_exit_2(capsys, argv):
    assert main(["memory", *argv]) == 2
    assert capsys.readouterr().err.count("\n") == 1
