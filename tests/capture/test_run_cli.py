"""``aiprof run`` on real scripts, in-process, on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from capture_helpers import raw_trace, step_names

from aiprof.cli.main import main
from aiprof.record.runrecord import load_run, read_meta

pytest.importorskip("torch")


def run(tmp_path: Path, *argv: str) -> tuple[int, Path]:
    code = main(["run", "--out", str(tmp_path / "runs"), *argv])
    return code, (tmp_path / "runs" / "latest").resolve()


def test_training_loop_steps_come_from_the_optimizer(tmp_path, workload, capsys):
    # GIVEN a loop of 12 optimizer steps, WHEN captured with skip 4, warmup 1, active 3
    code, record = run(tmp_path, "--skip", "4", "--warmup", "1", "--active", "3",
                       "--", "python", workload("train_loop.py"), "--steps", "12")
    assert code == 0
    meta = read_meta(record)
    assert meta.ended == "completed" and meta.exit_code == 0
    assert meta.capture["num_steps_seen"] == 12
    assert meta.capture["step_source"] == "optimizer"
    assert meta.command[1:] == (workload("train_loop.py"), "--steps", "12")
    # THEN the trace holds exactly the 3 active steps, numbered after skip + warmup
    assert step_names(raw_trace(record / "rank0.trace.json.gz")) == [
        "ProfilerStep#5", "ProfilerStep#6", "ProfilerStep#7"]
    # and the script's output is both shown and kept
    assert "trained 12 steps" in capsys.readouterr().out
    assert "trained 12 steps" in (record / "stdout.log").read_text()
    # and the record loads: the trace reader finds the same three steps
    loaded = load_run(record)
    assert loaded.traces is not None and len(loaded.traces) == 1
    assert len(loaded.traces[0].steps) == 3
    assert loaded.samples.num_samples == 0  # no NVML on a CPU machine
    assert meta.samples["source"] == "none"
    assert any("no GPU samples" in note for note in meta.notes)


def test_module_form_and_latest_link(tmp_path, workload, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(workload("train_loop.py")).parent))
    code, record = run(tmp_path, "--skip", "0", "--warmup", "0", "--active", "1",
                       "--", "python", "-m", "train_loop", "--steps", "3")
    assert code == 0
    assert os.path.islink(tmp_path / "runs" / "latest")
    assert record.name.startswith("train_loop-")
    assert read_meta(record).command[:3] == ("python", "-m", "train_loop")


@pytest.mark.timing
def test_duration_mode_for_inference_without_optimizer(tmp_path, workload):
    code, record = run(tmp_path, "--duration", "0.4", "--", "python",
                       workload("infer_loop.py"), "1.5")
    assert code == 0
    trace = raw_trace(record / "rank0.trace.json.gz")
    ops = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    assert ops, "duration mode recorded no operators"
    span_s = (max(e["ts"] + e["dur"] for e in ops) - min(e["ts"] for e in ops)) / 1e6
    # the window is 0.4 s of a 1.5 s script: clearly shorter than the script, near 0.4 s
    assert 0.1 < span_s < 1.0
    assert read_meta(record).capture["mode"] == "duration"


@pytest.mark.timing
def test_delay_moves_the_window_after_the_script_start(tmp_path, workload):
    code, record = run(tmp_path, "--duration", "0.3", "--delay", "0.5", "--no-memory",
                       "--", "python", workload("infer_loop.py"), "2.0")
    assert code == 0
    log = (record / "stdout.log").read_text()
    script_start_ns = int(log.split("script start ")[1].split()[0])
    trace = raw_trace(record / "rank0.trace.json.gz")
    base = trace["baseTimeNanoseconds"]  # wall ns = base + ts * 1000 (Kineto)
    ops = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    first_ns = base + min(e["ts"] for e in ops) * 1000
    last_ns = base + max(e["ts"] + e["dur"] for e in ops) * 1000
    assert first_ns - script_start_ns >= 0.45e9
    assert (last_ns - first_ns) / 1e9 < 0.3 + 0.25
    assert last_ns <= read_meta(record).end_unix_ns


@pytest.mark.parametrize(("how", "exit_code", "ended"), [
    ("raise", 1, "exception"), ("exit", 3, "exit"), ("sigterm", 143, "terminated"),
    ("sigint", 130, "interrupted"),
])
def test_failing_script_still_leaves_a_record(tmp_path, workload, capsys, how, exit_code, ended):
    code, record = run(tmp_path, "--skip", "1", "--warmup", "1", "--active", "2",
                       "--", "python", workload("fails.py"), how)
    assert code == exit_code
    meta = read_meta(record)
    assert (meta.ended, meta.exit_code) == (ended, exit_code)
    assert step_names(raw_trace(record / "rank0.trace.json.gz")) == [
        "ProfilerStep#2", "ProfilerStep#3"]
    assert "about to " + how in (record / "stdout.log").read_text()
    if how == "raise":
        assert meta.error == "RuntimeError: boom in user code"
        assert "RuntimeError: boom in user code" in capsys.readouterr().err


def test_script_ending_before_the_window_says_so(tmp_path, workload):
    code, record = run(tmp_path, "--", "python", workload("fails.py"), "exit", "2")
    meta = read_meta(record)
    assert code == 3 and not (record / "rank0.trace.json.gz").exists()
    assert any("2 step(s) seen" in note for note in meta.notes)


def test_aiprof_step_wins_over_two_optimizers(tmp_path, workload):
    code, record = run(tmp_path, "--skip", "2", "--warmup", "1", "--active", "2",
                       "--", "python", workload("user_steps.py"))
    meta = read_meta(record)
    assert code == 0 and meta.capture["step_source"] == "user"
    # 10 loop iterations; the first aiprof.step() closes the iteration the optimizer closed
    assert meta.capture["num_steps_seen"] == 10
    assert len(step_names(raw_trace(record / "rank0.trace.json.gz"))) == 2


def test_no_empty_step_where_optimizer_steps_give_way_to_aiprof_step(tmp_path, workload):
    # GIVEN opt.step() then aiprof.step() in each iteration, recorded from the very first step
    code, record = run(tmp_path, "--skip", "0", "--warmup", "0", "--active", "3",
                       "--", "python", workload("user_steps.py"))
    assert code == 0
    events = raw_trace(record / "rank0.trace.json.gz")["traceEvents"]
    steps = [e for e in events if e.get("ph") == "X"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    forwards = [e["ts"] for e in events if e.get("ph") == "X" and e.get("name") == "aten::linear"]
    # THEN every recorded step holds a forward pass (before the fix the second one was empty)
    assert len(steps) == 3
    for span in steps:
        assert any(span["ts"] <= t < span["ts"] + span["dur"] for t in forwards), span["name"]


@pytest.mark.parametrize("name", ["train_step", "iteration"])
def test_steps_from_a_function_or_record_function(tmp_path, workload, name):
    code, record = run(tmp_path, "--steps-from", name, "--skip", "2", "--warmup", "1",
                       "--active", "3", "--", "python", workload("named_steps.py"))
    meta = read_meta(record)
    assert code == 0 and meta.capture["num_steps_seen"] == 9
    assert len(step_names(raw_trace(record / "rank0.trace.json.gz"))) == 3


def test_json_output(tmp_path, workload, capsys):
    code, record = run(tmp_path, "--json", "--skip", "0", "--warmup", "0", "--active", "1",
                       "--", workload("train_loop.py"), "--steps", "2")
    out = capsys.readouterr().out
    document = json.loads(out[out.index("{"):])
    assert code == 0 and document["meta"]["schema"] == 1
    assert Path(document["run_dir"]).resolve() == record


def test_missing_script_is_one_line_exit_2(tmp_path, capsys):
    assert main(["run", "--out", str(tmp_path), "--", "python", "nope.py"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope.py not found" in err
    assert not any(tmp_path.iterdir())


def test_unwritable_output_is_one_line_exit_2(tmp_path, workload, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["run", "--out", str(blocker / "runs"), "--", workload("train_loop.py")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write run records" in err


def test_bad_schedule_is_one_line_exit_2(tmp_path, workload, capsys):
    assert main(["run", "--out", str(tmp_path), "--active", "0", "--", workload("fails.py")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


H200_RECORD = Path(__file__).resolve().parents[1] / "data" / "capture" / "h200_resnet50_run"


def test_without_torch_capture_says_so_and_analysis_still_works(tmp_path, workload):
    record = str(H200_RECORD) if (H200_RECORD / "meta.json").is_file() else ""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from aiprof.cli.main import main\n"
        f"rc = main(['run', '--out', {str(tmp_path)!r}, '--', {workload('train_loop.py')!r}])\n"
        "from aiprof.record.runrecord import load_run\n"
        f"if {record!r}:\n"
        f"    assert load_run({record!r}).traces is not None\n"
        f"    assert main(['summary', {record!r}, '--json']) == 0\n"
        "sys.exit(rc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "aiprof[torch]" in done.stderr


def test_a_script_with_its_own_profiler_gets_a_note(tmp_path, workload):
    code, record = run(tmp_path, "--skip", "0", "--warmup", "0", "--active", "2",
                       "--", workload("own_profiler.py"))
    assert code == 0
    assert any("its own torch.profiler" in note for note in read_meta(record).notes)
    _, clean = run(tmp_path, "--skip", "0", "--warmup", "0", "--active", "2",
                   "--", workload("train_loop.py"), "--steps", "3")
    assert not any("its own torch.profiler" in note for note in read_meta(clean).notes)
