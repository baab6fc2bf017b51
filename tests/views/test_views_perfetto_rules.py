"""GIVEN ``aiprof export --perfetto`` of a real H200 run record WHEN its events are read as
Perfetto's JSON importer reads them THEN they follow its rules, one test per rule.

The rules, from Perfetto's "Visualizing external trace formats" guide (Chrome JSON format)
and its importer (src/trace_processor/importers/json/json_trace_parser_impl.cc): a phase it
handles; pid and tid unsigned 32-bit integers; ``X`` slices with a duration, nested on each
thread (a partial overlap goes to an overflow track, or is dropped); ``C`` counters with an
object of numbers as args, one track per key named "<name> <key>"; v1 flows ``s``/``f``
paired by id, category and name, bound to the slice enclosing them on their thread (``f``
with ``bp: "e"``: the enclosing slice, else the next one); ``M`` metadata naming processes
and threads. The Perfetto UI and trace processor themselves cannot run here: their Python
package fetches the trace_processor_shell binary from the network at first use.
"""

from __future__ import annotations

import bisect
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import DATA

from aiprof.cli.main import main

RUN = DATA / "capture" / "h200_resnet50_run"
PHASES = set("BEXbenCIiRstfM")
"""The phases the importer handles (its switch over ``ph``)."""


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("perfetto") / "run.json"
    assert main(["export", "--perfetto", str(RUN), "-o", str(out)]) == 0
    found: list[dict[str, Any]] = json.loads(out.read_text())["traceEvents"]
    return found


def _ns(us: float) -> int:
    return round(us * 1000)


def _slices(events: list[dict[str, Any]]) -> dict[tuple[int, int], list[tuple[int, int]]]:
    tracks: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])))
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
    return tracks


def test_every_phase_is_one_the_importer_handles(events: list[dict[str, Any]]) -> None:
    assert {e["ph"] for e in events} <= PHASES
    assert {"X", "C", "s", "f", "M"} <= {e["ph"] for e in events}


def test_pid_and_tid_are_unsigned_32_bit(events: list[dict[str, Any]]) -> None:
    for e in events:
        for key in ("pid", "tid"):
            value = e[key]
            assert isinstance(value, int) and not isinstance(value, bool), e
            assert 0 <= value < 2**32, e


def test_slices_have_a_duration_and_nest_on_their_thread(events: list[dict[str, Any]]) -> None:
    for e in events:
        if e["ph"] == "X":
            assert math.isfinite(e["ts"]) and e["dur"] >= 0, e
    partial = 0
    for spans in _slices(events).values():
        open_ends: list[int] = []
        for start, end in spans:
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            partial += bool(open_ends) and end > open_ends[-1]
            open_ends.append(end)
    assert partial == 0
    # the run's overlapping kernels (Hopper) were kept, on extra threads
    assert any(e["ph"] == "M" and "(overlap" in e["args"].get("name", "") for e in events)


def test_counters_are_numbers_one_track_per_name(events: list[dict[str, Any]]) -> None:
    keys: dict[tuple[int, str], set[str]] = defaultdict(set)
    for e in events:
        if e["ph"] == "C":
            assert isinstance(e["args"], dict) and e["args"], e
            assert all(isinstance(v, (int, float)) and math.isfinite(v)
                       for v in e["args"].values()), e
            keys[(e["pid"], e["name"])].update(e["args"])
    assert keys and all(len(k) == 1 for k in keys.values())
    names = {f"{name} {next(iter(k))}" for (_, name), k in keys.items()}
    assert "GPU 0 SM util % value" in names and any(n.startswith("queue GPU 0") for n in names)


def test_flows_pair_and_bind_to_a_slice_on_their_thread(events: list[dict[str, Any]]) -> None:
    tracks = _slices(events)
    starts = {key: [s for s, _ in spans] for key, spans in tracks.items()}
    ends: dict[tuple[Any, ...], set[str]] = defaultdict(set)
    unbound = 0
    for e in events:
        if e["ph"] not in ("s", "t", "f"):
            continue
        assert isinstance(e["id"], int), e
        if e["ph"] == "f":
            assert e.get("bp") == "e", e
        ends[(e["id"], e["cat"], e["name"])].add(e["ph"])
        key, ts = (e["pid"], e["tid"]), _ns(e["ts"])
        spans = tracks.get(key, [])
        i = bisect.bisect_right(starts.get(key, []), ts)
        unbound += not any(a <= ts <= b for a, b in spans[max(0, i - 64):i])
    assert unbound == 0
    paired = [k for k, phases in ends.items() if phases == {"s", "f"}]
    assert len(paired) > 1000  # launch -> kernel flows of the run


def test_metadata_names_every_process_and_thread(events: list[dict[str, Any]]) -> None:
    processes = {e["pid"]: e["args"]["name"] for e in events
                 if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert all(isinstance(n, str) and n for n in [*processes.values(), *threads.values()])
    assert {e["pid"] for e in events} <= set(processes) and processes[0] == "rank 0"
    used = {(e["pid"], e["tid"]) for e in events if e["ph"] in ("X", "s", "f")}
    assert used <= set(threads)


def test_export_loads_back_with_every_flow_on_its_kernel(tmp_path: Path) -> None:
    """aiprof reads its own export: each launch -> kernel flow joins the same pair again."""
    from aiprof import load_trace

    out = tmp_path / "run.json"
    assert main(["export", "--perfetto", str(RUN), "-o", str(out), "--no-findings"]) == 0
    before, after = load_trace(RUN / "rank0.trace.json.gz"), load_trace(out)
    assert len(after.flows) == len(before.flows)
    assert (after.kernels.launch_row >= 0).sum() == (before.kernels.launch_row >= 0).sum()
