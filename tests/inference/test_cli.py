"""The padding and batching commands: JSON shape, values against independent arithmetic, errors."""

from __future__ import annotations

import json
import textwrap

import pytest

from aiprof.cli.main import main


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_padding_json_schema_and_chapter_numbers(tmp_path, capsys):
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("\n".join(str(x) for x in range(10, 101, 10)) + "\n")
    doc = _json(capsys, ["padding", str(lengths), "--buckets", "3", "--batch-size", "2", "--json"])
    assert doc["schema"] == "aiprof.padding/1"
    assert doc["fixed"]["waste_pct"] == pytest.approx(45.0)
    assert doc["buckets"]["boundaries"] == [30, 60, 100]
    assert doc["dynamic"]["sorted_waste_pct"] == pytest.approx(100 * 50 / 600)
    assert set(doc["dynamic"]) == {"waste_pct", "sorted_waste_pct"}
    assert doc["packing"] == {"rows": 6, "waste_pct": pytest.approx(100 * 50 / 600)}


def test_padding_table_renders(tmp_path, capsys):
    lengths = tmp_path / "l.txt"
    lengths.write_text("5, 7  # comment\n9\n")
    assert main(["padding", str(lengths), "--cost", "quadratic"]) == 0
    assert "optimal buckets" in capsys.readouterr().out


