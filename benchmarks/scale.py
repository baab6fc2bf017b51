"""Scale benchmark: every trace command on synthetic traces from 50 MB to 2.5 GB (one rank) and
on 1 to 64 ranks of 54 MB, each command in its own process, with its wall time, its peak memory
(PSS summed over every process it starts), the floor beside it (a bare typed msgspec decode of
the same bytes) and the growth exponent fitted over the sizes.

    python benchmarks/scale.py                      # 50, 100, 200 MB; 1, 2, 4 ranks
    python benchmarks/scale.py --sizes-mb 50 250 1000 2500 --ranks 1 8 32 64
    python benchmarks/scale.py --commands summary diagnose --keep /tmp/scale-traces

The synthetic trace is a training loop as Kineto writes it: ProfilerStep spans, per step
``ops_per_step`` ATen ops each launching one kernel (cudaLaunchKernel, correlation and flow
events), one NCCL all-reduce per step on a second stream, deviceProperties and
distributedInfo. Its size grows with the number of steps, so the same analyses run over more of
the same events: a growth exponent above 1 is work that is not linear in the events.
"""

# ruff: noqa: UP031  (printf-style templates write JSON with braces unescaped, and fast)
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from process_measure import CHILD_PRELUDE, FLOOR_DECODER, cores, measure, peak_tree_pss_mib

COMMANDS = ("summary", "diagnose", "report", "distributed")
RANK_MB = 54.0
"""The size of one rank in the rank sweep: that of the public df_index_resolver trace (54 MB)."""

RUN_COMMAND = (
    CHILD_PRELUDE
    + """
import contextlib, io, os
from aiprof.cli.main import main
argv = sys.argv[1].split("\\x1f")
t0 = start()
with contextlib.redirect_stdout(io.StringIO()):
    code = main(argv)
assert code == 0, f"aiprof {argv[0]} exited {code}"
report(t0)
"""
)

FLOOR = (
    CHILD_PRELUDE
    + FLOOR_DECODER
    + """
from pathlib import Path
target = Path(sys.argv[1])
files = sorted(target.iterdir()) if target.is_dir() else [target]
t0 = start()
for path in files:
    document = decoder.decode(path.read_bytes())
    del document
report(t0)
"""
)


def write_trace(path: Path, target_mb: float, *, rank: int = 0, ops_per_step: int = 200) -> int:
    """Write a plain-JSON synthetic trace of about ``target_mb`` MB; return its event count."""
    events = 0
    with path.open("w", encoding="utf-8") as out:
        out.write(_header(rank))
        step, ts, corr = 0, 1_000_000.0, 1
        while out.tell() < target_mb * 1e6:
            lines, ts, corr = _step_events(step, ts, corr, rank, ops_per_step)
            out.write("".join(lines))
            events += len(lines)
            step += 1
        out.write('{"ph":"i","s":"t","name":"end","pid":1,"tid":1,"ts":%.3f}\n]}\n' % ts)
    return events + 1


def _header(rank: int) -> str:
    props = {
        "id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150_000_000_000, "computeMajor": 9,
        "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
        "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 233472, "numSms": 132,
        "sharedMemPerBlockOptin": 232448,
    }
    head = {
        "schemaVersion": 1,
        "deviceProperties": [props],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 64},
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    }
    return json.dumps(head)[:-1] + ', "traceEvents": [\n'


