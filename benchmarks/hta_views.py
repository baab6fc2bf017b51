"""HTA 0.5.0's numbers for the views aiprof checks itself against (not a test).

Run in a virtual environment holding ``HolisticTraceAnalysis==0.5.0``::

    python benchmarks/hta_views.py PUBLIC_TRACES_DIR tests/data/views/hta_0.5.0.json

It writes, per public trace folder, HTA's queue length summary (per rank and stream), on
``trace_diff`` HTA's ``TraceDiff.compare_traces`` (first iteration, all devices), and on
``critical_path`` HTA's critical path (its length, its edges by type and bound_by). The tests
read the JSON only; they never import HTA.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

QUEUE_FOLDERS = [
    "critical_path",
    "df_index_resolver",
    "nccl_parser_config",
    "negative_queue_length_values_check",
    "ns_resolution_trace",
    "trace_diff",
]


def queue_summary(folder: Path) -> list[dict[str, Any]]:
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_dir=str(folder))
    rows = []
    for rank in sorted(analysis.t.traces):
        table = analysis.get_queue_length_summary(ranks=[rank])
        if table is None:
            continue
        for (r, stream), values in table.iterrows():
            stats = {k[1]: float(v) for k, v in values.items()}
            rows.append({"file": Path(analysis.t.trace_files[r]).name, "rank": int(r),
                         "stream": int(stream), **stats})
    return rows


def trace_diff(control_dir: Path, test_dir: Path) -> list[dict[str, Any]]:
    from hta.trace_diff import LabeledTrace, TraceDiff

    control = LabeledTrace(label="control", trace_dir=str(control_dir))
    test = LabeledTrace(label="test", trace_dir=str(test_dir))
    table = TraceDiff.compare_traces(control, test)
    return [
        {
            "name": str(name),
            "control_counts": int(row["control_counts"]),
            "test_counts": int(row["test_counts"]),
            "control_total_duration": float(row["control_total_duration"]),
            "test_total_duration": float(row["test_total_duration"]),
        }
        for name, row in table.iterrows()
    ]


CRITICAL_PATHS = [
    # (file, annotation, instance): the windows HTA's own tests use on these files
    ("benchmark_result_2869224_1695835535_trace.json.gz",
     "[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    ("event_sync_trace.json.gz", "", 0),
]


def critical_path(folder: Path, annotation: str, instance: int) -> dict[str, Any]:
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_dir=str(folder))
    graph, ok = analysis.critical_path_analysis(rank=0, annotation=annotation,
                                                instance_id=instance)
    edges = graph.get_critical_path_breakdown()
    edges["bound_by"] = edges["bound_by"].fillna("")
    names = graph.trace_df.set_index("index")["s_name"] if "s_name" in graph.trace_df else None
    return {
        "ok": bool(ok),
        "annotation": annotation,
        "instance": instance,
        "length_us": float(edges["duration"].sum()),
        "num_edges": len(edges),
        "by_bound_us": _sums(edges, "bound_by"),
        "by_type_us": _sums(edges, "type"),
        "events": sorted(
            [str(names.loc[i]) if names is not None and i in names.index else "", float(d)]
            for i, d in zip(edges["event_idx"], edges["duration"], strict=True)
            if d > 0 and i == i
        ),
    }


def _sums(edges: Any, column: str) -> dict[str, float]:
    return {str(k): float(v) for k, v in edges.groupby(column).duration.sum().items()}


def main() -> int:
    warnings.simplefilter("ignore")
    public, out = Path(sys.argv[1]), Path(sys.argv[2])
    result: dict[str, Any] = {"hta_version": "0.5.0", "queue_length": {}}
    for name in QUEUE_FOLDERS:
        # one file per folder: HTA reads a folder as the ranks of one run
        rows = []
        for file in sorted((public / name).glob("*.json.gz")):
            rows += queue_summary(_alone(file))
        result["queue_length"][name] = rows
    runs = public / "trace_diff"
    control, test = _alone(runs / "control.json.gz"), _alone(runs / "test.json.gz")
    result["trace_diff"] = trace_diff(control, test)
    result["critical_path"] = {
        file: critical_path(_alone(public / "critical_path" / file), annotation, instance)
        for file, annotation, instance in CRITICAL_PATHS
    }
    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return 0


def _alone(file: Path) -> Path:
    """A temporary folder holding only ``file`` (as a link)."""
    import tempfile

    root = Path(tempfile.mkdtemp())
    (root / file.name).symlink_to(file.resolve())
    return root


if __name__ == "__main__":
    raise SystemExit(main())
