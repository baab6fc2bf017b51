"""``aiprof comm model|bench``: JSON contract, bad input, a 2-process gloo bench via torchrun."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from aiprof.cli.main import main


def test_comm_model_json_matches_ring_formula(capsys):
    argv = [
        "comm",
        "model",
        "--collective",
        "allreduce",
        "--ranks",
        "8",
        "--bytes",
        "256MiB",
        "--alpha-us",
        "5",
        "--bandwidth-gbps",
        "25",
        "--json",
    ]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "aiprof.comm_model/1"
    assert {"algorithm", "time_us", "algbw_gbps", "busbw_gbps", "per_algorithm"} <= set(data)
    n, p = 256 * 2**20, 8
    ring = 2 * (p - 1) * 5 + 2 * n * (p - 1) / p / 25e3
    assert data["per_algorithm"]["ring"]["time_us"] == pytest.approx(ring)
    best = min(v["time_us"] for v in data["per_algorithm"].values())
    assert data["time_us"] == best
    assert data["algbw_gbps"] == pytest.approx(n / data["time_us"] / 1e3)
    assert data["busbw_gbps"] == pytest.approx(data["algbw_gbps"] * 2 * (p - 1) / p)


def test_comm_model_table_renders(capsys):
    assert main(["comm", "model", "--ranks", "4", "--bytes", "1MiB", "--link", "pcie"]) == 0
    assert "cheapest" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["--ranks", "0", "--bytes", "1MiB"],
        ["--ranks", "8", "--bytes", "-5"],
        ["--ranks", "8", "--bytes", "1MiB", "--link", "smoke-signals"],
        ["--ranks", "8", "--bytes", "1MiB", "--alpha-us", "3"],
        ["--ranks", "8", "--bytes", "1MiB", "--collective", "gossip"],
    ],
)
def test_comm_model_bad_input_one_line_exit_2(capsys, argv):
    assert main(["comm", "model", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err


def test_comm_bench_bad_input(capsys, tmp_path):
    assert main(["comm", "bench", "--min-bytes", "1MiB", "--max-bytes", "8"]) == 2
    missing = tmp_path / "none.json"
    assert (
        main(["comm", "model", "--ranks", "2", "--bytes", "1MiB", "--from-bench", str(missing)])
        == 2
    )


@pytest.mark.cpu_hog
def test_comm_bench_two_gloo_ranks_under_torchrun(tmp_path, capsys):
    torchrun = shutil.which("torchrun") or pytest.skip("torchrun not installed")
    out = tmp_path / "bench.json"
    argv = [
        torchrun,
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "aiprof.cli.main",
        "comm",
        "bench",
        "--max-bytes",
        "4MiB",
        "--step-factor",
        "16",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--repeats",
        "2",
        "--fit-min-bytes",
        "32KiB",
        "--output",
        str(out),
        "--json",
    ]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**__import__("os").environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["schema"] == "aiprof.comm_bench/1" and data["num_ranks"] == 2
    assert data["backend"] == "gloo" and data["repeats"] == 2
    seen = {p["collective"] for p in data["points"]}
    assert {"allreduce", "allgather", "broadcast"} <= seen
    for point in data["points"]:
        factor = {"allreduce": 1.0, "allgather": 0.5, "reducescatter": 0.5, "broadcast": 1.0}
        assert point["algbw_gbps"] == pytest.approx(point["num_bytes"] / point["time_us"] / 1e3)
        assert point["busbw_gbps"] == pytest.approx(
            point["algbw_gbps"] * factor[point["collective"]]
        )
    assert min(p["num_bytes"] for p in data["points"]) == 8
    assert {f["collective"] for f in data["fits"]} == seen
    # The fitted parameters feed the model.
    assert (
        main(
            [
                "comm",
                "model",
                "--ranks",
                "2",
                "--bytes",
                "64KiB",
                "--from-bench",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    model = json.loads(capsys.readouterr().out)
    assert model["link"]["name"] == "measured" and model["algorithm"].startswith("ring")


@pytest.mark.cpu_hog
@pytest.mark.slow
def test_comm_bench_spawns_its_own_processes(capsys):
    code = main(
        [
            "comm",
            "bench",
            "--nproc",
            "2",
            "--collectives",
            "allreduce",
            "--max-bytes",
            "64KiB",
            "--step-factor",
            "16",
            "--iters",
            "2",
            "--warmup",
            "0",
            "--json",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert [p["num_bytes"] for p in data["points"]] == [8, 128, 2048, 32768, 65536]


def test_console_entry_for_torchrun_module():
    done = subprocess.run(
        [sys.executable, "-m", "aiprof.cli.main", "comm", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and "bench" in done.stdout


def test_comm_model_sweep_ring_versus_tree(capsys):
    argv = [
        "comm",
        "model",
        "--ranks",
        "8",
        "--bytes",
        "8",
        "--max-bytes",
        "1GiB",
        "--algorithms",
        "ring,double_binary_tree",
        "--json",
    ]
    assert main(argv) == 0
    points = json.loads(capsys.readouterr().out)["points"]
    assert [p["num_bytes"] for p in points][:3] == [8, 32, 128] and points[-1]["num_bytes"] == 2**30
    for p in points:
        assert set(p["per_algorithm"]) == {"ring", "double_binary_tree"}
        assert p["algorithm"] == min(
            p["per_algorithm"], key=lambda a: p["per_algorithm"][a]["time_us"]
        )
    # Tree's log-depth latency wins small messages; ring's 2n(p−1)/p·β wins large ones.
    assert points[0]["algorithm"] == "double_binary_tree" and points[-1]["algorithm"] == "ring"
    assert main(["comm", "model", "--ranks", "8", "--bytes", "1GiB", "--max-bytes", "1MiB"]) == 2
