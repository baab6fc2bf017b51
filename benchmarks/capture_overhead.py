"""Step time under plain torch.profiler vs ``aiprof run`` (with NVML sampling), and trace size.

Both modes profile the same training loop with the same profiler settings and schedule; the
difference is what ``aiprof run`` adds: running the script through runpy, the optimizer step
hook, the output tee and the NVML sampling thread. Repetitions are interleaved (ABBA order)
in one process so that drifts in machine load hit both modes alike.

    python benchmarks/capture_overhead.py [--reps 6] [--device cpu|cuda] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import runpy
import statistics
import sys
import tempfile
import time
from pathlib import Path

WORKLOAD = '''
import json, os, sys, time
import torch

device = os.environ["BENCH_DEVICE"]
steps = int(os.environ["BENCH_STEPS"])
torch.manual_seed(0)
torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(32, 32, 3, padding=1),
    torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(512, 10),
).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(int(os.environ["BENCH_BATCH"]), 3, 32, 32, device=device)
y = torch.randint(0, 10, (x.shape[0],), device=device)


def sync():
    if device == "cuda":
        torch.cuda.synchronize()


def loop(profiler=None):
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        sync()
        if profiler is not None:
            profiler.step()
        times.append(time.perf_counter() - start)
    return times


if os.environ.get("BENCH_PLAIN"):
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    schedule = torch.profiler.schedule(skip_first=int(os.environ["BENCH_SKIP"]), wait=0,
                                       warmup=1, active=int(os.environ["BENCH_ACTIVE"]), repeat=1)
    trace = os.environ["BENCH_TRACE"]
    with torch.profiler.profile(activities=activities, schedule=schedule, record_shapes=True,
                                profile_memory=True,
                                on_trace_ready=lambda p: p.export_chrome_trace(trace)) as prof:
        times = loop(prof)
else:
    times = loop()
with open(os.environ["BENCH_TIMES"], "w") as handle:
    json.dump(times, handle)
'''


def run_once(mode: str, script: Path, work: Path, rep: int, args: argparse.Namespace) -> dict:
    """One repetition of one mode: per-step times and the trace size."""
    from aiprof.cli.main import main

    times_path = work / f"{mode}-{rep}.json"
    sampled: dict = {}
    env = {"BENCH_DEVICE": args.device, "BENCH_STEPS": str(args.steps),
           "BENCH_BATCH": str(args.batch), "BENCH_SKIP": str(args.skip),
           "BENCH_ACTIVE": str(args.active), "BENCH_TIMES": str(times_path)}
    os.environ.update(env)
    if mode == "plain":
        trace = work / f"plain-{rep}.trace.json.gz"
        os.environ.update(BENCH_PLAIN="1", BENCH_TRACE=str(trace))
        saved = sys.argv
        sys.argv = [str(script)]
        try:
            runpy.run_path(str(script), run_name="__main__")
        finally:
            sys.argv = saved
            os.environ.pop("BENCH_PLAIN")
    else:
        out = work / f"runs-{rep}"
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(["run", "--out", str(out), "--skip", str(args.skip), "--warmup", "1",
                         "--active", str(args.active), "--sample-rate", str(args.sample_rate),
                         "--json", "--", str(script)])
        if code != 0:
            raise SystemExit(f"aiprof run failed with exit code {code}")
        trace = (out / "latest" / "rank0.trace.json.gz").resolve()
        meta = json.loads((trace.parent / "meta.json").read_text())
        sampled = meta["samples"]  # whether NVML sampling really ran, and how many rows
    times = json.loads(times_path.read_text())
    window = times[args.skip + 1: args.skip + 1 + args.active]  # the recorded steps
    after = times[args.skip + 1 + args.active:]
    return {"mode": mode, "rep": rep, "nvml_samples": sampled if mode == "aiprof" else None,
            "active_step_ms": 1e3 * statistics.median(window),
            "after_step_ms": 1e3 * statistics.median(after) if after else None,
            "all_step_ms": 1e3 * statistics.median(times[args.skip:]),
            "trace_bytes_per_step": trace.stat().st_size / args.active}


def summarize(rows: list[dict]) -> dict:
    """Per mode, the median and the minimum over repetitions of each per-repetition median
    step time; aiprof's extra step time in percent from both (the minimum is the least
    disturbed by other load on a shared machine)."""
    summary: dict = {}
    keys = ("active_step_ms", "all_step_ms", "trace_bytes_per_step")
    for mode in ("plain", "aiprof"):
        mine = [row for row in rows if row["mode"] == mode]
        summary[mode] = {key: statistics.median(row[key] for row in mine) for key in keys}
        summary[mode].update({f"min_{key}": min(row[key] for row in mine) for key in keys[:2]})
    for key in ("active_step_ms", "all_step_ms", "min_active_step_ms", "min_all_step_ms"):
        summary[f"extra_{key.removesuffix('_ms')}_pct"] = 100.0 * (
            summary["aiprof"][key] / summary["plain"][key] - 1.0)
    for key in ("active_step_ms", "all_step_ms"):  # each repetition's two modes ran back to back
        pairs = {}
        for row in rows:
            pairs.setdefault(row["rep"], {})[row["mode"]] = row[key]
        ratios = [pair["aiprof"] / pair["plain"] for pair in pairs.values()]
        summary[f"extra_paired_{key.removesuffix('_ms')}_pct"] = 100.0 * (
            statistics.median(ratios) - 1.0)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=6, help="repetitions per mode (default 6)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--skip", type=int, default=5)
    parser.add_argument("--active", type=int, default=10)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--sample-rate", type=float, default=20.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        script = work / "workload.py"
        script.write_text(WORKLOAD)
        for rep in range(args.reps):
            order = ("plain", "aiprof") if rep % 2 == 0 else ("aiprof", "plain")  # ABBA
            for mode in order:
                rows.append(run_once(mode, script, work, rep, args))
    result = {"machine": platform.node(), "python": platform.python_version(),
              "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
              "settings": vars(args), "reps": rows, "summary": summarize(rows)}
    print(f"{'mode':8} {'rep':>3} {'active step ms':>15} {'all steps ms':>13} "
          f"{'trace KB/step':>14}")
    for row in rows:
        print(f"{row['mode']:8} {row['rep']:3d} {row['active_step_ms']:15.2f} "
              f"{row['all_step_ms']:13.2f} {row['trace_bytes_per_step'] / 1024:14.1f}")
    summary = result["summary"]
    for label, key in (("active steps", "active_step"), ("all steps", "all_step")):
        print(f"{label}: median plain {summary['plain'][key + '_ms']:.2f} ms, aiprof "
              f"{summary['aiprof'][key + '_ms']:.2f} ms ({summary[f'extra_{key}_pct']:+.1f}%); "
              f"min plain {summary['plain']['min_' + key + '_ms']:.2f} ms, aiprof "
              f"{summary['aiprof']['min_' + key + '_ms']:.2f} ms "
              f"({summary[f'extra_min_{key}_pct']:+.1f}%); median of paired ratios "
              f"{summary[f'extra_paired_{key}_pct']:+.1f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
