"""Run directory names, the ``latest`` link, and ranks agreeing on one directory."""

from __future__ import annotations

import calendar
import os
import threading

import pytest

from aiprof.errors import InputError
from aiprof.record.rundir import (
    RUN_DIR_ENV,
    new_run_dir,
    release_claims,
    shared_run_dir,
    timestamp,
    update_latest,
)

NOON = calendar.timegm((2026, 11, 30, 12, 0, 5, 0, 0, 0))


def test_name_is_name_dash_utc_timestamp_and_collisions_get_a_suffix(tmp_path):
    assert timestamp(NOON) == "20261130-120005"
    first = new_run_dir(tmp_path, "train", NOON)
    second = new_run_dir(tmp_path, "train", NOON)
    assert first.name == "train-20261130-120005"
    assert second.name == "train-20261130-120005-1"


def test_latest_link_moves_to_the_newest(tmp_path):
    first = new_run_dir(tmp_path, "a", NOON)
    update_latest(first)
    second = new_run_dir(tmp_path, "b", NOON)
    update_latest(second)
    assert os.readlink(tmp_path / "latest") == second.name


def test_env_variable_names_the_directory(tmp_path):
    target = tmp_path / "given"
    assert shared_run_dir(tmp_path, "x", {RUN_DIR_ENV: str(target)}, NOON) == target
    assert target.is_dir()


def test_ranks_of_one_job_agree_on_one_directory(tmp_path):
    env = {"WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
           "TORCHELASTIC_RUN_ID": "job"}
    found = []
    threads = [threading.Thread(target=lambda: found.append(
        shared_run_dir(tmp_path, "ddp", env, NOON))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 4 and len(set(found)) == 1
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == [found[0].name]
    release_claims(tmp_path, env)
    other_job = shared_run_dir(tmp_path, "ddp", {**env, "MASTER_PORT": "29501"}, NOON)
    assert other_job != found[0]


def test_unwritable_root(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InputError, match="cannot write run records"):
        new_run_dir(blocker / "runs", "x", NOON)
