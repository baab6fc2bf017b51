"""The tables of docs/diagnose.md, recomputed from the committed data: replay fidelity on every
public trace, and the planted-bottleneck suite (estimated against measured gain).

    python benchmarks/diagnose_tables.py [--public ../shared/traces/public]

Prints Markdown. Times are of ``diagnose`` alone (the trace is read first), on this machine.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from aiprof.diagnose import DiagnoseOptions, diagnose
from aiprof.diagnose.calibration import DEFAULT_OVERHEAD_US
from aiprof.diagnose.context import Context
from aiprof.trace import load_trace

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "tests" / "data" / "diagnose"


def fidelity(paths: list[Path]) -> None:
    print("| trace | device | measured step ms | replayed step ms | ratio | top finding | "
          "diagnose s |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: |")
    for path in paths:
        trace = load_trace(path)
        began = time.perf_counter()
        result = diagnose(trace)
        seconds = time.perf_counter() - began
        top = result.findings[0] if result.findings else None
        ratio = result.replay_step_us / result.step_us if result.replay_step_us else None
        name = path.relative_to(path.parents[1]) if "public" in str(path) else path.relative_to(
            ROOT)
        print(f"| {name} | {result.device or '-'} | {result.step_us / 1e3:.2f} | "
              f"{result.replay_step_us / 1e3:.2f} | {f'{ratio:.2f}' if ratio else '-'} | "
              f"{f'{top.category} {top.estimated_gain_pct:.1f}%' if top else '-'} | "
              f"{seconds:.2f} |")


def _estimate(path: Path, category: str, options: DiagnoseOptions | None = None) -> float:
    found = {f.category: f.estimated_gain_pct for f in diagnose(path, options).findings}
    return found.get(category, 0.0)


def suite(folder: Path, given_unprofiled: bool = False) -> None:
    """One row per recording: measured gain (rounds), estimate, error, fitted profiler cost,
    and the estimate with the default cost (as for a plain torch.profiler trace)."""
    cases = json.loads((folder / "labels.json").read_text())["cases"]
    print("| case | measured gain % (rounds) | estimated % | error | within ±30% | top finding | "
          "profiler µs/event | estimate with default cost % |")
    print("| --- | ---: | ---: | ---: | --- | --- | ---: | ---: |")
    for case in cases:
        path = folder / case.get("trace", "")
        if "error" in case or not path.is_file():
            print(f"| {case['case']} | not recorded or not kept | | | | | | |")
            continue
        unprofiled = 1000.0 * case["planted_step_ms"] if given_unprofiled else None
        options = DiagnoseOptions(unprofiled_step_us=unprofiled)
        result = diagnose(path, options)
        cal = Context(load_trace(path), options).calibration
        top = result.findings[0] if result.findings else None
        measured = case["gain_pct"]
        rounds = ", ".join(f"{g:.1f}" for g in case.get("round_gain_pct", [])) or "one round"
        top_text = f"{top.category} {top.estimated_gain_pct:.1f}" if top else "-"
        plain = DiagnoseOptions(profiler_overhead_us=DEFAULT_OVERHEAD_US)
        default = _estimate(path, case["category"], plain)
        if case["category"] == "none":
            host = max((f.estimated_gain_pct for f in result.findings
                        if f.category in ("dataloader", "host_sync", "h2d_transfer")),
                       default=0.0)
            print(f"| {case['case']} | {measured:.1f} ({rounds}) | host-side max {host:.1f} | - "
                  f"| - | {top_text} | {cal.overhead_us:.2f} ({cal.source}) | - |")
            continue
        estimated = _estimate(path, case["category"], options)
        error = (estimated - measured) / measured
        name = Path(case["trace"]).name.split(".")[0]
        print(f"| {name} | {measured:.1f} ({rounds}) | {estimated:.1f} | "
              f"{100 * error:+.0f}% | {'yes' if abs(error) <= 0.3 else 'no'} | {top_text} | "
              f"{cal.overhead_us:.2f} ({cal.source}) | {default:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--public", type=Path, default=ROOT.parent / "shared" / "traces" / "public")
    args = parser.parse_args()
    public = sorted(args.public.glob("*/*.json.gz")) if args.public.is_dir() else []
    fidelity(public + sorted((ROOT / "tests" / "data" / "h200").glob("*.trace.json.gz")))
    for folder in [SUITE, *sorted((SUITE / "more_suites").glob("*")), SUITE / "item_sync_captured"]:
        recorded = json.loads((folder / "labels.json").read_text()).get("recorded", "")
        print(f"\n{folder.relative_to(ROOT)}: {recorded}\n")
        suite(folder)
    print(f"\n{(SUITE / 'item_sync_repeats').relative_to(ROOT)}, given the unprofiled step:\n")
    suite(SUITE / "item_sync_repeats", given_unprofiled=True)


if __name__ == "__main__":
    main()
