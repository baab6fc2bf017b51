"""Which reductions Inductor splits (``diagnose/compiled_reductions.py``), against the partial-sum
buffers the H200's compiled steps recorded for their Triton kernels."""

from __future__ import annotations

import re
from math import prod
from pathlib import Path

import numpy as np

from aiprof.diagnose import compiled_reductions as cr
from aiprof.trace import load_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "diagnose"
STATISTICS = re.compile(r"^triton_red_fused__native_batch_norm_legit_functional_\d+$")
"""Inductor's BatchNorm statistics kernels (partial sums: no running-statistics ``copy_``)."""


def partial_sums(path: Path) -> list[tuple[list[int], list[int]]]:
    """Per statistics kernel launched: (its input's dims, its partial-sum buffer's: the last
    ``[1, C, 1, 1, S]`` argument, after the welford inputs of a second level)."""
    trace = load_trace(path)
    ops = trace.cpu_ops
    out = []
    for r in np.flatnonzero(trace.strings.mask(ops.name_id, STATISTICS)).tolist():
        dims = [d for d in trace.json_value(int(ops.input_dims_id[r])) or [] if d]
        if len(dims) > 1 and len(dims[-1]) == 5 and dims[-1][0] == 1:
            out.append((dims[0], dims[-1]))
    return out


def test_the_split_factor_is_the_partial_sums_the_compiled_resnet34_wrote() -> None:
    """GIVEN the compiled ResNet-34 step (channels-last, batch 64; 132 SMs), WHEN each
    BatchNorm statistics kernel's partial-sum buffer ``[1, C, 1, 1, S]`` is read, THEN ``S``
    is the outer split factor of C outputs over what the kernel reduces (the activation's
    N x H x W the first level, the S partial sums before the second), at all four widths
    (64-512 channels: 1,024, 392, 98 and 25 partial sums), and a level is counted where and
    only where there is one more kernel."""
    seen = partial_sums(DATA / "compiled_second"
                        / "resnet34_nchw_bf16_train.compiled.trace.json.gz")
    first = [(x, p) for x, p in seen if len(x) == 4]
    second = [(x, p) for x, p in seen if len(x) == 5]
    assert {x[1] for x, _ in first} == {64, 128, 256, 512}
    for x, p in first:
        assert cr.split_factor(x[1], prod(x) // x[1], 132, outer=True) == p[-1], (x, p)
    assert second and all(cr.split_factor(x[1], x[-1], 132, outer=True) == p[-1]
                          for x, p in second)
    assert cr.reduction_levels(64, 200704, 132, outer=True) == 2  # 1,024 -> 8 -> 1
    assert cr.reduction_levels(256, 12544, 132, outer=True) == 1  # 98 -> 1
    assert cr.reduction_levels(512, 3136, 132, outer=True) == 1


def test_an_inner_reduction_splits_only_with_few_outputs_and_many_elements() -> None:
    """GIVEN NCHW BatchNorm statistics (the spatial dimension inner) as the compiled DeepLabV3
    step ran them (132 SMs), WHEN split, THEN every width's partial sums are the inner split
    factor, as its buffers say (16 channels over 262,144 elements: 32; 240 over 16,384: 2); at
    most 8,192 elements a channel or 264 channels and more are one kernel."""
    seen = partial_sums(DATA / "compiled" / "deeplabv3_mnv3_mask_train.compiled.trace.json.gz")
    sizes = {(x[1], prod(x) // x[1], p[-1]) for x, p in seen if len(x) == 4}
    assert len(sizes) >= 9 and (16, 262144, 32) in sizes  # nine widths, 16-240 channels
    assert all(cr.split_factor(c, r, 132, outer=False) == s for c, r, s in sizes), sizes
    assert cr.split_factor(80, 8192, 132, outer=False) == 1
    assert cr.split_factor(264, 1 << 20, 132, outer=False) == 1


def test_held_out_the_unets_nchw_statistics_split_as_the_rule_says() -> None:
    """GIVEN the compiled UNet step (NCHW BatchNorm, batch 16, 32-256 channels), recorded after
    the rule was written (H200 2026-12-02 03:54 UTC, ``compiled_sixth/``), WHEN each statistics
    kernel's partial sums are read, THEN all 14 are the inner split factor (16, 8, 8 and 2 at
    the four widths), none the outer one."""
    seen = partial_sums(DATA / "compiled_sixth"
                        / "unet_bn_nchw_empty_cache_train.compiled.trace.json.gz")
    first = [(x, p) for x, p in seen if len(x) == 4]
    assert len(first) == 14
    for x, p in first:
        assert cr.split_factor(x[1], prod(x) // x[1], 132, outer=False) == p[-1], (x, p)
        assert cr.split_factor(x[1], prod(x) // x[1], 132, outer=True) != p[-1]
