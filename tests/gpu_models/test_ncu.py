"""The ncu CSV parser, the per-kernel summary and ``aiprof kernels``.

The CSV below is written by hand following the format documented in the Nsight Compute CLI
guide as summarized in ../shared/reference/gpu-models.md §7.3 (long ``--page details`` layout,
thousands separators, ``n/a``, ``==PROF==`` lines and program output before the header). It is
not output captured from ncu.
"""

from __future__ import annotations

import json

import pytest

from aiprof.cli.main import main
from aiprof.gpu.ncu_csv import parse_ncu_csv, parse_value
from aiprof.gpu.ncu_summary import summarize
from aiprof.gpu.occupancy import occupancy

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')


def _row(launch, kernel, block, grid, metric, unit, value):
    return (f'"{launch}","4242","python","host","{kernel}","1","7","{block}","{grid}","0","9.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}"')


LAUNCH0 = [
    ("gpu__time_duration.sum", "usecond", "12.48"),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "35.2"),
    ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%", "88.1"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "%", "64.3"),
    ("sm__maximum_warps_per_active_cycle_pct", "%", "100"),
    ("launch__block_size", "", "256"),
    ("launch__registers_per_thread", "register/thread", "32"),
    ("launch__shared_mem_per_block_static", "byte", "8,192"),
    ("launch__shared_mem_per_block_dynamic", "byte", "0"),
    ("launch__occupancy_limit_registers", "block", "8"),
    ("launch__occupancy_limit_shared_mem", "block", "14"),
    ("launch__occupancy_limit_warps", "block", "8"),
    ("launch__occupancy_limit_blocks", "block", "32"),
    ("l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio", "sector", "4"),
    ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct", "%", "100"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "", "992"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "", "0"),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "", "1,024"),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "", "32"),
    ("smsp__thread_inst_executed_per_inst_executed.ratio", "", "16.64"),
    ("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", "ratio", "7.5"),
    ("smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", "ratio", "2.25"),
    ("smsp__average_warps_issue_stalled_selected_per_issue_active.ratio", "ratio", "1"),
    ("smsp__sass_average_branch_targets_threads_uniform.pct", "%", "96.55"),
]
LAUNCH1 = [
    ("gpu__time_duration.sum", "nsecond", "1,536"),
    ("launch__block_size", "", "1024"),
    ("launch__registers_per_thread", "register/thread", "72"),
    ("launch__shared_mem_per_block_static", "byte", "0"),
    ("launch__shared_mem_per_block_dynamic", "byte", "0"),
    ("sm__maximum_warps_per_active_cycle_pct", "%", "n/a"),
]
CSV = "\n".join([
    "==PROF== Connected to process 4242 (/usr/bin/python3.12)",
    "hello from the program",
    "==PROF== Profiling \"transpose\" - 0: 0%....50%....100% - 9 passes",
    HEADER,
    *(_row(0, "transpose(float*, const float*)", "(32, 8, 1)", "(64, 64, 1)", *m) for m in LAUNCH0),
    *(_row(1, "big_kernel", "(1024, 1, 1)", "(10, 1, 1)", *m) for m in LAUNCH1),
    "==PROF== Disconnected from process 4242",
]) + "\n"


def test_parse_value_handles_separators_and_na():
    assert parse_value("1,081,344") == 1081344.0
    assert parse_value("n/a") is None and parse_value("") is None
    assert parse_value("(256, 1, 1)") == "(256, 1, 1)"


def test_parser_groups_rows_by_launch():
    launches = parse_ncu_csv(CSV)
    assert [launch.launch_id for launch in launches] == [0, 1]
    first = launches[0]
    assert first.kernel_name == "transpose(float*, const float*)"
    assert first.block_size == (32, 8, 1) and first.grid_size == (64, 64, 1)
    assert first.number("launch__shared_mem_per_block_static") == 8192
    assert launches[1].number("sm__maximum_warps_per_active_cycle_pct") is None


def test_summary_units_limiter_stalls_and_model():
    first, second = (summarize(launch) for launch in parse_ncu_csv(CSV))
    assert first.duration_us == 12.48 and second.duration_us == pytest.approx(1.536)
    assert first.bottleneck == "high throughput"
    # registers and warps both allow 8 blocks: ties resolve in aiprof's order (warps first).
    assert first.limiter == first.model_limiter == "warps"
    assert first.bank_conflicts == 992 and first.shared_wavefronts == 1056
    assert [s.reason for s in first.top_stalls] == ["long_scoreboard", "barrier"]
    # The model prediction is the exact calculator on the launch args (independent of ncu).
    assert first.model_occupancy_pct == 100 * occupancy("sm_90", 256, 32, 8192).occupancy
    assert second.model_occupancy_pct == 0.0  # 72 registers x 1024 threads cannot launch


def test_cli_reads_csv_and_maps_nvprof_names(tmp_path, capsys):
    path = tmp_path / "ncu.csv"
    path.write_text(CSV)
    code = main(["kernels", "--csv-input", str(path), "--json", "--nvprof-metrics",
                 "warp_execution_efficiency,branch_efficiency,inst_replay_overhead"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["kernels"]) == 2
    values = {(v["launch_id"], v["nvprof"]): v for v in data["nvprof"]}
    assert values[(0, "warp_execution_efficiency")]["value"] == pytest.approx(16.64 * 100 / 32)
    assert values[(0, "branch_efficiency")]["value"] == 96.55
    assert values[(0, "inst_replay_overhead")]["value"] is None


def test_cli_table_output(tmp_path, capsys):
    path = tmp_path / "ncu.csv"
    path.write_text(CSV)
    assert main(["kernels", "--csv-input", str(path)]) == 0
    out = capsys.readouterr().out
    assert "transpose" in out and "long_scoreboard" in out


def test_without_ncu_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setenv("PATH", "")
    assert main(["kernels", "--ncu", "--", "python", "x.py"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ncu" in err


def test_unknown_nvprof_metric_and_garbage_csv(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text("not a csv at all\n")
    assert main(["kernels", "--csv-input", str(path)]) == 2
    assert main(["kernels", "--csv-input", str(path), "--nvprof-metrics", "nope"]) == 2


def test_runs_ncu_with_clock_control_none_and_reads_its_log(tmp_path, monkeypatch, capsys):
    # A stand-in ncu on PATH: records its arguments and writes the hand-made CSV to --log-file.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "report.csv").write_text(CSV)
    fake = bindir / "ncu"
    fake.write_text("#!/bin/sh\n"
                    f'echo "$@" > "{tmp_path}/args"\n'
                    'while [ "$1" != "--log-file" ]; do shift; done\n'
                    f'cp "{tmp_path}/report.csv" "$2"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    code = main(["kernels", "--ncu", "--kernel-regex", "transpose", "--launch-count", "3",
                 "--json", "--", "python", "x.py"])
    assert code == 0
    args = (tmp_path / "args").read_text().split()
    assert args[args.index("--clock-control") + 1] == "none"
    assert args[args.index("--kernel-name") + 1] == "regex:transpose"
    assert args[args.index("--launch-count") + 1] == "3"
    assert args[-2:] == ["python", "x.py"]
    assert len(json.loads(capsys.readouterr().out)["kernels"]) == 2