def _step_events(
    step: int, ts: float, corr: int, rank: int, ops_per_step: int
) -> tuple[list[str], float, int]:
    lines = []
    start = ts
    op_us, launch_us, kernel_us = 12.0, 4.0, 9.0 + (rank % 4)
    gpu_free = ts
    for index in range(ops_per_step):
        name = ("aten::linear", "aten::gelu", "aten::add", "aten::layer_norm")[index % 4]
        ext = corr
        lines.append(
            '{"ph":"X","cat":"cpu_op","name":"%s","pid":1,"tid":1,"ts":%.3f,"dur":%.3f,'
            '"args":{"External id":%d,"Input Dims":[[64,1024],[1024,1024]],'
            '"Input type":["float","float"]}},\n' % (name, ts, op_us, ext)
        )
        launch = ts + 6.0
        lines.append(
            '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,'
            '"ts":%.3f,"dur":%.3f,"args":{"correlation":%d,"External id":%d}},\n'
            % (launch, launch_us, corr, ext)
        )
        begin = max(gpu_free, launch + launch_us + 2.0)
        lines.append(
            '{"ph":"X","cat":"kernel","name":"kernel_%d_%s","pid":0,"tid":7,"ts":%.3f,'
            '"dur":%.3f,"args":{"device":0,"stream":7,"correlation":%d,"External id":%d,'
            '"grid":[264,1,1],"block":[256,1,1],"registers per thread":64,'
            '"shared memory":16384}},\n' % (index % 16, name[6:], begin, kernel_us, corr, ext)
        )
        lines.append('{"ph":"s","id":%d,"pid":1,"tid":1,"ts":%.3f,"cat":"ac2g",'
                     '"name":"ac2g"},\n' % (corr, launch))
        lines.append('{"ph":"f","id":%d,"pid":0,"tid":7,"ts":%.3f,"cat":"ac2g",'
                     '"name":"ac2g","bp":"e"},\n' % (corr, begin))
        gpu_free = begin + kernel_us
        ts += op_us + 1.0
        corr += 1
    comm_start = max(gpu_free, ts)
    lines.append(
        '{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL","pid":0,'
        '"tid":20,"ts":%.3f,"dur":%.3f,"args":{"device":0,"stream":20,"correlation":%d,'
        '"grid":[32,1,1],"block":[512,1,1],"In msg nelems":4194304,"Out msg nelems":4194304,'
        '"dtype":"Float","Group size":64}},\n' % (comm_start, 300.0 + 50 * (rank % 3), corr)
    )
    corr += 1
    end = max(ts, comm_start + 400.0) + 5.0
    lines.insert(0, '{"ph":"X","cat":"user_annotation","name":"ProfilerStep#%d","pid":1,'
                    '"tid":1,"ts":%.3f,"dur":%.3f},\n' % (step, start, end - start))
    return lines, end, corr


def growth_exponent(sizes: list[float], values: list[float]) -> float:
    """Least-squares slope of log(value) over log(size): 1.0 is linear."""
    xs = [math.log(s) for s in sizes]
    ys = [math.log(max(v, 1e-9)) for v in values]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 1.0


def argv_for(command: str, target: Path, out_dir: Path) -> list[str]:
    if command == "report":
        return ["report", str(target), "-o", str(out_dir / "report.html")]
    if command == "distributed":
        return ["distributed", str(target), "--json"]
    return [command, str(target), "--json"]


def run_point(target: Path, raw_mb: float, commands: list[str], out_dir: Path) -> dict:
    """Time and measure every command and the floor on one target."""
    row: dict = {"raw_mb": raw_mb, "commands": {}, "began_utc": _utc(),
                 "load_avg_begin": os.getloadavg()[0]}
    floor = measure(sys.executable, FLOOR, target)
    row["floor_s"] = floor["seconds"]
    row["floor_cpu_s"] = floor["cpu_s"]
    row["floor_pss_mib"] = peak_tree_pss_mib(sys.executable, FLOOR, target)
    for command in commands:
        joined = "\x1f".join(argv_for(command, target, out_dir))
        timed = measure(sys.executable, RUN_COMMAND, Path(joined))
        pss = peak_tree_pss_mib(sys.executable, RUN_COMMAND, Path(joined))
        row["commands"][command] = {"seconds": timed["seconds"], "cpu_s": timed["cpu_s"],
                                    "pss_mib": pss, "load_avg_after": os.getloadavg()[0]}
    row["ended_utc"] = _utc()
    return row


def _utc() -> str:
    return time.strftime("%H:%M:%S", time.gmtime())


