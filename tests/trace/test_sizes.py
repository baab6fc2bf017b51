"""GIVEN gzip bombs and pathological sizes (a 100 MB kernel name, 500k distinct names,
10k-deep args) WHEN read by the CLI THEN a bomb is refused in one line within 5 s and
500 MB of peak memory, and the others give a result or one line in bounded time."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from aiprof.trace import source
from aiprof.trace.strings import DISPLAY_CHARS

# run main() in a child and report its own time and peak memory (VmHWM)
CHILD = """
import json, sys, time
from aiprof.cli.main import main
t0 = time.perf_counter()
code = main(sys.argv[1:])
seconds = time.perf_counter() - t0
status = open("/proc/self/status").read()
peak_mib = int(status.split("VmHWM:")[1].split()[0]) / 1024
print(json.dumps({"code": code, "seconds": seconds, "peak_mib": peak_mib}))
"""


def _run(*argv: str, env: dict[str, str] | None = None) -> tuple[dict[str, float], str]:
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True,
                          timeout=600, env=env)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def _member(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return packer.compress(data) + packer.flush()


def _bomb(path: Path, inflated_bytes: int, block: bytes) -> Path:
    """A multi-member gzip: one JSON head, then the same member over and over."""
    body = _member(block)
    with path.open("wb") as handle:
        handle.write(_member(b'{"traceEvents":['))
        for _ in range(inflated_bytes // len(block)):
            handle.write(body)
        handle.write(_member(b'{"ph":"X","ts":1,"dur":1}]}'))
    return path


EVENT = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,"args":{}},'


@pytest.mark.timing
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    "block",
    [
        pytest.param(b" " * (16 << 20), id="whitespace-5MB-to-5GiB"),
        pytest.param(EVENT * ((16 << 20) // len(EVENT)), id="events-18MB-to-5GiB"),
    ],
)
def test_a_gzip_bomb_is_refused_fast_in_little_memory(tmp_path: Path, block: bytes) -> None:
    bomb = _bomb(tmp_path / "bomb.json.gz", 5 << 30, block)
    assert bomb.stat().st_size < 20 << 20
    result, err = _run("summary", str(bomb))
    assert result["code"] == 2 and "gzip bomb" in err and len(err.strip().splitlines()) == 1
    assert result["seconds"] < 5.0
    assert result["peak_mib"] < 500


def test_the_limits_can_be_raised_by_option_and_environment(tmp_path: Path) -> None:
    block = b" " * (16 << 20)
    bomb = _bomb(tmp_path / "b.json.gz", 80 << 20, block)  # 80 MiB of whitespace: ~1000x
    result, err = _run("summary", str(bomb))
    assert result["code"] == 2 and "AIPROF_GZIP_MAX_RATIO" in err
    result, err = _run("--gzip-max-ratio", "0", "summary", str(bomb))
    assert result["code"] == 0, err
    import os

    env = dict(os.environ, **{source.MAX_RATIO_ENV: "0", source.MAX_BYTES_ENV: str(10 << 20)})
    result, err = _run("summary", str(bomb), env=env)
    assert result["code"] == 2 and "more than 10,485,760 bytes" in err
    env[source.MAX_BYTES_ENV] = "lots"
    result, err = _run("summary", str(bomb), env=env)
    assert result["code"] == 2 and "not a number" in err


def _trace_with_kernel_named(path: Path, name: str) -> Path:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0, "dur": 1000},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 5, "dur": 3, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 10, "dur": 100,
         "args": {"device": 0, "correlation": 1}},
    ]  # fmt: skip
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize(
    ("size", "limit_s"),
    [(10_000_000, 30.0), pytest.param(100_000_000, 90.0, marks=pytest.mark.slow)],
)
def test_a_huge_kernel_name_is_shortened_for_display(
    tmp_path: Path, size: int, limit_s: float
) -> None:
    path = _trace_with_kernel_named(tmp_path / "t.json", "k" * size)
    for command in (["summary"], ["report", "-o", str(tmp_path / "r.html")], ["diagnose"]):
        started = time.monotonic()
        result, err = _run(*command, str(path))
        assert result["code"] == 0, err
        assert time.monotonic() - started < limit_s
    html = (tmp_path / "r.html").read_text()
    assert "k" * DISPLAY_CHARS in html and "k" * (DISPLAY_CHARS + 1) not in html
    from aiprof import load_trace

    trace = load_trace(path)
    name_id = int(trace.kernels.name_id[0])
    assert len(trace.strings.full(name_id)) == size  # the whole name is kept
    assert len(trace.name(name_id)) < DISPLAY_CHARS + 40


def test_10k_deep_args_are_one_line(tmp_path: Path) -> None:
    deep = "[" * 10_000 + "]" * 10_000
    text = (
        '{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":10,'
        '"dur":100,"args":{"Input Dims":' + deep + "}}]}"
    )
    path = tmp_path / "deep.json"
    path.write_text(text)
    started = time.monotonic()
    result, err = _run("summary", str(path))
    assert result["code"] in (0, 2) and len(err.strip().splitlines()) <= 1
    assert time.monotonic() - started < 30 and result["peak_mib"] < 500


@pytest.mark.slow
def test_500k_distinct_kernel_names_in_bounded_time_and_memory(tmp_path: Path) -> None:
    count = 500_000
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
               "ts": 0, "dur": 1e6}]  # fmt: skip
    for i in range(count):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                       "tid": 1, "ts": i, "dur": 0.5, "args": {"correlation": i}})  # fmt: skip
        args = {"device": 0, "correlation": i}
        events.append({"ph": "X", "cat": "kernel", "name": f"kernel_{i}", "pid": 0, "tid": 7,
                       "ts": i + 0.5, "dur": 0.4, "args": args})  # fmt: skip
    path = tmp_path / "names.json"
    path.write_text(json.dumps({"traceEvents": events}))
    del events
    result, err = _run("summary", "--json", str(path))
    assert result["code"] == 0, err
    assert result["seconds"] < 60 and result["peak_mib"] < 1500
