"""Divergence (the chapter's 100 + 10 cycle example) and roofline math."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiprof.errors import InputError
from aiprof.gpu.divergence import divergence, even_odd
from aiprof.tensor.ceilings_model import ceilings_for_gpu
from aiprof.tensor.opcost import OpCost
from aiprof.tensor.roofline import place


def test_chapter_example_costs_110_cycles():
    result = even_odd(100, 10)
    assert result.serialized_cost == 110 and result.converged_cost == 100
    assert result.slowdown == pytest.approx(1.1)
    # 16 lanes active on both paths.
    assert result.avg_active_threads_per_instruction == 16


def test_uniform_warp_has_32_threads_per_instruction():
    result = divergence(["a"] * 32, {"a": 7}, common_cost=3)
    assert result.avg_active_threads_per_instruction == 32 and result.slowdown == 1


def test_common_part_raises_threads_per_instruction():
    # 10 common instructions run by 32 lanes, 100 + 100 by 16 each: (320 + 3200) / 210.
    result = even_odd(100, 100, common_cost=10)
    assert result.avg_active_threads_per_instruction == pytest.approx(3520 / 210)


def test_divergence_bad_input():
    with pytest.raises(InputError):
        divergence(["a"] * 31, {"a": 1})
    with pytest.raises(InputError):
        divergence(["a"] * 32, {"b": 1})


@given(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=32, max_size=32).filter(
    lambda xs: any(x is not None for x in xs)),
    st.floats(0.1, 1e3), st.floats(0.1, 1e3), st.floats(0.1, 1e3))
def test_divergence_bounds(paths, a, b, c):
    result = divergence(paths, {"a": a, "b": b, "c": c})
    active = sum(p is not None for p in paths)
    assert 0 < result.avg_active_threads_per_instruction <= active + 1e-9
    assert result.serialized_cost >= result.converged_cost


def test_ridge_points_match_reference_table():
    # ../shared/reference/gpu-models.md §6.5 machine balance.
    h200 = ceilings_for_gpu("H200")
    assert h200.ridge_flop_per_byte("fp32") == pytest.approx(13.9, abs=0.05)
    assert h200.ridge_flop_per_byte("fp16") == pytest.approx(206, abs=0.5)
    assert h200.ridge_flop_per_byte("fp8") == pytest.approx(412, abs=0.5)
    assert ceilings_for_gpu("A100 40GB").ridge_flop_per_byte("fp16") == pytest.approx(201, abs=0.5)
    assert ceilings_for_gpu("H100 SXM").ridge_flop_per_byte("fp32") == pytest.approx(20.0, abs=0.05)


def _gemm(flops: float, nbytes: float, precision: str) -> OpCost:
    return OpCost(op="mm", family="matmul", flops=int(flops), bytes_read=int(nbytes),
                  bytes_written=0, precision=precision)


def test_textbook_gemm_is_compute_bound():
    point = place(_gemm(2 * 1024**3, 3 * 4 * 1024**2, "fp32"), ceilings_for_gpu("H100 SXM"))
    assert point.intensity_flop_per_byte == pytest.approx(170.67, abs=0.01)
    assert point.bound == "compute"
    assert point.roof_time_us == pytest.approx(2 * 1024**3 / point.peak_flops_per_s * 1e6)


@given(st.floats(1e3, 1e15), st.floats(1, 1e12), st.sampled_from(["fp32", "bf16", "fp64"]))
def test_roof_time_is_the_larger_of_the_two_ceilings(flops, nbytes, precision):
    ceilings = ceilings_for_gpu("A100 80GB")
    point = place(_gemm(flops, nbytes, precision), ceilings)
    compute_us = int(flops) / point.peak_flops_per_s * 1e6
    memory_us = int(nbytes) / ceilings.memory_bytes_per_s * 1e6
    assert point.roof_time_us == pytest.approx(max(compute_us, memory_us))
    if point.bound in ("compute", "memory"):
        intensity = point.intensity_flop_per_byte
        assert (point.bound == "memory") == (intensity < point.ridge_flop_per_byte)
