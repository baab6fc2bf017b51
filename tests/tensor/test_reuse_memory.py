"""GIVEN conv/GEMM shapes and allocator events WHEN reuse, tiling and the memory timeline are
computed THEN they equal the chapter's formulas and a hand count of the events."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import require

from aiprof.errors import InputError
from aiprof.tensor.memtimeline import memory_timeline, trace_memory_timeline
from aiprof.tensor.reuse import conv_reuse, gemm_tiling


def test_conv_reuse_chapter_formulas() -> None:
    same = conv_reuse(batch=32, in_h=224, in_w=224, k_h=3, k_w=3, padding=1)
    assert (same.out_h, same.out_w) == (224, 224)
    assert same.input_reuse == pytest.approx(9.0)  # 3·3·224·224 / (224·224)
    assert same.weight_reuse == 32 * 224 * 224
    strided = conv_reuse(batch=1, in_h=224, in_w=224, k_h=7, k_w=7, stride=2, padding=3)
    assert strided.input_reuse == pytest.approx(49 * 112 * 112 / 224**2)
    with pytest.raises(InputError):
        conv_reuse(batch=1, in_h=2, in_w=2, k_h=5, k_w=5)


def test_gemm_tile_fits_the_cache() -> None:
    tiling = gemm_tiling(4096, 4096, 4096, cache_bytes=48 * 1024, elem_bytes=4)
    assert tiling.tile == 64  # floor(sqrt(49152 / 12)) = 64
    assert tiling.tile_bytes == 3 * 64 * 64 * 4 <= 48 * 1024
    expected = 4 * (2 * 4096 * 4096 * (4096 // 64) + 4096 * 4096)
    assert tiling.traffic_bytes == expected
    assert tiling.intensity_flop_per_byte == pytest.approx(2 * 4096**3 / expected)


@given(
    cache=st.integers(3 * 64 * 4, 1 << 24),
    elem=st.sampled_from([1, 2, 4]),
    m=st.integers(1, 5000),
    n=st.integers(1, 5000),
    k=st.integers(1, 5000),
)
def test_tile_always_fits_and_beats_untiled_traffic(cache, elem, m, n, k) -> None:
    try:
        tiling = gemm_tiling(m, n, k, cache, elem)
    except InputError:
        assert cache < 3 * 64 * elem
        return
    assert tiling.tile_bytes <= cache and tiling.tile % 8 == 0
    naive = elem * (m * k * n + k * n * m + m * n)  # no reuse at all: one tile column per element
    assert tiling.traffic_bytes <= naive


def test_memory_timeline_by_hand() -> None:
    ts = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    delta = np.array([100, 50, -100, 400, -50])
    addr = np.array([1, 2, 1, 3, 2])
    timeline = memory_timeline(ts, delta, addr)
    assert timeline.allocated_bytes.tolist() == [100, 150, 50, 450, 400]
    assert (timeline.peak_bytes, timeline.peak_us) == (450, 3.0)
    assert [a.addr for a in timeline.largest_at_peak] == [3, 2]
    life = {a.addr: a.lifetime_us for a in timeline.lifetimes}
    assert life == {1: 2.0, 2: 3.0, 3: None}
    with pytest.raises(InputError):
        memory_timeline(np.array([]), np.array([]), np.array([]))


def test_memory_timeline_of_a_real_trace(public_traces) -> None:
    from aiprof.trace import load_trace

    trace = load_trace(require(public_traces / "df_index_resolver" / "df_index_resolver.json.gz"))
    timeline = trace_memory_timeline(trace)
    mem = trace.memory
    gpu = (mem.device_type == 1) & (mem.device_id == 1)
    assert timeline.peak_bytes == int(mem.total_allocated[gpu].max())
    assert timeline.num_allocations == int((mem.bytes[gpu] > 0).sum())
    sizes = [a.size_bytes for a in timeline.largest_at_peak]
    assert sizes == sorted(sizes, reverse=True)
    assert sum(sizes) <= timeline.peak_bytes
    assert math.isclose(
        timeline.peak_us, float(mem.ts_us[gpu][np.argmax(mem.total_allocated[gpu])])
    )


def test_memtimeline_cli(public_traces, tmp_path, capsys) -> None:
    import json

    from aiprof.cli.main import main

    path = require(public_traces / "df_index_resolver" / "df_index_resolver.json.gz")
    plot = tmp_path / "mem.svg"
    assert main(["memtimeline", str(path), "--json", "--top", "3", "--plot", str(plot)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["peak_bytes"] == 6_629_508_096 and len(data["largest_at_peak"]) == 3
    assert plot.read_text().startswith("<svg")
    no_memory = public_traces / "critical_path" / "event_sync_trace.json.gz"
    assert main(["memtimeline", str(no_memory)]) == 2
    assert "profile_memory=True" in capsys.readouterr().err


def test_reuse_cli(capsys) -> None:
    import json

    from aiprof.cli.main import main

    assert (
        main(
            [
                "reuse",
                "conv",
                "--batch",
                "32",
                "--input",
                "224x224",
                "--kernel",
                "3x3",
                "--padding",
                "1",
                "--json",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["input_reuse"] == pytest.approx(9.0) and data["weight_reuse"] == 32 * 224 * 224
    assert (
        main(["reuse", "gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--cache", "48KiB"])
        == 0
    )
    assert "tile: 64" in capsys.readouterr().out
    assert main(["reuse", "gemm", "--m", "8", "--n", "8", "--k", "8", "--cache", "10"]) == 2
    assert main(["reuse", "conv", "--input", "2x2", "--kernel", "5x5"]) == 2
