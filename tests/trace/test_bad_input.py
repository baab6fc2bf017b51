"""GIVEN unreadable input WHEN it is loaded THEN the library raises TraceFormatError and the CLI
prints one line naming the file, exits 2, and shows no traceback."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from aiprof import TraceFormatError, load_trace
from aiprof.cli.main import main

GOOD = {
    "schemaVersion": 1,
    "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
    ],
}


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


CASES = {
    "truncated_gzip": lambda: ("t.json.gz", gzip.compress(json.dumps(GOOD).encode())[:-12]),
    "invalid_json": lambda: ("t.json", b'{"traceEvents": [ {"ph": "X",,, } '),
    "not_a_trace": lambda: ("t.json", b'{"hello": "world"}'),
    "a_number": lambda: ("t.json", b"42"),
    "empty_file": lambda: ("t.json", b""),
    "no_events": lambda: ("t.json", b'{"traceEvents": []}'),
    "wrong_type_ts": lambda: ("t.json", b'{"traceEvents": [{"ph": "X", "ts": "soon", "dur": 1}]}'),
    "wrong_type_args": lambda: (
        "t.json",
        b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "args": {"correlation": "x"}}]}',
    ),
    "device_properties_not_a_list": lambda: (
        "t.json",
        b'{"deviceProperties": 3, "traceEvents": [{"ph": "X", "ts": 1, "dur": 1}]}',
    ),
    "int_beyond_64_bits": lambda: (
        "t.json",
        b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 1, "args": {"External id": %d}}]}'
        % 2**64,
    ),
    "deep_nesting": lambda: (
        "t.json",
        b'{"traceEvents": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_library_raises_trace_format_error(tmp_path: Path, case: str) -> None:
    path = _write(tmp_path, *CASES[case]())
    with pytest.raises(TraceFormatError) as error:
        load_trace(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("case", sorted(CASES))
def test_cli_prints_one_line_and_exits_2(tmp_path: Path, case: str, capsys) -> None:
    path = _write(tmp_path, *CASES[case]())
    assert main(["summary", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and str(path) in captured.err
    assert "Traceback" not in captured.err


def test_missing_file_and_empty_directory(tmp_path: Path, capsys) -> None:
    assert main(["summary", str(tmp_path / "nope.json")]) == 2
    assert main(["summary", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "no such file" in err[0] and "no trace files" in err[1]


def test_near_json_is_repaired(tmp_path: Path) -> None:
    """Raw control characters and bare N/A occur in real traces (pytorch/pytorch#130622)."""
    data = (
        b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k\x01ernel", "pid": 0, '
        b'"tid": 7, "ts": 1, "dur": 2, "args": {"correlation": 5}}], "x": N/A}'
    )
    trace = load_trace(_write(tmp_path, "t.json", data))
    assert len(trace.kernels) == 1 and trace.metadata["x"] == "N/A"


def test_chrome_array_format_is_read(tmp_path: Path) -> None:
    data = json.dumps(GOOD["traceEvents"] * 3).encode()
    assert len(load_trace(_write(tmp_path, "t.json", data)).cpu_ops) == 3
