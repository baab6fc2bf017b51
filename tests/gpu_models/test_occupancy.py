"""Occupancy model against values the CUDA runtime API returned on real GPUs.

Expected values are the measured tables of ../shared/reference/gpu-models.md §1.6, §1.7 and §1.9
(cudaOccupancyMaxActiveBlocksPerMultiprocessor on an H200, and the published sm_80 results), not
output of this code.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiprof.errors import InputError, UnsupportedDeviceError
from aiprof.gpu import occupancy
from aiprof.hardware import TEXTBOOK_SM, ArchLimits

# §1.6: blocks per SM on sm_90 at 128 / 256 / 512 / 1024 threads, no shared memory.
REGISTER_TABLE = {
    32: (16, 8, 4, 2), 33: (12, 6, 3, 1), 40: (12, 6, 3, 1), 48: (10, 5, 2, 1),
    64: (8, 4, 2, 1), 65: (7, 3, 1, 0), 72: (7, 3, 1, 0), 128: (4, 2, 1, 0), 255: (2, 1, 0, 0),
}


@pytest.mark.parametrize("regs", sorted(REGISTER_TABLE))
def test_register_rounding_matches_the_api_on_sm90(regs):
    got = tuple(occupancy("sm_90", b, regs, 0).active_blocks_per_sm for b in (128, 256, 512, 1024))
    assert got == REGISTER_TABLE[regs]


# §1.7: 256 threads, 16 registers; rows = dynamic smem, columns = carveout -1, 0, 25, 50, 100.
CARVEOUT_TABLE = {
    0: (8, 8, 8, 8, 8), 1024: (8, 4, 8, 8, 8), 4096: (8, 1, 8, 8, 8), 8192: (8, 1, 7, 8, 8),
    12288: (8, 1, 4, 8, 8), 16384: (8, 1, 3, 7, 8), 24576: (8, 1, 2, 5, 8),
    32768: (6, 1, 1, 4, 6), 49152: (4, 1, 1, 2, 4), 65536: (3, 1, 1, 2, 3),
    98304: (2, 1, 1, 1, 2), 131072: (1, 1, 1, 1, 1), 200000: (1, 1, 1, 1, 1),
}


@pytest.mark.parametrize("dynamic", sorted(CARVEOUT_TABLE))
def test_carveout_and_dynamic_smem_match_the_api_on_sm90(dynamic):
    got = tuple(occupancy("sm_90", 256, 16, dynamic, carveout=c).active_blocks_per_sm
                for c in (-1, 0, 25, 50, 100))
    assert got == CARVEOUT_TABLE[dynamic]


def test_textbook_example_on_the_idealized_sm_is_six_blocks_75pct():
    result = occupancy(TEXTBOOK_SM, 256, 32, 8192)
    assert (result.active_blocks_per_sm, result.occupancy, result.limiter) == (6, 0.75,
                                                                              "shared_memory")
    assert result.blocks_limit_registers == 8 and result.blocks_limit_warps == 8


def test_textbook_sm_with_sm80_rules_gives_five_blocks():
    sm = ArchLimits(name="textbook-sm80-rules", max_blocks_per_sm=16, smem_per_sm_bytes=49152,
                    smem_alloc_unit_bytes=128, reserved_smem_per_block_bytes=1024)
    result = occupancy(sm, 256, 32, 8192)
    assert result.allocated_shared_mem_per_block_bytes == 9216
    assert (result.active_blocks_per_sm, result.occupancy) == (5, 0.625)


@pytest.mark.parametrize("arch,blocks,smem_limit", [("sm_80", 8, 18), ("sm_90", 8, 25)])
def test_textbook_kernel_on_real_hopper_and_ampere_is_full(arch, blocks, smem_limit):
    result = occupancy(arch, 256, 32, 8192)
    assert result.active_blocks_per_sm == blocks and result.occupancy == 1.0
    assert result.blocks_limit_shared_mem == smem_limit


@pytest.mark.parametrize("arch,carveout,blocks", [
    ("sm_80", 0, 1), ("sm_80", 10, 3), ("sm_80", 20, 7), ("sm_80", 39, 7), ("sm_80", 40, 8),
    ("sm_90", 0, 1), ("sm_90", 10, 3), ("sm_90", 28, 7), ("sm_90", 29, 8), ("sm_90", 100, 8),
])
def test_forced_carveout_table(arch, carveout, blocks):
    assert occupancy(arch, 256, 32, 8192, carveout=carveout).active_blocks_per_sm == blocks


@pytest.mark.parametrize("arch,blocks", [("sm_86", 6), ("sm_89", 6), ("sm_120", 6), ("sm_75", 4),
                                         ("sm_70", 8)])
def test_textbook_kernel_on_other_archs(arch, blocks):
    result = occupancy(arch, 256, 32, 8192)
    assert result.active_blocks_per_sm == blocks and result.occupancy == 1.0


def test_over_48k_needs_opt_in():
    assert occupancy("sm_90", 256, 32, 60_000, opt_in=False).active_blocks_per_sm == 0
    assert occupancy("sm_90", 256, 32, 60_000).active_blocks_per_sm == 3  # 233,472 // 61,056


@pytest.mark.parametrize("kwargs", [dict(block_size=0), dict(block_size=1025),
                                    dict(registers_per_thread=-1), dict(shared_mem_per_block=-5),
                                    dict(carveout=101)])
def test_bad_input_raises_input_error(kwargs):
    base = dict(block_size=256, registers_per_thread=32, shared_mem_per_block=0)
    carveout = kwargs.pop("carveout", None)
    with pytest.raises(InputError):
        occupancy("sm_90", **{**base, **kwargs}, carveout=carveout)


def test_unknown_arch_raises():
    with pytest.raises(UnsupportedDeviceError):
        occupancy("sm_99", 256, 32, 0)


ARCHS = st.sampled_from(["sm_52", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90",
                         "sm_100", "sm_120"])


@given(ARCHS, st.integers(1, 1024), st.integers(0, 254), st.integers(0, 100_000),
       st.integers(1, 64), st.integers(0, 60_000))
def test_more_registers_or_smem_never_raise_occupancy(arch, block, regs, smem, d_regs, d_smem):
    base = occupancy(arch, block, regs, smem)
    assert 0.0 <= base.occupancy <= 1.0
    assert occupancy(arch, block, min(regs + d_regs, 255), smem).occupancy <= base.occupancy
    assert occupancy(arch, block, regs, smem + d_smem).occupancy <= base.occupancy


@given(ARCHS, st.integers(1, 1024), st.integers(0, 255), st.integers(0, 100_000))
def test_result_is_the_minimum_of_its_limits(arch, block, regs, smem):
    r = occupancy(arch, block, regs, smem)
    limits = [r.blocks_limit_registers, r.blocks_limit_shared_mem, r.blocks_limit_warps,
              r.blocks_limit_blocks, r.blocks_limit_barriers]
    assert r.active_blocks_per_sm == min(v for v in limits if v is not None)
    assert r.active_warps_per_sm <= r.max_warps_per_sm


@given(ARCHS, st.integers(0, 255), st.integers(0, 120_000))
def test_best_block_size_is_a_largest_maximum_of_resident_threads(arch, regs, smem):
    from aiprof.gpu.occupancy_sweep import best_block_size

    best = best_block_size(arch, registers_per_thread=regs, shared_mem_per_block=smem)
    threads = {b: occupancy(arch, b, regs, smem).active_blocks_per_sm * b
               for b in range(32, 1025, 32)}
    top = max(threads.values())
    got = best.occupancy.active_blocks_per_sm * best.block_size
    assert got == top
    # The runtime stops at the first size (from the top) that reaches the maximum.
    assert best.block_size == max(b for b, t in threads.items() if t == top)
