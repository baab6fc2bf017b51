"""Hardware look-up: names from real traces, compute capabilities, AMD, peaks."""

from __future__ import annotations

import gzip
import json

import pytest
from tests.conftest import require

from aiprof.errors import InputError, UnsupportedDeviceError
from aiprof.hardware import ARCHES, PRODUCTS, lookup, spec_from_device_properties


@pytest.mark.parametrize("name,product,cc", [
    ("NVIDIA H200", "H200 SXM 141GB", (9, 0)),
    ("Tesla V100-SXM2-32GB", "V100 SXM2", (7, 0)),
    ("NVIDIA A100-PG509-200", "A100 SXM4 40GB", (8, 0)),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB", (8, 0)),
    ("NVIDIA H100 80GB HBM3", "H100 SXM5 80GB", (9, 0)),
    ("NVIDIA H100 PCIe", "H100 PCIe 80GB", (9, 0)),
    ("NVIDIA L4", "L4", (8, 9)),
    ("NVIDIA L40S", "L40S", (8, 9)),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", (8, 9)),
    ("NVIDIA B200", "B200", (10, 0)),
])
def test_lookup_by_device_name(name, product, cc):
    spec = lookup(name)
    assert spec.product is not None and spec.product.name == product
    assert (spec.arch.major, spec.arch.minor) == cc


@pytest.mark.parametrize("text", ["sm_90", "9.0", "sm90", "90"])
def test_lookup_by_compute_capability(text):
    spec = lookup(text)
    assert spec.arch.name == "sm_90" and spec.product is None


def test_unknown_names_raise():
    for text in ("sm_42", "Voodoo 3dfx"):
        with pytest.raises(UnsupportedDeviceError):
            lookup(text)


def test_arch_table_is_consistent_with_cuda_properties():
    # H200 cudaDeviceProp measured values (reference §1.3).
    sm90 = ARCHES[(9, 0)]
    assert sm90.smem_per_sm_bytes == 233_472 and sm90.smem_per_block_optin_bytes == 232_448
    assert sm90.reserved_smem_per_block_bytes == 1024 and sm90.max_warps_per_sm == 64
    for arch in ARCHES.values():
        assert arch.smem_per_block_optin_bytes <= arch.smem_per_sm_bytes
        if arch.smem_configs_kib:
            assert arch.smem_configs_kib[-1] * 1024 == arch.smem_per_sm_bytes


def test_hopper_peaks_follow_the_clock_arithmetic():
    # Reference §6.4: 33,792 FP32 FLOP/clk * 1.98 GHz; 540,672 dense FP16 FLOP/clk * 1.83 GHz.
    h200 = lookup("H200")
    assert h200.peak_flops("float32") == pytest.approx(33_792 * 1.98e9, rel=2e-3)
    assert h200.peak_flops("torch.bfloat16") == pytest.approx(540_672 * 1.83e9, rel=2e-3)
    assert h200.peak_flops("fp8") == pytest.approx(2 * h200.peak_flops("fp16"), rel=1e-4)
    assert h200.mem_bandwidth_bytes_per_s == 4.8e12
    assert lookup("A100 80GB").peak_flops("fp16") == pytest.approx(108 * 2048 * 1.41e9, rel=2e-3)


def test_every_product_has_fp32_and_bandwidth_and_a_source():
    for product in PRODUCTS:
        spec = lookup(product.name)
        assert spec.peak_flops("fp32") > 0 and spec.mem_bandwidth_bytes_per_s > 0
        assert product.source


def test_missing_peak_and_arch_only_spec_raise():
    with pytest.raises(UnsupportedDeviceError):
        lookup("A100 80GB").peak_flops("fp8")
    with pytest.raises(UnsupportedDeviceError):
        lookup("sm_90").peak_flops("fp16")
    with pytest.raises(InputError):
        lookup("H200").peak_flops("complex128")


def _device_properties(path):
    with gzip.open(path, "rt") as handle:
        return json.load(handle)["deviceProperties"]


def test_amd_mi250_is_not_mistaken_for_hopper(public_traces):
    props = _device_properties(public_traces / "amd_trace" /
                               "mi250_minitoy_train_ROCm6_2_kineto.json.gz")[0]
    assert props["computeMajor"] == 9 and props["warpSize"] == 64
    spec = spec_from_device_properties(props)
    assert spec.vendor == "amd" and not spec.occupancy_supported and spec.num_sms == 104


def test_a100_trace_properties_give_sm80_with_device_values(public_traces):
    props = _device_properties(require(public_traces / "negative_queue_length_values_check") /
                               "rank0.json.gz")[0]
    spec = spec_from_device_properties(props)
    assert spec.arch.name == "sm_80" and spec.num_sms == props["numSms"] == 108
    assert spec.arch.smem_per_sm_bytes == props["sharedMemPerMultiprocessor"]
    assert spec.product.name == "A100 SXM4 80GB"


def test_live_device_through_nvml_when_torch_has_no_gpu(monkeypatch):
    import sys
    import types

    import torch

    from aiprof.measure.device import live_device

    fake = types.SimpleNamespace(
        NVMLError=RuntimeError, nvmlInit=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda index: ("handle", index),
        nvmlDeviceGetName=lambda handle: b"NVIDIA H100 80GB HBM3",
        nvmlDeviceGetCudaComputeCapability=lambda handle: (9, 0))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    spec = live_device()
    assert spec.product.name == "H100 SXM5 80GB" and spec.arch.name == "sm_90"
    assert spec.num_sms == 132


def test_live_device_without_torch_gpu_or_nvml_is_a_clear_error(monkeypatch):
    import sys

    import torch

    from aiprof.errors import MissingDependencyError
    from aiprof.measure.device import live_device

    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(MissingDependencyError):
        live_device()


def test_textbook_sm_by_name():
    spec = lookup("textbook")
    assert spec.arch.max_blocks_per_sm == 16 and spec.arch.smem_per_sm_bytes == 48 * 1024