def _print_rows(label: str, key: str, rows: list[dict], commands: list[str]) -> None:
    print(f"\n{label}: wall s / CPU s (all processes) / peak PSS MiB")
    print(f"{key:>8} {'floor':>11} " + " ".join(f"{c:>20}" for c in commands))
    for row in rows:
        cells = " ".join(
            f"{_cell(row['commands'][c]['seconds'], row['commands'][c]['cpu_s']):>14}"
            f" {row['commands'][c]['pss_mib']:>5.0f}"
            for c in commands
        )
        print(f"{row[key]:>8.0f} {_cell(row['floor_s'], row['floor_cpu_s']):>11} {cells}")
        loads = [row["load_avg_begin"]] + [row["commands"][c]["load_avg_after"] for c in commands]
        print(f"{'':>8} {row['began_utc']}-{row['ended_utc']} UTC, load average "
              + " ".join(f"{v:.1f}" for v in loads) + _of_summary(row["commands"]))
    if len(rows) > 1:
        xs = [row[key] for row in rows]
        for what, field in (("wall time", "seconds"), ("CPU time", "cpu_s"),
                            ("peak PSS", "pss_mib")):
            fits = ", ".join(
                f"{c} {growth_exponent(xs, [r['commands'][c][field] for r in rows]):.2f}"
                for c in commands
            )
            floor = {"seconds": "floor_s", "cpu_s": "floor_cpu_s"}.get(field)
            tail = f"; floor {growth_exponent(xs, [r[floor] for r in rows]):.2f}" if floor else ""
            print(f"growth exponent of {what} over {key}: {fits}{tail}")


def _of_summary(cells: dict) -> str:
    """Each command's wall and CPU time over summary's in the same point (the issue's 2x)."""
    base = cells.get("summary")
    if base is None:
        return ""
    ratios = [f"{c} {v['seconds'] / base['seconds']:.2f}x wall, "
              f"{v['cpu_s'] / base['cpu_s']:.2f}x CPU" for c, v in cells.items() if c != "summary"]
    return "; of summary's: " + ", ".join(ratios) if ratios else ""


def _cell(wall_s: float, cpu_s: float) -> str:
    return f"{wall_s:.2f}/{cpu_s:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes-mb", type=float, nargs="*", default=[50, 100, 200],
                        help="sizes of the one-rank traces (none: no one-rank point)")
    parser.add_argument("--ranks", type=int, nargs="*", default=[1, 2, 4],
                        help="rank counts of the rank sweep (none: no rank point)")
    parser.add_argument("--commands", nargs="+", choices=COMMANDS, default=list(COMMANDS))
    parser.add_argument("--keep", type=Path, help="write the traces here and keep them")
    parser.add_argument("--json", type=Path, help="also write every number to this file")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}, {cores()} cores; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    with tempfile.TemporaryDirectory(prefix="aiprof-scale-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        out_dir = Path(tmp)
        single_rows = []
        for size in args.sizes_mb:
            path = root / f"single-{size:g}mb.json"
            if not path.exists():
                write_trace(path, size)
            row = run_point(path, path.stat().st_size / 1e6, args.commands, out_dir)
            single_rows.append(row)
        if single_rows:
            _print_rows("one rank (raw JSON MB)", "raw_mb", single_rows, args.commands)
        rank_rows = []
        for ranks in args.ranks:
            folder = root / f"ranks-{ranks}"
            folder.mkdir(exist_ok=True)
            for rank in range(ranks):
                path = folder / f"rank{rank}.json"
                if not path.exists():
                    write_trace(path, RANK_MB, rank=rank)
            row = run_point(folder, sum(p.stat().st_size for p in folder.iterdir()) / 1e6,
                            args.commands, out_dir)
            row["ranks"] = ranks
            rank_rows.append(row)
        if rank_rows:
            _print_rows(f"ranks of {RANK_MB:g} MB", "ranks", rank_rows, args.commands)
    if args.json:
        args.json.write_text(json.dumps({"single": single_rows, "ranks": rank_rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
