"""Speed of the views: load + summary (today's ``aiprof summary``) against load + the views.

Each measurement runs in its own process (imports outside the timed region), the two
interleaved, on the 8-rank set of ``benchmarks/ingest.py`` (8 copies of df_index_resolver
with the rank rewritten). The views are what ``aiprof queue``, ``ops``, ``ops --kernels``,
``ops --memory``, ``hotspots`` and ``critical-path`` compute, for every rank, and the critical
path across the ranks::

    python benchmarks/views_speed.py --repeat 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import DEFAULT_TRACE, make_rank_set  # noqa: E402

SUMMARY = """
traces = load_traces([target]); summary(traces)
"""
VIEWS = """
traces = load_traces([target])
for t in traces:
    queue_length(t); op_view(t); kernel_view(t); memory_by_op(t); python_call_tree(t)
    critical_path(t)
ranks_critical_path(list(traces))
"""
PRELUDE = """
import json, sys, time
from aiprof.record.targets import load_traces
from aiprof.analysis.summary import summary
from aiprof.analysis.queue import queue_length
from aiprof.analysis.ops import op_view
from aiprof.analysis.kernel_view import kernel_view
from aiprof.analysis.memory_ops import memory_by_op
from aiprof.analysis.python_tree import python_call_tree
from aiprof.analysis.critical_path import critical_path
from aiprof.analysis.critical_ranks import ranks_critical_path
target = sys.argv[1]
t0 = time.perf_counter()
{body}
print(json.dumps({{"seconds": time.perf_counter() - t0}}))
"""


def measure(body: str, target: Path) -> float:
    code = PRELUDE.format(body=body)
    done = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True,
                          text=True, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        target = make_rank_set(args.trace, 8, Path(tmp))
        times: dict[str, list[float]] = {"summary": [], "views": []}
        for _ in range(args.repeat):
            times["summary"].append(measure(SUMMARY, target))
            times["views"].append(measure(VIEWS, target))
    s, v = (statistics.median(times[k]) for k in ("summary", "views"))
    pairs = statistics.median(b / a for a, b in zip(times["summary"], times["views"], strict=True))
    print(f"load + summary: median {s:.3f} s  {[round(x, 3) for x in times['summary']]}")
    print(f"load + views:   median {v:.3f} s  {[round(x, 3) for x in times['views']]}")
    print(f"views / summary: {v / s:.2f} (medians), {pairs:.2f} (median of pairs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
