"""cuDNN's layout conversions around an NCHW convolution on tensor cores
(``diagnose/nchw_conversions.py``), measured on the H200 recordings and applied to the TF32 and
bf16 paths (``rules/tensor_cores_unused.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from aiprof.diagnose import nchw_conversions as nc
from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.precision import tf32_rows
from aiprof.diagnose.rules import tensor_cores_unused
from aiprof.trace import load_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "diagnose"
SEVENTH = DATA / "counterfactual_seventh"
NCHW_NETS = ("resnet34_nchw_bf16_train", "unet_bn_nchw_empty_cache_train",
             "deeplabv3_mnv3_mask_train", "efficientnet_b0_pageable_nchw_train",
             "resnet18_b4_train")
H200_BANDWIDTH = 4.8e12
"""The H200's datasheet DRAM bandwidth (``Context.memory_bytes_per_s`` on its traces)."""


def _record(name: str) -> Path:
    return SEVENTH / f"{name}.aiprof" / "rank0.trace.json.gz"


def test_the_bandwidth_share_is_the_median_of_the_recorded_conversions() -> None:
    """GIVEN the seventh recording's five NCHW conv nets (bf16 autocast, and resnet18_b4 in FP32
    with cuDNN's TF32 allowed, whose ``tf32`` NHWC kernels get conversions too), WHEN each conv
    op's conversions are read as two passes over its tensors, THEN the constant is their
    median's share of the H200's bandwidth, and every net converts."""
    rates = [nc.conversion_rates(load_trace(_record(name))) for name in NCHW_NETS]
    assert all(len(r) >= 30 for r in rates)
    share = float(np.median(np.concatenate(rates))) / H200_BANDWIDTH
    assert share == pytest.approx(nc.CONVERSION_BANDWIDTH_FRACTION, abs=0.005)


def test_every_fp32_nchw_convolution_gets_its_conversions_and_channels_last_none() -> None:
    """GIVEN FCN-ResNet50's FP32 inference (every convolution NCHW, on CUDA cores), WHEN the
    TF32 path's conversions are read, THEN each forward convolution gets one, two passes over its
    tensors in FP32 at the measured share; bf16 moves half the bytes. A channels_last net's
    convolutions (conv_misaligned, bf16 NHWC) get none."""
    trace = load_trace(_record("fcn_resnet50_fp32_infer"))
    ctx = Context(trace, DiagnoseOptions())
    rows = tf32_rows(trace, ctx.tensor_cores)
    tf32 = nc.conversion_durations(trace, rows, 1.0, H200_BANDWIDTH)
    bf16 = nc.conversion_durations(trace, rows, 0.5, H200_BANDWIDTH)
    ops = trace.cpu_ops
    convs = sum(trace.name(int(i)) == "aten::cudnn_convolution" for i in ops.name_id)
    assert len(tf32) == convs > 0
    assert sum(bf16.values()) == pytest.approx(sum(tf32.values()) / 2)
    nhwc = load_trace(_record("conv_misaligned_bf16_infer"))
    kernels = np.flatnonzero(nhwc.gpu_ops.op_row >= 0)
    assert nc.conversion_durations(nhwc, kernels, 1.0, H200_BANDWIDTH) == {}


@pytest.mark.parametrize("suite", ["", "more_suites/a/", "more_suites/b/", "more_suites/d/"])
def test_the_tf32_path_of_an_nchw_conv_net_pays_its_conversions(suite: str) -> None:
    """GIVEN the planted FP32 NCHW conv net (four recordings; TF32 measured 59.4-59.7%), WHEN
    its TF32 path is replayed, THEN within 5 points of the measured gain (56.4-69.8% without
    the conversions: the TF32 kernels' share of their peak alone)."""
    ctx = Context(load_trace(DATA / f"{suite}fp32_conv_no_tf32.trace.json.gz"),
                  DiagnoseOptions())
    tf32 = tensor_cores_unused.paths(ctx)["tf32"]
    assert ctx.gain_pct(tf32) == pytest.approx(59.5, abs=5.0)
