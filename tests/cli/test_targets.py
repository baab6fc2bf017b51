"""GIVEN the targets a user can name (trace file, rank directory, run record, example:NAME)
WHEN any trace-reading command is given one THEN it reads the same traces, or says why not in
one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from aiprof.cli.main import main
from aiprof.record.examples import example, examples
from aiprof.record.targets import load_traces, resolve

DATA = Path(__file__).parents[1] / "data"
RUN = DATA / "capture" / "h200_gpt2_small_timed_run"  # a run record written by 'aiprof run'


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    copy = tmp_path / "runs" / RUN.name
    shutil.copytree(RUN, copy)
    (tmp_path / "runs" / "latest").symlink_to(RUN.name)
    return copy


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "command", [["diagnose"], ["summary"], ["report", "-o", "r.html"], ["distributed"]]
)
def test_saved_ceilings_do_not_break_reading_the_run(run_dir, command, monkeypatch, capsys):
    pytest.importorskip("torch")
    monkeypatch.chdir(run_dir.parent)
    assert main(["ceilings", "--quick", "--repeats", "1", "--save", str(run_dir)]) == 0
    assert (run_dir / "ceilings.json").is_file()
    capsys.readouterr()
    assert main([command[0], str(run_dir), *command[1:], "--json"]) == 0
    json.loads(capsys.readouterr().out)


def test_ceilings_json_is_never_read_as_a_trace(run_dir):
    (run_dir / "ceilings.json").write_text('{"not": "a trace"}')
    (run_dir / "notes.json").write_text("{}")  # not a rank trace of the record either
    target = resolve(run_dir)
    assert target.kind == "run" and [p.name for p in target.files] == ["rank0.trace.json.gz"]
    assert target.ceilings_file == run_dir / "ceilings.json"


def test_runs_folder_means_its_latest_record(run_dir):
    target = resolve(run_dir.parent)
    assert target.kind == "run" and target.path == run_dir.resolve()


def test_a_folder_of_records_without_latest_names_them(run_dir, capsys):
    (run_dir.parent / "latest").unlink()
    assert main(["summary", str(run_dir.parent)]) == 2
    assert RUN.name in one_error_line(capsys)


def test_two_unrelated_runs_in_one_folder_are_refused(tmp_path, capsys):
    for name in ("a.json.gz", "b.json.gz"):  # two rank-0 traces of different jobs
        shutil.copy(example("h200_gpt2").path, tmp_path / name)
    assert main(["diagnose", str(tmp_path)]) == 2
    err = one_error_line(capsys)
    assert "both rank 0" in err and "separate runs" in err
    assert main(["summary", str(tmp_path / "a.json.gz"), str(tmp_path / "b.json.gz")]) == 0


def test_ranks_of_different_world_sizes_are_not_one_job(tmp_path):
    for rank, size in ((0, 2), (1, 8)):
        doc = {"distributedInfo": {"rank": rank, "world_size": size, "backend": "nccl"},
               "traceEvents": [{"ph": "X", "name": "aten::add", "cat": "cpu_op", "ts": 1,
                                "dur": 2, "pid": 1, "tid": 1}]}
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="not one job"):
        load_traces(tmp_path)


def test_a_rank_that_is_not_there_is_one_line(capsys):
    assert main(["roofline", "example:two_ranks", "--rank", "3"]) == 2
    assert "ranks: 0, 1" in one_error_line(capsys)


def test_memtimeline_reads_a_run_record(run_dir, capsys):
    assert main(["memtimeline", str(run_dir.parent), "--json"]) == 0  # runs/ -> runs/latest
    assert len(json.loads(capsys.readouterr().out)["allocated_bytes"]) > 100


def test_every_example_resolves_and_is_listed(capsys):
    assert main(["examples", "--json"]) == 0
    listed = {e["target"] for e in json.loads(capsys.readouterr().out)}
    assert listed == {e.target for e in examples()}
    for item in examples():
        assert resolve(item.target).files and item.origin and item.license
    assert resolve("example:two_ranks").kind == "traces"


def test_an_unknown_example_names_the_known_ones(capsys):
    assert main(["summary", "example:nope"]) == 2
    assert "a100_nccl" in one_error_line(capsys)


def test_the_report_of_a_run_record_shows_what_ran_where(run_dir, tmp_path, capsys):
    page = tmp_path / "run.html"
    assert main(["report", str(run_dir), "-o", str(page)]) == 0
    html = page.read_text()
    assert "<h2>Run record</h2>" in html and "scripts/h200/workloads/gpt2_train.py" in html
    assert "torch 2.11.0+cu130" in html and "NVIDIA H200" in html and "completed" in html
    plain = tmp_path / "plain.html"
    assert main(["report", "example:triton", "-o", str(plain)]) == 0
    assert "Run record" not in plain.read_text()