@pytest.mark.parametrize(("content", "needle"), [
    ("", "empty"), ("3\n-2\n", "not positive"), ("3\nabc\n", "line 2"),
])
def test_padding_bad_files_one_line_exit_2(tmp_path, capsys, content, needle):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    assert main(["padding", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err


def test_padding_missing_file(capsys):
    assert main(["padding", "/nonexistent/lengths.txt"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_batching_simulate_json(tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    curve.write_text("batch_size,latency_ms\n1,2.25\n32,10\n")
    doc = _json(capsys, ["batching", "simulate", "--latency-curve", str(curve), "--rate", "1500",
                         "--max-batch", "32", "--requests", "5000", "--json"])
    m = doc["metrics"]
    assert doc["schema"] == "aiprof.batching.simulate/1"
    assert m["num_completed"] == 5000
    # every request took at least one batch's latency
    assert m["latency_p50_us"] >= 2250
    assert m["throughput_rps"] == pytest.approx(1500, rel=0.08)


def test_batching_simulate_replay_and_table(tmp_path, capsys):
    replay = tmp_path / "arrivals.txt"
    replay.write_text("0\n100\n200\n10000\n")
    assert main(["batching", "simulate", "--linear-ms", "1,0.5", "--replay", str(replay),
                 "--max-batch", "4", "--max-delay-ms", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "throughput" in out and "4" in out


def test_batching_tune_respects_the_slo(capsys):
    doc = _json(capsys, ["batching", "tune", "--linear-ms", "2,0.25", "--p99-ms", "12",
                         "--rate", "1000", "--max-batch-sizes", "4,16,64", "--json"])
    result = doc["result"]
    best = result["best"]
    assert best["meets_slo"] and best["p99_at_rate_us"] <= 12_000
    # capacity bound B / T(B) of the best policy's max batch (reference A1 capacity rule)
    b = best["max_batch_size"]
    assert best["max_rate_rps"] <= b / (2 + 0.25 * b) * 1000 + 1e-6
    assert all(c["max_rate_rps"] <= best["max_rate_rps"] for c in result["candidates"]
               if c["meets_slo"])


def test_batching_bad_inputs(tmp_path, capsys):
    assert main(["batching", "simulate", "--linear-ms", "x", "--rate", "5"]) == 2
    assert main(["batching", "simulate", "--linear-ms", "1,1"]) == 2  # no rate
    assert main(["batching", "simulate", "--linear-ms", "1,1", "--rate", "-3"]) == 2
    bad = tmp_path / "c.csv"
    bad.write_text("size,ms\n1,2\n")
    assert main(["batching", "tune", "--latency-curve", str(bad), "--p99-ms", "5"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 4


MODEL_FILE = textwrap.dedent("""
    import time

    import torch

    class Timed(torch.nn.Module):
        # a linear layer that takes 2 ms + 0.5 ms per row: a model of controlled latency
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(16, 4)

        def forward(self, x):
            time.sleep(0.002 + 0.0005 * x.shape[0])
            return self.linear(x)

    def timed():
        torch.manual_seed(0)
        return Timed(), lambda batch: torch.randn(batch, 16)

    def mlp():
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
        )
        return model, lambda batch: torch.randn(batch, 16)

    def broken():
        raise RuntimeError("checkpoint not found")
""")


@pytest.mark.slow
def test_batching_bench_measures_and_serves(tmp_path, capsys):
    module = tmp_path / "models.py"
    module.write_text(MODEL_FILE)
    curve_csv = tmp_path / "curve.csv"
    doc = _json(capsys, ["batching", "bench", "--model", f"{module}:timed", "--batch-sizes",
                         "1,4", "--max-batch", "4", "--iters", "5", "--concurrency", "1,2",
                         "--duration-s", "0.2", "--min-requests", "40", "--overload", "5",
                         "--calibration-requests", "30", "--p99-ms", "60",
                         "--tune-requests", "200", "--curve-out", str(curve_csv), "--json"])
    assert doc["schema"] == "aiprof.batching.bench/2"
    assert doc["assembly"]["asked"] == "auto" and set(doc["assembly"]["timed"]) == {"gather",
                                                                                   "take"}
    assert doc["assembly"]["used"] in ("gather", "take")
    result = doc["result"]
    assert result["curve"]["batch_sizes"] == [1, 4]
    assert [p["label"] for p in result["open_loop"]] == ["40% of capacity", "80% of capacity"]
    for point in result["open_loop"] + result["closed_loop"]:
        real = point["real"]
        assert real["num_ok"] == real["num_requests"] >= 40  # no queue bound: all served
        assert real["num_lost"] == real["num_duplicated"] == 0
        assert point["simulated"]["num_completed"] == real["num_requests"]
        assert set(doc["errors"][point["label"]]) == {"throughput_pct", "p50_pct", "p99_pct"}
    assert result["closed_loop"][1]["real"]["server"]["batch_size_histogram"]
    overload = result["overload"]
    assert overload["num_lost"] == overload["num_duplicated"] == 0
    assert overload["num_ok"] + sum(overload["rejected"].values()) == overload["num_requests"]
    assert result["tuner"]["best"]["max_batch_size"] <= 4
    assert curve_csv.read_text().startswith("batch_size,latency_ms")


def test_batching_bench_without_cuda_exit_2(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    module = tmp_path / "models.py"
    module.write_text(MODEL_FILE)
    assert main(["batching", "bench", "--model", f"{module}:mlp", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no CUDA device" in err


def test_batching_bench_failing_factory_exit_2(tmp_path, capsys):
    module = tmp_path / "models.py"
    module.write_text(MODEL_FILE)
    assert main(["batching", "bench", "--model", f"{module}:broken"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "checkpoint not found" in err
    assert main(["batching", "bench", "--model", "no_such_module_xyz:f"]) == 2


def test_batching_simulate_priorities_split_the_tail(capsys):
    argv = ["batching", "simulate", "--linear-ms", "2,0.25", "--rate", "1900", "--max-batch",
            "8", "--max-delay-ms", "2", "--high-share", "0.2", "--high-delay-ms", "0.5",
            "--requests", "8000", "--json"]
    by_level = _json(capsys, argv)["metrics"]["latency_p99_by_level_us"]
    # near capacity (8 / 4 ms = 2000 req/s) level 1 overtakes the queue: a far shorter tail
    assert by_level["1"] < 0.5 * by_level["2"]
    aged = _json(capsys, [*argv[:-1], "--aging-ms", "1", "--json"])
    levels = aged["metrics"]["latency_p99_by_level_us"]
    # aging promotes every request that waited 1 ms: the two tails become alike
    assert levels["1"] == pytest.approx(levels["2"], rel=0.25)
    assert main(["batching", "simulate", "--linear-ms", "1,1", "--rate", "5",
                 "--high-share", "2"]) == 2
