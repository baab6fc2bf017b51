"""GIVEN allocator events WHEN memory is attributed to ops THEN the peak, the blocks alive at
it and each op's own bytes match the hand count, and on a real CPU session with
profile_memory every op's net bytes equal ``key_averages()``'s ``self_cpu_memory_usage``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from views_synth import Builder

from aiprof import load_trace
from aiprof.analysis.memory_ops import UNATTRIBUTED, memory_by_op
from aiprof.cli.main import main


def _memory(b: Builder, ts: float, nbytes: int, addr: int, total: int) -> None:
    b.events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                     "pid": 1, "tid": 1, "ts": ts,
                     "args": {"Bytes": nbytes, "Addr": addr, "Total Allocated": total,
                              "Total Reserved": 0, "Device Type": 1, "Device Id": 0}})


@pytest.fixture
def three_blocks(tmp_path: Path) -> Path:
    b = Builder()
    b.step(1, 0, 100)
    b.op("aten::empty", 10, 5)   # 100 B at 11, freed at 60
    b.op("aten::mm", 20, 30)     # 300 B at 25 (peak 400 at 25), 50 B at 40
    b.op("aten::add", 55, 10)    # frees the first block at 60
    _memory(b, 11, 100, 1, 100)
    _memory(b, 25, 300, 2, 400)
    _memory(b, 40, 50, 3, 450)
    _memory(b, 60, -100, 1, 350)
    _memory(b, 150, -300, 2, 50)  # outside every span (after the step)
    return b.write(tmp_path / "m.json")


def test_peak_alive_and_ownership(three_blocks: Path) -> None:
    (d,) = memory_by_op(load_trace(three_blocks)).devices
    assert (d.device_type, d.device, d.peak_bytes) == (1, 0, 450)
    assert d.peak_us == 40 and d.num_alive_at_peak == 3
    assert d.ops_at_peak == ["aten::mm"]
    ops = {o.name: o for o in d.ops}
    assert (ops["aten::mm"].allocated_bytes, ops["aten::mm"].alive_at_peak_bytes) == (350, 350)
    assert ops["aten::add"].freed_bytes == 100 and ops["aten::add"].net_bytes == -100
    assert ops[UNATTRIBUTED].net_bytes == -300
    assert d.live_bytes.tolist() == [100, 400, 450, 350, 50]


def test_cli_json(three_blocks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", "--memory", "--json", "--curve", str(three_blocks)]) == 0
    (device,) = json.loads(capsys.readouterr().out)["ranks"][0]["devices"]
    assert device["peak_bytes"] == 450 and device["live_bytes"][-1] == 50


def test_net_bytes_equal_key_averages(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(2):
            with record_function("step"):
                model(torch.randn(32, 64)).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    (d,) = memory_by_op(load_trace(path)).devices
    ours = {o.name: o.net_bytes for o in d.ops}
    theirs = {e.key: e.self_cpu_memory_usage for e in prof.key_averages()}
    assert any(v > 0 for v in theirs.values())
    for name, value in theirs.items():
        assert ours.get(name, 0) == value, name
    assert set(ours) <= set(theirs)
    pytest.importorskip("pandas")
    assert d.to_pandas()["net_bytes"].sum() == sum(theirs.values())
