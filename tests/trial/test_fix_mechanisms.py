"""Each fix takes effect in a real variant process running a real (unmodified) script.

GIVEN the observe workload (conv + DataLoader + Adam + empty_cache), WHEN it runs under
``aiprof.measure.fixes.variant --fix NAME`` as ``aiprof try`` starts it (forked from one fork
server; ``cudnn_benchmark`` and ``expandable_segments`` by exec), THEN the script itself sees
the change. The variants run once, in a module fixture.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from trial_helpers import WORKLOADS, env, read, start_variant, variant_command

from aiprof.trial.forkserver import ForkServer, preload_names
from aiprof.trial.launcher import launch
from aiprof.trial.plan import Protocol, VariantSpec
from aiprof.trial.runs import FAILED, TIMEOUT

pytestmark = pytest.mark.cpu_hog

FIXES = ("none", "tf32", "bf16", "cudnn_benchmark", "channels_last", "dataloader",
         "fused_optimizer", "no_empty_cache", "expandable_segments")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Any],
                                                                      dict[str, Any]]]:
    root = tmp_path_factory.mktemp("fixes")
    script = str(WORKLOADS / "observe.py")
    forks = ForkServer(preload_names([(script,)]), env(), root / "forkserver.log")
    out = {}
    try:
        for fix in FIXES:
            folder = root / fix
            folder.mkdir()
            spec = VariantSpec(fix, fix, (script, str(folder / "observed.json")))
            run = launch(spec, 0, Protocol(rounds=1, steps=2, warmup_steps=3, timeout_s=300),
                         folder, environ=env(), server=forks)
            assert run.status not in (FAILED, TIMEOUT), (fix, run.reason, run.tail)
            observed = json.loads((folder / "observed.json").read_text())
            out[fix] = (observed, json.loads((folder / f"r0-{fix}" / "rank0.json").read_text()))
    finally:
        forks.close()
    assert not forks.serves("cudnn_benchmark") and forks.serves("tf32")
    return out


def test_base_changes_nothing(runs: dict[str, Any]) -> None:
    observed, result = runs["none"]
    assert result["num_steps"] == result["needed_steps"] == 5
    assert len(result["step_us"]) == 2 and all(t > 0 for t in result["step_us"])
    assert result["ended"] == "stopped" and result["step_source"] == "optimizer"
    assert observed["step"] == 4  # step 5 was stopped inside optimizer.step()
    assert observed["num_workers"] == 0 and not observed["fused"]
    assert not observed["conv_weight_channels_last"] and not observed["autocast_cpu"]
    assert observed["empty_cache_module"] == "torch.cuda.memory"
    assert observed["matmul_allow_tf32"] is False and observed["cudnn_benchmark"] is False
    assert "expandable_segments" not in observed["alloc_conf"]
    assert len(result["watch"]["values"]) == 3 and result["watch"]["source"] == "variable loss"


def test_tf32_sets_the_flags_and_says_cpu_does_not_use_them(runs: dict[str, Any]) -> None:
    observed, result = runs["tf32"]
    assert observed["matmul_allow_tf32"] is True and observed["cudnn_allow_tf32"] is True
    assert "no CUDA device" in result["not_applicable"]


def test_bf16_autocasts_the_steps(runs: dict[str, Any]) -> None:
    observed, result = runs["bf16"]
    assert observed["autocast_cpu"] is True
    assert observed["conv_output_dtype"] == "torch.bfloat16"
    assert result["not_applicable"] == ""
    base_loss = runs["none"][1]["watch"]["values"]
    assert result["watch"]["values"] != base_loss  # numerics did change
    assert abs(result["watch"]["values"][0] - base_loss[0]) < 0.05 * abs(base_loss[0])


def test_cudnn_benchmark_flag(runs: dict[str, Any]) -> None:
    observed, result = runs["cudnn_benchmark"]
    assert observed["cudnn_benchmark"] is True
    assert result["facts"]["conv_calls_step1"] >= 1
    assert result["not_applicable"]  # no cuDNN on this CPU build


def test_channels_last_converts_weights_and_inputs(runs: dict[str, Any]) -> None:
    observed, result = runs["channels_last"]
    assert observed["conv_weight_channels_last"] is True
    assert observed["conv_input_channels_last"] is True
    assert result["facts"]["converted_convs"] == 1 and result["not_applicable"] == ""


def test_dataloader_gets_workers(runs: dict[str, Any]) -> None:
    observed, result = runs["dataloader"]
    assert observed["num_workers"] >= 1
    assert observed["persistent_workers"] is True and observed["prefetch_factor"] == 4
    assert result["facts"]["loaders_changed"] == 1 and result["not_applicable"] == ""
    # the sampler runs in the main process: the same batches, the same loss
    assert result["watch"]["values"] == runs["none"][1]["watch"]["values"]


def test_optimizer_is_fused_on_cpu(runs: dict[str, Any]) -> None:
    observed, result = runs["fused_optimizer"]
    assert observed["fused"] is True  # torch >= 2.4 has fused CPU Adam
    assert result["facts"]["fused"] == 1 and result["not_applicable"] == ""


def test_empty_cache_is_a_no_op(runs: dict[str, Any]) -> None:
    observed, result = runs["no_empty_cache"]
    assert observed["empty_cache_module"] != "torch.cuda.memory"
    assert result["facts"]["empty_cache_calls"] == 4  # one per finished step


def test_expandable_segments_in_the_environment(runs: dict[str, Any]) -> None:
    observed, result = runs["expandable_segments"]
    assert "expandable_segments:True" in observed["alloc_conf"]
    assert "no CUDA device" in result["not_applicable"]


def test_inference_steps_from_a_function_and_the_largest_module(tmp_path: Path) -> None:
    command = variant_command("channels_last", tmp_path / "result", "infer_conv.py",
                              warmup=3, steps=4, steps_from="infer_batch")
    done = subprocess.run(command, env=env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "should have been stopped" not in done.stdout
    result = json.loads((tmp_path / "result" / "rank0.json").read_text())
    assert result["step_source"] == "named" and result["num_steps"] == 7
    assert len(result["step_us"]) == 4 and result["facts"]["converted_convs"] == 1
    assert result["watch"]["values"] == []  # no loss in an inference script


@pytest.mark.slow
def test_compiled_module_runs(tmp_path: Path) -> None:
    process = start_variant("compile", tmp_path / "compile", warmup=3, steps=3)
    assert process.wait(timeout=600) == 0, (tmp_path / "compile" / "log").read_text()
    observed, result = read(tmp_path / "compile")
    assert observed["compiled"] is True
    assert result["facts"] == {"compiled_module": "Sequential", "found_through": "optimizer"}
    assert len(result["step_us"]) == 3
