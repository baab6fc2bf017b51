"""Pipeline bubble formulas and the optimal stage partitioner (against brute force)."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiprof.cli.main import main
from aiprof.distributed.bubble import pipeline_bubble
from aiprof.distributed.partition import StageCosts, evaluate, inflight, partition_layers
from aiprof.errors import InputError


def test_reference_bubble_example():
    # Reference §B4: p = 8, m = 32.
    assert pipeline_bubble("1f1b", 8, 32).bubble_over_ideal == pytest.approx(0.219, abs=5e-4)
    assert pipeline_bubble("gpipe", 8, 32).bubble_over_total == pytest.approx(0.179, abs=5e-4)
    assert pipeline_bubble("interleaved", 8, 32, 2).bubble_over_ideal == pytest.approx(
        0.109, abs=5e-4
    )
    assert pipeline_bubble("1f1b", 8, 32).textbook_ratio == pytest.approx(0.25)


@given(st.integers(1, 64), st.integers(1, 256), st.integers(1, 8))
def test_bubble_properties(p, m, v):
    gpipe, one = pipeline_bubble("gpipe", p, m), pipeline_bubble("1f1b", p, m)
    assert gpipe.bubble_over_ideal == one.bubble_over_ideal  # 1F1B saves memory, not time
    assert 0 <= one.bubble_over_total < 1
    # The two denominators describe the same idle time: b/t = (b/i) / (1 + b/i).
    assert one.bubble_over_total == pytest.approx(
        one.bubble_over_ideal / (1 + one.bubble_over_ideal)
    )
    assert pipeline_bubble("1f1b", p, m + 1).bubble_over_ideal <= one.bubble_over_ideal
    assert one.inflight_microbatches_stage0 <= gpipe.inflight_microbatches_stage0
    if m % p == 0:
        inter = pipeline_bubble("interleaved", p, m, v)
        assert inter.bubble_over_ideal == pytest.approx(one.bubble_over_ideal / v)


def test_step_time_of_a_schedule():
    b = pipeline_bubble("1f1b", 4, 8, stage_time_us=100.0)
    assert b.step_time_us == pytest.approx((8 + 4 - 1) * 100.0)


def _brute_force(costs: StageCosts, p: int, m: int, cap: float) -> tuple[float, float]:
    n = len(costs.time_us)
    best = (math.inf, math.inf)
    for cuts in itertools.combinations(range(1, n), p - 1):
        sizes = [b - a for a, b in zip((0, *cuts), (*cuts, n), strict=True)]
        part = evaluate(costs, sizes, m)
        if max(part.stage_memory_bytes) > cap:
            continue
        best = min(best, (part.max_stage_time_us, part.max_stage_memory_bytes))
    return best


layers = st.lists(
    st.tuples(st.integers(1, 50), st.integers(0, 20), st.integers(0, 5)), min_size=2, max_size=9
)


@settings(max_examples=150, deadline=None)
@given(layers, st.integers(1, 4), st.integers(1, 6), st.one_of(st.none(), st.integers(10, 200)))
def test_partition_is_optimal_against_brute_force(rows, p, m, cap):
    p = min(p, len(rows))
    costs = StageCosts(
        time_us=[r[0] for r in rows],
        state_bytes=[r[1] for r in rows],
        activation_bytes=[r[2] for r in rows],
    )
    limit = math.inf if cap is None else cap
    expected = _brute_force(costs, p, m, limit)
    if expected[0] == math.inf:
        with pytest.raises(InputError):
            partition_layers(costs, p, m, limit)
        return
    got = partition_layers(costs, p, m, limit)
    assert sum(got.layers_per_stage) == len(rows) and min(got.layers_per_stage) >= 1
    assert got.max_stage_time_us == pytest.approx(expected[0])
    assert got.max_stage_memory_bytes == pytest.approx(expected[1])


def test_chapter_exercise_96_layers_on_8_gpus():
    # Identical layers: 12 per GPU is time-optimal; 1F1B stage i holds min(p − i, m) micro-batches.
    costs = StageCosts(time_us=[1.0] * 96, state_bytes=[6e9] * 96, activation_bytes=[0.5e9] * 96)
    part = partition_layers(costs, 8, 32, memory_cap_bytes=141e9)
    assert part.layers_per_stage == [12] * 8
    assert part.stage_memory_bytes[0] == pytest.approx(12 * 6e9 + inflight(0, 8, 32) * 12 * 0.5e9)
    with pytest.raises(InputError):  # 16 B/param Adam on 1.5 GB of fp16 weights per layer: 144 GB
        partition_layers(
            StageCosts(time_us=[1.0] * 96, state_bytes=[12e9] * 96, activation_bytes=[0.0] * 96),
            8,
            32,
            memory_cap_bytes=141e9,
        )


def test_cli_json(capsys):
    argv = [
        "pipeline",
        "--stages",
        "8",
        "--microbatches",
        "32",
        "--layers",
        "96",
        "--layer-state-gb",
        "1",
        "--json",
    ]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "aiprof.pipeline/1"
    assert data["partition"]["layers_per_stage"] == [12] * 8
    assert {b["schedule"] for b in data["bubbles"]} == {"gpipe", "1f1b", "interleaved"}


@pytest.mark.parametrize(
    "argv",
    [
        ["--stages", "0", "--microbatches", "4"],
        ["--stages", "4", "--microbatches", "-1"],
        ["--stages", "4", "--microbatches", "4", "--layers", "2"],
    ],
)
def test_cli_bad_input(capsys, argv):
    assert main(["pipeline", *argv]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_cli_tensor_parallel_volume(capsys):
    argv = [
        "pipeline",
        "--stages",
        "2",
        "--microbatches",
        "4",
        "--tp",
        "8",
        "--hidden",
        "12288",
        "--seq",
        "2048",
        "--json",
    ]
    assert main(argv) == 0
    tp = json.loads(capsys.readouterr().out)["tensor_parallel"]
    assert tp["bytes_sent_per_rank_per_layer"] == pytest.approx(336 * 2**20)
    assert main(["pipeline", "--stages", "2", "--microbatches", "4", "--tp", "8"]) == 2
