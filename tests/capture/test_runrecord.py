"""Run record files: meta round trip, older schemas, samples CSV, load_run."""

from __future__ import annotations

import json
import math

import pytest

from aiprof.errors import InputError
from aiprof.record.runrecord import (
    META_FILE,
    SAMPLE_COLUMNS,
    RunMeta,
    load_run,
    read_meta,
    read_samples,
    resolve_run_dir,
    write_meta,
)


def test_meta_round_trip(tmp_path):
    meta = RunMeta(name="train", command=("python", "train.py"), exit_code=3, ended="exit",
                   gpus=({"name": "NVIDIA H200", "num_sms": 132},), env={"NCCL_DEBUG": "INFO"},
                   notes=("a note",))
    write_meta(tmp_path, meta)
    assert read_meta(tmp_path) == meta
    assert json.loads((tmp_path / META_FILE).read_text())["schema"] == 1


def test_older_meta_gets_defaults_and_unknown_fields_are_ignored(tmp_path):
    (tmp_path / META_FILE).write_text(json.dumps(
        {"schema": 0, "name": "old", "ended": "completed", "field_from_the_future": [1, 2]}))
    meta = read_meta(tmp_path)
    assert (meta.schema, meta.name, meta.ended) == (0, "old", "completed")
    assert meta.gpus == () and meta.exit_code is None and meta.world_size == 1


@pytest.mark.parametrize("content", ["{not json", '{"schema": "one"}', "[]"])
def test_bad_meta_is_an_input_error(tmp_path, content):
    (tmp_path / META_FILE).write_text(content)
    with pytest.raises(InputError):
        read_meta(tmp_path)


def test_samples_with_missing_cells_and_columns(tmp_path):
    path = tmp_path / "gpu_samples.csv"
    path.write_text("time_unix_ns,device,gpu_util_pct,power_w\n10,0,50.0,\n20,1,,300.5\n")
    samples = read_samples(path)
    assert samples.num_samples == 2
    assert samples["time_unix_ns"].tolist() == [10, 20]
    assert samples["device"].tolist() == [0, 1]
    assert samples["gpu_util_pct"][0] == 50.0 and math.isnan(samples["gpu_util_pct"][1])
    assert math.isnan(samples["power_w"][0]) and samples["power_w"][1] == 300.5
    assert set(samples.columns) == set(SAMPLE_COLUMNS)
    assert all(math.isnan(v) for v in samples["temperature_c"])


def test_samples_file_that_is_not_ours(tmp_path):
    path = tmp_path / "gpu_samples.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="missing columns"):
        read_samples(path)
    assert read_samples(tmp_path / "absent.csv").num_samples == 0


def test_load_run_follows_latest_and_tolerates_no_trace(tmp_path):
    record = tmp_path / "runs" / "x-20260101-000000"
    record.mkdir(parents=True)
    write_meta(record, RunMeta(name="x", ended="interrupted"))
    (tmp_path / "runs" / "latest").symlink_to(record.name)
    loaded = load_run(tmp_path / "runs")
    assert loaded.path == record.resolve() and loaded.meta.ended == "interrupted"
    assert loaded.traces is None and loaded.samples.num_samples == 0
    assert resolve_run_dir(tmp_path / "runs" / "latest") == record.resolve()


def test_load_run_of_a_missing_directory(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_run(tmp_path / "nope")
    with pytest.raises(InputError, match="not a run record"):
        load_run(tmp_path)


def test_reading_and_capture_modules_do_not_import_torch():
    import subprocess
    import sys

    code = ("import sys, aiprof.record.runrecord, aiprof.capture, aiprof.capture.session, "
            "aiprof.capture.runner, aiprof.cli.run; sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=60).returncode == 0
