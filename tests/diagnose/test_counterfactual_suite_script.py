"""The counterfactual suite's script on CPU (--smoke): what it writes is what the score reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from aiprof.evaluation import load_suite

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "scripts" / "h200" / "counterfactual_suite.py"


def suite_module() -> object:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import counterfactual_suite  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return counterfactual_suite


def test_the_suite_is_what_issue_15_asks_for() -> None:
    suite = suite_module()
    workloads = suite.WORKLOADS  # type: ignore[attr-defined]
    names = [w.name for w in workloads]
    assert len(set(names)) == len(names) >= 24
    assert {w.kind for w in workloads} == {"transformers", "torchvision", "custom"}
    assert {w.mode for w in workloads} == {"train", "infer"}
    assert sum(len(w.causes) >= 2 for w in workloads) >= 4
    parts = suite.PARTS  # type: ignore[attr-defined]
    assert sorted(parts["1"] + parts["2"]) == sorted(names)
    categories = {f.name: f.category for f in suite.FIXES}  # type: ignore[attr-defined]
    assert categories == {
        "cuda_graph": "cpu_bound", "compile": "unfused_elementwise",
        "tf32": "tensor_cores_unused", "bf16_autocast": "tensor_cores_unused",
        "channels_last": "layout_conversion", "sdpa": "unfused_elementwise",
        "padded_shapes": "misaligned_shapes", "loader_workers": "dataloader",
        "host_prep_workers": "host_busy", "pinned_prefetch": "h2d_transfer",
        "sync_free": "host_sync", "no_empty_cache": "allocator_churn"}
    for w in workloads:  # every planted cause is a fix that changes the workload
        for cause in w.causes:
            fix = next(f for f in suite.FIXES if f.name == cause)  # type: ignore[attr-defined]
            assert w.applicability(fix) == "", (w.name, cause)


@pytest.mark.slow
def test_smoke_run_writes_labels_and_traces_the_score_reads(tmp_path: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path), "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "mlp_deep_b32_infer"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = tmp_path / "counterfactual"
    assert sorted(p.name for p in out.iterdir()) == [
        "labels-smoke.json", "plain-smoke.tar", "traces-smoke.tar"]
    for name in ("plain-smoke.tar", "traces-smoke.tar"):
        with tarfile.open(out / name) as tar:
            tar.extractall(out, filter="data")
    (only,) = load_suite(out)
    fixes = {f.name: f for f in only.fixes}
    assert len(fixes) == 12 and fixes["tf32"].gain_pct is not None
    assert fixes["cuda_graph"].gain_pct is None  # no CUDA device
    assert fixes["loader_workers"].gain_pct == 0.0  # nothing to change: no DataLoader
    assert only.plain_trace is not None and only.plain_trace.is_file()
    assert (only.trace / "rank0.trace.json.gz").is_file()
    row = json.loads((out / "labels-smoke.json").read_text())["workloads"][0]
    assert row["causes"] == ["cuda_graph"] and len(row["base_rounds_ms"]) == 2


def test_steps_that_call_their_model_several_times_record_as_many_calls(tmp_path: Path) -> None:
    """GIVEN the held-out steps of ``counterfactual/calls.py`` in --smoke sizes (a cell unrolled
    over 3 time steps, a convnet on 2 crops, a denoiser in 2 rounds), named on the command line,
    WHEN they run under the real torch.profiler on this CPU, THEN their records count as many
    calls of the model a step (``calls_per_step``); they stay out of the suite's parts."""
    from aiprof.diagnose.compiled_host import calls_per_step
    from aiprof.trace import load_trace

    calls = {"cell_bptt_train": 3, "multi_crop_convnet_train": 2, "refine_mlp_train": 2}
    env = {**os.environ, "OUT": str(tmp_path), "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--tag", "calls", *calls],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = tmp_path / "counterfactual"
    with tarfile.open(out / "traces-calls.tar") as tar:
        tar.extractall(out, filter="data")
    assert {w.name: calls_per_step(load_trace(w.trace / "rank0.trace.json.gz"))
            for w in load_suite(out)} == calls
    parts = suite_module().PARTS  # type: ignore[attr-defined]
    assert not set(calls) & set(parts["1"] + parts["2"])


def test_the_large_held_out_steps_run_when_named_and_stay_out_of_the_parts(
        tmp_path: Path) -> None:
    """GIVEN the transformers steps of ``counterfactual/large.py`` (both groups) in --smoke
    sizes, named on the command line, WHEN they run on this CPU THEN each records its fixes and
    an aiprof record, none fails, and no large step is in the suite's parts (torchvision's do
    not import beside this CPU build of torch; they ran on the H200)."""
    names = ["vit_wide_fp32_train", "roberta_fp32_train", "gpt2_eager_long_bf16_train",
             "llama_wide_fp32_train", "t5_small_fp32_train", "neox_fp32_train"]
    env = {**os.environ, "OUT": str(tmp_path), "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--tag", "large", *names],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    labels = json.loads((tmp_path / "counterfactual" / "labels-large.json").read_text())
    rows = {row["workload"]: row for row in labels["workloads"]}
    assert set(rows) == set(names)
    for name, row in rows.items():
        assert "error" not in row and row["capture_error"] == "", (name, row.get("error"))
        measured = [f for f in row["fixes"] if f.get("applicable") and "skipped" not in f]
        wanted = {"tf32"} | (set() if row["base_knobs"]["bf16"] else {"bf16_autocast"})
        assert {f["name"] for f in measured} >= wanted, name
    module = suite_module()
    large = [w.name for w in module.large.WORKLOADS + module.large.LATER]  # type: ignore[attr-defined]
    parts = module.PARTS  # type: ignore[attr-defined]
    assert len(large) == 13 and not set(large) & set(parts["1"] + parts["2"])


@pytest.mark.slow
def test_fix_twins_smoke_traces_both_variants_and_refuses_unknown_pairs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import fix_twins  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(SCRIPT.parent))
    monkeypatch.setenv("OUT", str(tmp_path))
    assert fix_twins.main(["--smoke", "mlp_deep_b32_infer:no_such_fix"]) == 2
    assert fix_twins.main(["--smoke", "mlp_deep_b32_infer:tf32"]) == 0
    out = tmp_path / "fix_twins"
    (row,) = json.loads((out / "fix_twins.json").read_text())["pairs"]
    assert row["workload"] == "mlp_deep_b32_infer" and row["fix"] == "tf32"
    assert set(row["rounds_ms"]) == {"base", "tf32"} and len(row["rounds_ms"]["base"]) == 3
    assert all(len(v) == 3 for v in row["host_ms_per_step"].values())
    assert all(s is not None and s > 0 for s in row["host_step_span_ms"])
    assert sorted(p.name for p in out.glob("*.trace.json.gz")) == [
        "mlp_deep_b32_infer.base.trace.json.gz", "mlp_deep_b32_infer.tf32.trace.json.gz"]
