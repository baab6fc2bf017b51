"""GIVEN op costs and device ceilings WHEN placed on the roofline THEN the roof time is the
larger of the compute and memory times (gpu-models.md §6.1) and never beats a ceiling."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiprof.errors import InputError
from aiprof.tensor.ceilings_model import Ceilings, ceilings_for_gpu, load_ceilings, save_ceilings
from aiprof.tensor.opcost import OpCost
from aiprof.tensor.roofline import place

BOOK = Ceilings(
    name="book",
    memory_bytes_per_s=900e9,
    matmul_flops_per_s={"fp32": 66.9e12},
    vector_flops_per_s=66.9e12,
    launch_latency_us=1.0,
)


def _cost(flops: int, nbytes: int, family: str = "matmul", precision: str = "fp32") -> OpCost:
    return OpCost("mm", family, flops, nbytes // 2, nbytes - nbytes // 2, precision)


def test_reference_gemm_example() -> None:
    # gpu-models.md §6.1: memory time 14.0 us at 900 GB/s, compute time 32 us at 66.9 TF.
    point = place(_cost(2 * 1024**3, 12_582_912), BOOK)
    assert 12_582_912 / 900e9 * 1e6 == pytest.approx(13.98, abs=0.01)
    assert point.roof_time_us == pytest.approx(2 * 1024**3 / 66.9e12 * 1e6)
    assert point.bound == "compute"


def test_measured_time_gives_achieved_and_lost() -> None:
    point = place(_cost(2 * 1024**3, 12_582_912), BOOK, measured_us=64.2)
    assert point.achieved_flops_per_s == pytest.approx(2 * 1024**3 / 64.2e-6)
    assert point.time_lost_us == pytest.approx(64.2 - point.roof_time_us)
    assert point.roof_pct == pytest.approx(100 * point.roof_time_us / 64.2)
    with pytest.raises(InputError):
        place(_cost(1, 1), BOOK, measured_us=-1.0)


def test_bound_classes() -> None:
    assert place(_cost(10**6, 10**8, "elementwise"), BOOK).bound == "memory"
    assert place(_cost(10, 10, "elementwise"), BOOK).bound == "latency"
    unknown = OpCost("foo", "no_cost_model", 0, 0, 0, "fp32", has_model=False)
    assert place(unknown, BOOK, measured_us=5.0).bound == "unknown"


@given(
    flops=st.integers(0, 10**13),
    nbytes=st.integers(1, 10**11),
    measured=st.floats(0.01, 1e7),
    family=st.sampled_from(["matmul", "elementwise"]),
)
def test_roofline_never_exceeds_a_ceiling(
    flops: int, nbytes: int, measured: float, family: str
) -> None:
    point = place(_cost(flops, nbytes, family), BOOK, measured_us=measured)
    assert point.roof_time_us >= flops / 66.9e12 * 1e6 * (1 - 1e-12)
    assert point.roof_time_us >= nbytes / 900e9 * 1e6 * (1 - 1e-12)
    assert point.time_lost_us >= 0
    achieved = flops / (point.roof_time_us * 1e-6) if point.roof_time_us else 0.0
    assert achieved <= 66.9e12 * (1 + 1e-9)  # at the roof time an op runs at most at the peak


def test_datasheet_ceilings_come_from_the_hardware_database() -> None:
    h200 = ceilings_for_gpu("NVIDIA H200")
    assert h200.matmul_flops_per_s["bf16"] == pytest.approx(989.4e12)  # §6.4, dense
    assert h200.memory_bytes_per_s == pytest.approx(4.8e12)
    assert h200.matmul_peak("fp32", allow_tf32=True) == pytest.approx(494.7e12)
    # §6.5: ridge of BF16 on the H200 is 206 FLOP/B
    point = place(_cost(10**12, 10**9, precision="bf16"), h200)
    assert point.ridge_flop_per_byte == pytest.approx(206, abs=0.5)


def test_ceilings_round_trip(tmp_path) -> None:
    path = tmp_path / "c.json"
    save_ceilings(BOOK, path)
    assert load_ceilings(path) == BOOK
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError):
        load_ceilings(tmp_path / "bad.json")
