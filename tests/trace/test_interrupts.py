"""GIVEN aiprof reading several traces (worker processes) or one large trace (helpers)
WHEN it is interrupted (Ctrl-C, SIGTERM) or killed (SIGKILL) mid-read THEN within a second
it exits 130 / 143 with one line, and no process of it and no parcel file remain; after a
SIGKILL the workers exit by themselves and the next read removes the dead run's parcels.

Processes are counted by a marker in their environment (children inherit it), files in a
private temporary directory (TMPDIR)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from aiprof.trace import parcel

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="counts processes through /proc"
)


def _trace_text(count: int, rank: int) -> str:
    """A trace of ``count`` cpu ops as JSON text (built from a template: json.dumps of
    480k dicts takes tens of seconds on a busy 2-core machine)."""
    template = (
        '{{"ph":"X","cat":"cpu_op","name":"aten::op_{k}","pid":{rank},"tid":1,"ts":{ts},'
        '"dur":0.5,"args":{{"External id":{i},"Input Dims":[[{d},3]],"Input type":["float"]}}}}'
    )
    events = ",".join(
        template.format(k=i % 50, rank=rank, ts=1000 + i, i=i, d=i % 5) for i in range(count)
    )
    return f'{{"traceEvents":[{events}],"distributedInfo":{{"rank":{rank}}}}}'


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four traces of 120k events each: a few seconds to read on two cores."""
    folder = tmp_path_factory.mktemp("ranks")
    for rank in range(4):
        (folder / f"rank{rank}.json").write_text(_trace_text(120_000, rank))
    return folder


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One trace of 600k events, for reads split over helpers (seconds, not a blink)."""
    path = tmp_path_factory.mktemp("big") / "big.json"
    path.write_text(_trace_text(600_000, 0))
    return path


@pytest.fixture(scope="module")
def small_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("small_ranks")
    for rank in range(2):
        (folder / f"rank{rank}.json").write_text(_trace_text(100, rank))
    return folder


def _marked(marker: str) -> list[int]:
    """Pids of the live processes whose environment holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in environ and state != "Z":
            found.append(int(entry))
    return found


def _start(code: str, scratch: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    marker = f"AIPROF_TEST_MARKER={uuid.uuid4().hex}"
    env = dict(os.environ, TMPDIR=str(scratch), AIPROF_TEST_MARKER=marker.split("=")[1])
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, marker


def _wait_for_workers(marker: str, count: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(_marked(marker)) < count:
        assert time.monotonic() < deadline, "the workers never started"
        time.sleep(0.02)
    time.sleep(0.3)  # let them get into the files


def _gone_within(marker: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _marked(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


CLI = "import sys; from aiprof.cli.main import main; sys.exit(main(sys.argv[1:]))"
SPLIT = (
    "import sys; from aiprof import load_trace; "
    "load_trace(sys.argv[1], parts=2); print('done')"
)


@pytest.mark.timing
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_multi_file_read_ends_at_once_and_leaves_nothing(
    ranks: Path, tmp_path: Path, signum: int, code: int
) -> None:
    process, marker = _start(CLI, tmp_path, "summary", str(ranks))
    _wait_for_workers(marker, 3)
    sent = time.monotonic()
    process.send_signal(signum)
    _, err = process.communicate(timeout=10)
    assert time.monotonic() - sent < 1.5
    assert process.returncode == code
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert _gone_within(marker, 1.0)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_split_read_of_one_file_leaves_nothing(
    big_trace: Path, tmp_path: Path, signum: int
) -> None:
    process, marker = _start(
        "from aiprof.cli.main import _sigterm_raises\n"
        "with _sigterm_raises():\n    exec(" + repr(SPLIT) + ")",
        tmp_path,
        str(big_trace),
    )
    _wait_for_workers(marker, 2)
    process.send_signal(signum)
    process.communicate(timeout=10)
    assert process.returncode != 0
    assert _gone_within(marker, 1.0)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "code", [pytest.param(CLI, id="ranks"), pytest.param(SPLIT, id="split", marks=pytest.mark.slow)]
)
def test_workers_of_a_killed_reader_exit_and_the_next_read_removes_its_parcels(
    ranks: Path, small_ranks: Path, tmp_path: Path, code: str, request: pytest.FixtureRequest
) -> None:
    if code == CLI:
        args: tuple[str, ...] = ("summary", str(ranks))
    else:
        args = (str(request.getfixturevalue("big_trace")),)
    process, marker = _start(code, tmp_path, *args)
    _wait_for_workers(marker, 3 if code == CLI else 2)
    process.kill()
    process.communicate(timeout=10)
    assert _gone_within(marker, 2.0), "workers outlived their parent"
    # what a dead reader may leave: a parcel named after it (written here for certain)
    stale = tmp_path / f"{parcel.PREFIX}{process.pid}-dead0000-x"
    stale.write_bytes(b"\0" * 1024)
    live = tmp_path / f"{parcel.PREFIX}{os.getpid()}-live0000-x"
    live.write_bytes(b"\0")
    again, marker = _start(CLI, tmp_path, "summary", str(small_ranks), "--json")
    again.communicate(timeout=120)
    assert again.returncode == 0
    assert sorted(tmp_path.iterdir()) == [live]  # the running process's parcel is kept
