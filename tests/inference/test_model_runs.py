"""Stages, cold start, CUDA graphs and quantization on small standard models (CPU)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from aiprof.cli.main import main
from aiprof.errors import UnsupportedDeviceError
from aiprof.measure.inference.coldstart import measure_coldstart
from aiprof.measure.inference.cudagraph import measure_cuda_graph
from aiprof.measure.inference.quantize import (
    analyze_quantization,
    fake_quant_activation,
    fake_quant_weight,
    sqnr_db,
)
from aiprof.measure.inference.stages import run_stages

from .models import GPT2Block, tiny_bert, tiny_resnet

MODELS = Path(__file__).with_name("models.py")


def test_stages_caps_and_verdict_follow_the_timings():
    report = run_stages(tiny_resnet(), batch_size=2, source_hw=(64, 80), input_hw=(32, 32),
                        iters=3, warmup=1)
    names = [s.name for s in report.stages]
    assert names == ["decode", "resize", "normalize", "forward", "d2h", "postprocess"]
    for stage in report.stages:
        assert stage.cap_items_per_s == pytest.approx(2 / stage.timing.mean_us * 1e6)
    host_us = sum(s.timing.mean_us for s in report.stages if s.where == "host")
    assert report.host_cap_items_per_s == pytest.approx(2 / host_us * 1e6)
    assert (report.verdict == "cpu_bound") == (
        report.host_cap_items_per_s < report.device_cap_items_per_s)
    assert report.pinned_speedup is None  # no GPU here


def test_infer_stages_cli_json(capsys):
    code = main(["infer-stages", "--model", f"{MODELS}:tiny_resnet_with_input", "--batch-size",
                 "1", "--iters", "1", "--warmup", "0", "--json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["report"]["verdict"] in ("cpu_bound", "device_bound")


def test_coldstart_parts_add_up_and_file_holds_the_weights():
    report = measure_coldstart(tiny_resnet, lambda b: torch.randn(b, 3, 32, 32), iters=3)
    params = sum(p.numel() for p in tiny_resnet().state_dict().values())
    assert report.file_bytes >= 4 * params  # float32 weights and buffers
    parts = (report.read_us, report.deserialize_us, report.construct_us, report.to_device_us,
             report.first_inference_us)
    assert all(p > 0 for p in parts)
    assert report.cold_total_us == pytest.approx(sum(parts))
    assert report.first_over_warm == pytest.approx(report.first_inference_us / report.warm.p50_us)


def test_coldstart_cli_and_cuda_graph_needs_cuda(capsys):
    assert main(["coldstart", "--model", f"{MODELS}:tiny_bert", "--iters", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cuda_graph"] is None and doc["coldstart"]["warm"]["num_calls"] == 2
    assert main(["coldstart", "--model", f"{MODELS}:tiny_bert", "--cuda-graph"]) == 2
    assert "CUDA" in capsys.readouterr().err
    with pytest.raises(UnsupportedDeviceError):
        measure_cuda_graph(tiny_resnet(), torch.randn(1, 3, 32, 32), device="cpu")


@pytest.mark.gpu
def test_cuda_graph_replay_matches_eager_on_gpu():
    report = measure_cuda_graph(tiny_resnet(), torch.randn(4, 3, 32, 32), device="cuda")
    assert report.max_abs_diff < 1e-4
    assert report.speedup == pytest.approx(report.eager.p50_us / report.graph.p50_us)


def test_uniform_signal_sqnr_matches_quantization_noise_formula():
    # uniform on [-A, A] with step A/127: signal A²/3, noise step²/12 -> 10·log10(4·127²) dB
    x = torch.rand(1_000_000, dtype=torch.float64) * 2 - 1
    measured = sqnr_db(x, fake_quant_activation(x, 1.0 / 127))
    assert measured == pytest.approx(10 * math.log10(4 * 127**2), abs=0.1)


def test_weight_fake_quant_error_within_half_a_step_per_channel():
    w = torch.randn(8, 5, 3, 3)
    w[3] *= 100  # one channel with a large range does not hurt the others (per-channel scale)
    q = fake_quant_weight(w)
    scale = w.reshape(8, -1).abs().amax(1) / 127
    err = (w - q).reshape(8, -1).abs().amax(1)
    assert torch.all(err <= scale / 2 + 1e-6)
    assert torch.allclose(fake_quant_weight(q), q, atol=1e-5)


def test_layer_with_activation_outliers_is_kept_in_high_precision():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    x = torch.randn(64, 16)
    with torch.no_grad():  # a few huge activations into the second layer (LLM-style outliers)
        model[0].bias[:2] = 400.0
        x[:3] *= 30
    report = analyze_quantization(model, x, threshold_db=40)
    by_name = {r.name: r for r in report.layers}
    assert by_name["2"].outlier_ratio >= 1.0 and by_name["0"].saturation_pct > 0
    assert report.layers[0].model_sqnr_db == min(r.model_sqnr_db for r in report.layers)
    assert set(report.keep_high_precision) == {r.name for r in report.layers
                                               if r.model_sqnr_db < 40}


@pytest.mark.parametrize("make", [lambda: (GPT2Block(), torch.randn(2, 8, 32)), tiny_bert])
def test_quantization_of_transformer_blocks_is_finite(make):
    model, example = make()
    example = example(2) if callable(example) else example
    report = analyze_quantization(model, example)
    assert report.layers and all(math.isfinite(r.layer_sqnr_db) for r in report.layers)
    assert report.all_layers_model_sqnr_db <= max(r.model_sqnr_db for r in report.layers) + 1e-6


def test_quantize_cli_json(capsys):
    code = main(["quantize", "--model", f"{MODELS}:tiny_resnet_with_input", "--batch-size", "4",
                 "--json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)["report"]
    assert [r["kind"] for r in doc["layers"]].count("Conv2d") == 5
    assert doc["fp32_latency_us"] > 0


@pytest.mark.slow
def test_compile_first_call_and_repayment(capsys):
    assert main(["coldstart", "--model", f"{MODELS}:tiny_resnet_with_input", "--compile",
                 "--iters", "5", "--json"]) == 0
    compiled = json.loads(capsys.readouterr().out)["compile"]
    assert compiled["first_call_us"] > compiled["compiled"]["p50_us"]
    assert compiled["speedup"] == pytest.approx(
        compiled["eager"]["p50_us"] / compiled["compiled"]["p50_us"])
    saved = compiled["eager"]["p50_us"] - compiled["compiled"]["p50_us"]
    if saved > 0:
        assert compiled["calls_to_repay"] == pytest.approx(compiled["first_call_us"] / saved)
    else:
        assert compiled["calls_to_repay"] is None
