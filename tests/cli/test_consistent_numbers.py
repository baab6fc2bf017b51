"""GIVEN inputs where a number used to contradict another WHEN the command runs THEN what it
prints agrees with itself (issue 17, item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiprof.cli.main import main
from aiprof.distributed.fit import fit_alpha_beta

DATA = Path(__file__).parents[1] / "data"


def test_a_gpu_trace_without_device_properties_is_not_called_cpu_only(capsys) -> None:
    assert main(["summary", "example:two_ranks"]) == 0
    out = capsys.readouterr().out
    assert "GPU busy: 44.5%" in out
    assert "CPU only" not in out and "no deviceProperties" in out
    assert main(["summary", "example:cpu_only"]) == 0
    assert "none (CPU only)" in capsys.readouterr().out


def test_no_bank_conflict_advice_on_a_kernel_without_conflicts(capsys) -> None:
    assert main(["kernels", "--csv-input", str(DATA / "gpu_models" / "kernels_example.csv"),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc if isinstance(doc, list) else next(v for v in doc.values() if isinstance(v, list))
    checked = 0
    for row in rows:
        for stall in row["top_stalls"]:
            if row["bank_conflicts"] == 0:
                fix = stall["fix"]
                assert "bank conflicts;" not in fix and "fewer conflicts" not in fix
                checked += stall["reason"] in ("short_scoreboard", "mio_throttle")
    assert checked >= 1


def test_a_held_latency_says_so_and_keeps_the_measured_floor(capsys) -> None:
    # times grow faster than size, so the unconstrained latency is negative
    fit = fit_alpha_beta("allreduce", 2, [1e6, 2e6, 4e6, 8e6], [115.0, 250.0, 520.0, 1100.0])
    assert fit.alpha_clamped and fit.alpha_us == 0.0 and fit.floor_us == 115.0
    from aiprof.report.distributed_terminal import _render_fits

    _render_fits("fit", [fit])
    out, err = capsys.readouterr()
    assert "0 (held)" in out and "115.0" in out and "held at 0" in err


def test_pipeline_step_time_comes_from_the_split(capsys) -> None:
    assert main(["pipeline", "--stages", "8", "--microbatches", "32", "--layers", "96",
                 "--layer-time-us", "1000", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    slowest = doc["partition"]["max_stage_time_us"]
    gpipe = next(b for b in doc["bubbles"] if b["schedule"] == "gpipe")
    assert gpipe["step_time_us"] == pytest.approx((32 + 8 - 1) * slowest)
    assert main(["pipeline", "--stages", "4", "--microbatches", "8"]) == 0
    table = capsys.readouterr().out
    assert "│        0 │" not in table and "chapter" not in table


def test_infer_stages_takes_the_image_size_of_the_users_model(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    (tmp_path / "my.py").write_text(
        "import torch\n"
        "def make():\n"
        "    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(),\n"
        "                               torch.nn.Linear(4 * 30 * 30, 10))\n")
    monkeypatch.chdir(tmp_path)
    fast = ["--batch-size", "2", "--iters", "1", "--warmup", "0", "--json"]
    assert main(["infer-stages", "--model", "my.py:make", *fast]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--input-shape 3,H,W" in err and "2x3x224x224" in err
    assert main(["infer-stages", "--model", "my.py:make", "--input-shape", "3,32,32", *fast]) == 0
    assert json.loads(capsys.readouterr().out)["report"]["batch_size"] == 2


def test_memory_says_when_activations_are_not_counted(capsys) -> None:
    assert main(["memory", "--params", "7.5e9", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["activations_counted"] is False and "--layers" in doc["notes"][0]
    assert main(["memory", "--params", "7.5e9"]) == 0
    assert "not counted" in capsys.readouterr().out
    assert main(["memory", "--params", "7e9", "--layers", "32"]) == 2  # half a shape: one line
    assert "--hidden" in capsys.readouterr().err
    assert main(["memory", "--params", "7e9", "--layers", "32", "--hidden", "4096", "--heads",
                 "32", "--seq", "2048", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["activations_counted"] and doc["activations_gb_per_gpu"] > 0


def test_scaling_starts_from_the_collectives_the_trace_measured(capsys) -> None:
    assert main(["scaling", "example:a100_nccl", "--ranks", "2,8", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    measured = doc["inputs"]["measured_allreduce_us"]
    assert doc["inputs"]["measured_ranks"] == 2 and measured > 10_000  # 15.6 ms per step
    at_two = next(p for p in doc["points"] if p["num_ranks"] == 2)["comm_us"]
    assert measured / 2 < at_two < measured * 2  # not the NVLink preset's 0.23 ms
    assert doc["assumptions"][0].startswith("link: fitted to the trace's")
    assert main(["scaling", "example:a100_nccl", "--ranks", "2", "--link", "nvlink"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps lines at the terminal width
    assert "nvlink preset" in out and "not measured" in out and "check: the trace measured" in out
