"""The reliability campaign as a test (issue 21, classes 1-6).

GIVEN a few thousand hostile inputs, drawn from a fixed seed: byte and token mutants of a
real-looking trace, truncations, structural files, hostile ``deviceProperties``, args,
step names and shapes, gzip and truncated gzip, special paths
WHEN each goes through ``summary``, ``diagnose``, ``report`` or ``distributed``
(``aiprof.cli.main.main``, in-process) THEN each gives a result (exit 0) or one line and
exit 2 (warnings aside), never a traceback, never more than ``CASE_LIMIT_S``, and the
process's peak memory grows by less than ``MEMORY_CEILING_MIB`` over the whole campaign.

Tracebacks from the diagnosis package are collected and replayed by their own test, which
names the module.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import random
import resource
import signal
import stat
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aiprof.cli.main import main

from .test_fuzz import SEED

DEFAULT_CASES = 540
"""Six rounds of the 90 pairs of an input kind and a command (KINDS x COMMANDS, in turn)."""
SLOW_CASES = 20_000
CASE_LIMIT_S = 20.0
"""No single small case may take this long (the campaign found 4 hangs)."""
MEMORY_CEILING_MIB = 400
COMMANDS = (
    ("summary",),
    ("summary", "--json"),
    ("diagnose", "--json"),
    ("diagnose",),
    ("report", "-o", "{out}"),
    ("distributed", "--json"),
)
HOSTILE: list[Any] = [
    None, True, -1, -400, 0, 1e300, -1e300, 2**63, 2**70, -(2**70), 1e-300, 0.5, "", "x",
    "9", "stream 7", "0x0", [], [1], [-4, 8], [[-1, 2]], {}, {"a": 1}, "N/A", 99999999999999,
]  # fmt: skip
DEVICE_KEYS = ["id", "name", "computeMajor", "computeMinor", "numSms", "warpSize",
               "totalGlobalMem", "maxThreadsPerMultiprocessor", "regsPerMultiprocessor",
               "sharedMemPerMultiprocessor", "sharedMemPerBlockOptin"]  # fmt: skip
ARG_KEYS = ["External id", "correlation", "stream", "device", "grid", "block", "bytes",
            "registers per thread", "shared memory", "Input Dims", "Input type",
            "Collective name", "In msg nelems", "Group size", "est. achieved occupancy %",
            "Bytes", "Total Allocated", "Python id"]  # fmt: skip
EVENT_KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args"]


@dataclass(frozen=True)
class Case:
    number: int
    kind: str
    data: bytes | None  # None: a special path (``path`` set)
    path: str | None
    command: tuple[str, ...]


def _mutate_doc(rng: random.Random, kind: str) -> dict[str, Any]:
    doc = json.loads(json.dumps(SEED))
    events = doc["traceEvents"]
    event = rng.choice(events)
    if kind == "devprops":
        props = doc["deviceProperties"][0]
        for _ in range(rng.randint(1, 3)):
            props[rng.choice(DEVICE_KEYS)] = rng.choice(HOSTILE)
        if rng.random() < 0.2:
            doc["deviceProperties"] = [props, dict(props, id=rng.choice(HOSTILE))]
    elif kind == "args":
        if not isinstance(event.get("args"), dict):
            event["args"] = {}
        for _ in range(rng.randint(1, 3)):
            event["args"][rng.choice(ARG_KEYS)] = rng.choice(HOSTILE)
    elif kind == "field":
        for _ in range(rng.randint(1, 3)):
            rng.choice(events)[rng.choice(EVENT_KEYS)] = rng.choice(HOSTILE)
    elif kind == "step":
        number = rng.choice(["9" * rng.randint(18, 400), "-3", "", "3.5", "0" * 50 + "7"])
        events[0]["name"] = f"ProfilerStep#{number}"
    elif kind == "top":
        key = rng.choice(["deviceProperties", "distributedInfo", "baseTimeNanoseconds"])
        doc[key] = rng.choice(HOSTILE)
    elif kind == "dup":
        events.extend(json.loads(json.dumps(event)) for _ in range(rng.randint(1, 200)))
    elif kind == "drop":
        for _ in range(rng.randint(1, 5)):
            rng.choice(events).pop(rng.choice(EVENT_KEYS), None)
    elif kind == "two_gpus":
        for e in events:
            if e.get("cat") == "kernel":
                e["args"]["device"] = rng.choice([0, 1, 7, 4095, 4096])
    return doc


STRUCTURES = [
    b"", b" ", b"[]", b"{}", b"null", b"42", b'"x"', b'{"traceEvents": {}}',
    b'{"traceEvents": null}', b'{"traceEvents": [1, "a", null, []]}', b"[" * 5000 + b"]" * 5000,
    b'{"traceEvents": [' + b"[" * 3000 + b"]" * 3000 + b"]}", b"\xff\xfe\x00",
    b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, "args": ' + b"[" * 10_000 + b"]" * 10_000
    + b"}]}",
]  # fmt: skip
KINDS = ["bytes", "token", "truncate", "structure", "devprops", "args", "field", "step",
         "top", "dup", "drop", "two_gpus", "gzip", "gzip_truncate", "path"]  # fmt: skip


def _special_paths(root: Path) -> list[str]:
    fifo = root / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    empty_dir = root / "empty_dir"
    empty_dir.mkdir(exist_ok=True)
    return [str(fifo), "/dev/null", "/dev/zero", str(empty_dir), str(root / "missing.json")]


def cases(count: int, seed: int, root: Path) -> Iterator[Case]:
    rng = random.Random(seed)
    seed_text = json.dumps(SEED).encode()
    paths = _special_paths(root)
    for number in range(count):
        kind = KINDS[number % len(KINDS)]
        command = COMMANDS[(number // len(KINDS)) % len(COMMANDS)]
        data: bytes | None = None
        path = None
        if kind == "bytes":
            text = bytearray(seed_text)
            for _ in range(rng.randint(1, 8)):
                at = rng.randrange(len(text))
                text[at] = rng.randrange(256)
            data = bytes(text)
        elif kind == "token":
            text = seed_text.decode()
            digits = [m for m in range(1, len(text)) if text[m].isdigit()]
            tokens = [m for m in digits if not text[m - 1].isdigit()]
            at = rng.choice(tokens)
            end = at
            while end < len(text) and (text[end].isdigit() or text[end] in ".e"):
                end += 1
            value = rng.choice(["-400", "1e300", "NaN", "Infinity", str(2**70), "-0", "1e-300"])
            data = (text[:at] + value + text[end:]).encode()
        elif kind == "truncate":
            data = seed_text[: rng.randrange(len(seed_text))]
        elif kind == "structure":
            data = rng.choice(STRUCTURES)
        elif kind in ("gzip", "gzip_truncate"):
            packed = gzip.compress(json.dumps(_mutate_doc(rng, rng.choice(KINDS[4:12]))).encode())
            data = packed if kind == "gzip" else packed[: rng.randrange(len(packed))]
        elif kind == "path":
            path = rng.choice(paths)
        else:
            data = json.dumps(_mutate_doc(rng, kind)).encode()
        yield Case(number, kind, data, path, command)


class CaseTimeout(Exception):
    pass


def _on_alarm(signum: int, frame: object) -> None:
    raise CaseTimeout


@dataclass(frozen=True)
class Result:
    code: int | None
    err: str
    failure: str  # "" when the case behaved
    module: str  # the aiprof module of a traceback's innermost aiprof frame


def run_case(case: Case, root: Path) -> Result:
    if case.path is not None:
        target = case.path
    else:
        assert case.data is not None
        suffix = ".json.gz" if case.data[:2] == b"\x1f\x8b" else ".json"
        # a new name each time: overwriting a file costs ~7 ms on ext4 (the flush on truncate)
        target = str(root / f"case{case.number}{suffix}")
        Path(target).write_bytes(case.data)
    report = root / f"report{case.number}.html"
    argv = [word.format(out=report) for word in case.command] + [target]
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_LIMIT_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except CaseTimeout:
        return Result(None, "", f"took more than {CASE_LIMIT_S} s", "")
    except BaseException as error:  # noqa: BLE001 (what the campaign looks for)
        frames = [f for f in traceback.extract_tb(error.__traceback__) if "/aiprof/" in f.filename]
        module = frames[-1].filename.split("/aiprof/")[-1] if frames else ""
        return Result(None, "", f"{type(error).__name__}: {error}"[:300], module)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        report.unlink(missing_ok=True)
        if case.path is None:
            Path(target).unlink()
    text = err.getvalue()
    lines = [line for line in text.splitlines() if not line.startswith("aiprof: warning:")]
    if code not in (0, 2):
        return Result(code, text, f"exit code {code}", "")
    if "Traceback" in text:
        return Result(code, text, "a traceback on stderr", "")
    if code == 2 and len(lines) != 1:
        return Result(code, text, f"exit 2 with {len(lines)} lines", "")
    return Result(code, text, "", "")


def _campaign(count: int, seed: int, root: Path) -> tuple[list[str], list[Case]]:
    failures: list[str] = []
    diagnose_cases: list[Case] = []
    for case in cases(count, seed, root):
        result = run_case(case, root)
        if not result.failure:
            continue
        if result.module.startswith("diagnose/"):
            diagnose_cases.append(case)
            continue
        failures.append(f"case {case.number} ({case.kind}, {' '.join(case.command)}): "
                        f"{result.failure} [{result.module}]")
    return failures, diagnose_cases


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


_DIAGNOSE_CASES: list[Case] = []
_CAMPAIGN_RUN: list[int] = []


@pytest.mark.parametrize(
    "count", [DEFAULT_CASES, pytest.param(SLOW_CASES, marks=pytest.mark.slow)]
)
def test_every_hostile_input_gives_a_result_or_one_line(tmp_path: Path, count: int) -> None:
    before = _peak_rss_mib()
    failures, diagnose_cases = _campaign(count, seed=21, root=tmp_path)
    _DIAGNOSE_CASES.extend(diagnose_cases)
    _CAMPAIGN_RUN.append(count)
    assert failures == [], "\n".join(failures[:20])
    assert _peak_rss_mib() - before < MEMORY_CEILING_MIB


def test_diagnose_tracebacks_found_by_the_campaign(tmp_path: Path) -> None:
    if _CAMPAIGN_RUN:  # replay what the campaign found rather than run it again
        diagnose_cases = [c for c in _DIAGNOSE_CASES if run_case(c, tmp_path).failure]
    else:
        _, diagnose_cases = _campaign(DEFAULT_CASES, seed=21, root=tmp_path)
    modules = sorted({run_case(c, tmp_path).module for c in diagnose_cases[:20]})
    assert diagnose_cases == [], f"{len(diagnose_cases)} cases, in {modules}"


def test_an_unreadable_file_or_directory_is_one_line(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        targets = [tmp_path / "locked.json", tmp_path / "locked_dir"]
        targets[0].write_text("{}")
        targets[1].mkdir()
        for target in targets:
            target.chmod(0)
        _assert_one_line(targets)
        return
    pytest.importorskip("pwd")
    import subprocess
    import sys

    locked = tmp_path / "locked.json"
    locked.write_text(json.dumps(SEED))
    locked.chmod(stat.S_IRUSR)  # root's only
    folder = tmp_path / "locked_dir"
    folder.mkdir()
    folder.chmod(stat.S_IRWXU)
    tmp_path.chmod(0o755)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(SEED))
    # as root, one run imports everything (nobody cannot read this Python's own files); then
    # the process becomes nobody and reads what root alone may read
    code = (
        "import os, sys; from aiprof.cli.main import main; main(['summary', sys.argv[2]]); "
        "os.setgid(65534); os.setuid(65534); sys.exit(main(['summary', sys.argv[1]]))"
    )
    for target in (locked, folder):
        done = subprocess.run([sys.executable, "-c", code, str(target), str(good)],
                              capture_output=True, text=True, timeout=120, cwd="/")  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "permission" in done.stderr.lower()


def _assert_one_line(targets: list[Path]) -> None:
    for target in targets:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert main(["summary", str(target)]) == 2
        assert len(err.getvalue().strip().splitlines()) == 1
