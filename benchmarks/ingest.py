"""Ingest benchmark: aiprof load + summary vs HTA load + temporal breakdown vs bare orjson and
a bare typed msgspec decode (the floor: ``process_measure.FLOOR_DECODER``).

Each measurement runs in its own Python process (imports excluded from the timed region);
the tools are interleaved (A B C A B C ...) and medians reported with ratios against aiprof
measured in the same run. Inputs: ../shared/traces/public/df_index_resolver (54 MB raw)
and a synthetic 8-rank set (8 copies with rank ids rewritten, about 430 MB raw).

    python benchmarks/ingest.py --hta-python /path/to/venv-with-hta/bin/python

HTA runs in its own environment (``pip install holistictraceanalysis``); without
``--hta-python`` only aiprof and orjson are measured.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from process_measure import (
    CHILD_PRELUDE,
    FLOOR_DECODER,
    cores,
    make_rank_set,
    measure,
    peak_tree_pss_mib,
)

REPO = Path(__file__).resolve().parents[1]
PUBLIC = REPO.parent / "shared" / "traces" / "public"
DEFAULT_TRACE = PUBLIC / "df_index_resolver" / "df_index_resolver.json.gz"

AIPROF = (
    CHILD_PRELUDE
    + """
from aiprof import load_traces, summary  # imports outside the timed region, as for HTA
target = sys.argv[1]
t0 = time.perf_counter()
traces = load_traces(target)
summaries = summary(traces)
assert summaries and summaries[0].num_steps > 0
report(t0)
"""
)

HTA = (
    CHILD_PRELUDE
    + """
import logging, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
target = sys.argv[1]
t0 = time.perf_counter()
analysis = TraceAnalysis(trace_dir=target)
breakdown = analysis.get_temporal_breakdown(visualize=False)
assert len(breakdown) > 0
report(t0)
"""
)

ORJSON = (
    CHILD_PRELUDE
    + """
import orjson
from pathlib import Path
from isal import igzip
target = Path(sys.argv[1])
files = sorted(p for p in target.iterdir() if p.name.endswith((".json", ".json.gz")))
t0 = time.perf_counter()
for path in files:
    data = path.read_bytes()
    if data[:2] == b"\\x1f\\x8b":
        data = igzip.decompress(data)
    document = orjson.loads(data)
    del document
report(t0)
"""
)


MSGSPEC = (
    CHILD_PRELUDE
    + FLOOR_DECODER
    + """
from pathlib import Path
from isal import igzip
target = Path(sys.argv[1])
files = sorted(p for p in target.iterdir() if p.name.endswith((".json", ".json.gz")))
t0 = time.perf_counter()
for path in files:
    data = path.read_bytes()
    if data[:2] == b"\\x1f\\x8b":
        data = igzip.decompress(data)
    document = decoder.decode(data)
    del document
report(t0)
"""
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--hta-python", help="python executable of an environment with HTA")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=8)
    args = parser.parse_args()

    tools = {"aiprof": (sys.executable, AIPROF), "orjson": (sys.executable, ORJSON),
             "msgspec": (sys.executable, MSGSPEC)}
    if args.hta_python:
        tools["hta"] = (args.hta_python, HTA)
    with tempfile.TemporaryDirectory(prefix="aiprof-ingest-") as tmp:
        single = Path(tmp) / "single"
        single.mkdir()
        (single / args.trace.name).symlink_to(args.trace.resolve())
        multi = Path(tmp) / "ranks"
        multi.mkdir()
        make_rank_set(args.trace, args.ranks, multi)
        raw_mib = sum(p.stat().st_size for p in multi.iterdir()) / 2**20
        print(
            f"machine: {platform.machine()}, {platform.python_implementation()} "
            f"{platform.python_version()}, {cores()} cores; date {time.strftime('%Y-%m-%d')}"
        )
        print(f"single: {args.trace.name}; {args.ranks}-rank set: {raw_mib:.0f} MiB raw JSON")
        for label, target in (("1 rank", single), (f"{args.ranks} ranks", multi)):
            results: dict[str, list[dict[str, float]]] = {name: [] for name in tools}
            for _ in range(args.repeat):
                for name, (python, code) in tools.items():
                    results[name].append(measure(python, code, target))
            _print_table(label, results)
            memory = {
                name: peak_tree_pss_mib(python, code, target)
                for name, (python, code) in tools.items()
            }
            print(
                "peak PSS of all the run's processes (one extra run each, sampled every 5 ms): "
                + ", ".join(f"{name} {mib:.0f} MiB" for name, mib in memory.items())
                + "; aiprof / "
                + ", ".join(
                    f"{name} {memory['aiprof'] / mib:.2f}"
                    for name, mib in memory.items()
                    if name != "aiprof"
                )
            )
    return 0


def _print_table(label: str, results: dict[str, list[dict[str, float]]]) -> None:
    """Medians, and each tool's time over aiprof's pair by pair (run i against run i): the
    machine's speed drifts between runs, and a pair shares one moment of it."""
    ours = [r["seconds"] for r in results["aiprof"]]
    base = statistics.median(ours)
    base_rss = max(r["rss_mib"] for r in results["aiprof"])
    print(f"\n{label}: median of {len(ours)} interleaved runs, each in its own process")
    print(
        f"{'tool':<8} {'median s':>9} {'min s':>8} {'max s':>8} {'x aiprof':>9} "
        f"{'pairs x':>8} {'pairs min-max':>14} {'peak RSS MiB':>13} {'children MiB':>13}"
    )
    for name, runs in results.items():
        seconds = [r["seconds"] for r in runs]
        pairs = [theirs / mine for theirs, mine in zip(seconds, ours, strict=True)]
        rss = max(r["rss_mib"] for r in runs)
        kids = max(r["child_rss_mib"] for r in runs)
        spread = f"{min(pairs):.1f}-{max(pairs):.1f}"
        print(
            f"{name:<8} {statistics.median(seconds):>9.3f} {min(seconds):>8.3f} "
            f"{max(seconds):>8.3f} {statistics.median(seconds) / base:>9.2f} "
            f"{statistics.median(pairs):>8.2f} {spread:>14} {rss:>13.0f} {kids:>13.0f}"
        )
    print(f"(aiprof peak RSS {base_rss:.0f} MiB)")


if __name__ == "__main__":
    sys.exit(main())
