"""JSON documents of the views (``aiprof queue/ops/kernels/diff ... --json``)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from aiprof.analysis.critical_path import CriticalPath
from aiprof.analysis.critical_ranks import RanksCriticalPath
from aiprof.analysis.diff import PARTS, TraceDiff
from aiprof.analysis.diff_hta import HtaDiffRow
from aiprof.analysis.gpu_samples import SampleView
from aiprof.analysis.kernel_view import KernelView
from aiprof.analysis.memory_ops import MemoryView
from aiprof.analysis.ops import OpView
from aiprof.analysis.python_tree import CallTree
from aiprof.analysis.queue import QueueResult

QUEUE_SCHEMA = "aiprof.queue/1"
OPS_SCHEMA = "aiprof.ops/1"
KERNELS_SCHEMA = "aiprof.kernels/1"
DIFF_SCHEMA = "aiprof.diff/1"
CRITICAL_PATH_SCHEMA = "aiprof.critical_path/1"
MEMORY_SCHEMA = "aiprof.memory_ops/1"
PYTHON_SCHEMA = "aiprof.python/1"
SAMPLES_SCHEMA = "aiprof.gpu_samples/1"


def plain(obj: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """A dataclass's fields as a dict, arrays and nested dataclasses left to ``dumps``."""
    return {f.name: getattr(obj, f.name) for f in fields(obj) if f.name not in skip}


def queue_document(results: list[QueueResult], *, series: bool = False) -> dict[str, Any]:
    skip = () if series else ("ts_us", "length")
    return {
        "schema": QUEUE_SCHEMA,
        "ranks": [
            {
                "rank": r.rank,
                "path": r.path,
                "window_us": r.window_us,
                "streams": [plain(s, skip) for s in r.streams],
            }
            for r in results
        ],
    }


def ops_document(views: list[OpView]) -> dict[str, Any]:
    return {
        "schema": OPS_SCHEMA,
        "ranks": [
            {"rank": v.rank, "path": v.path, "by_shape": v.by_shape,
             "ops": [plain(r) for r in v.rows]}
            for v in views
        ],
    }


def kernels_document(views: list[KernelView]) -> dict[str, Any]:
    return {
        "schema": KERNELS_SCHEMA,
        "ranks": [
            {"rank": v.rank, "path": v.path, "kernel_us": v.kernel_us,
             "tensor_core_us": v.tensor_core_us, "math_us": v.math_us,
             "tensor_core_pct": v.tensor_core_pct,
             "tensor_core_pct_of_math": v.tensor_core_pct_of_math,
             "kernels": [plain(r) for r in v.rows]}
            for v in views
        ],
    }


def diff_document(diffs: list[TraceDiff]) -> dict[str, Any]:
    return {
        "schema": DIFF_SCHEMA,
        "pairs": [
            {
                "a": {"path": d.a_path, **plain(d.a)},
                "b": {"path": d.b_path, **plain(d.b)},
                "delta_us": {p: d.delta_us(p) for p in ("step_us", *PARTS)},
                "changes": [
                    {**plain(c), "delta_total_us": c.delta_total_us, "a_mean_us": c.a_mean_us,
                     "b_mean_us": c.b_mean_us}
                    for c in d.changes
                ],
            }
            for d in diffs
        ],
    }


def hta_diff_document(rows: list[list[HtaDiffRow]]) -> dict[str, Any]:
    return {"schema": DIFF_SCHEMA + "+hta", "pairs": [[plain(r) for r in p] for p in rows]}


def critical_path_document(paths: list[CriticalPath], *, edges: bool = False,
                           across: RanksCriticalPath | None = None) -> dict[str, Any]:
    """Each rank's path; with ``across``, the path across the ranks too (``across_ranks``)."""

    def one(cp: CriticalPath) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "rank": cp.rank, "window": cp.window, "start_us": cp.start_us, "end_us": cp.end_us,
            "length_us": cp.length_us, "by_bound_us": cp.by_bound_us,
            "by_bound_pct": {b: cp.pct(b) for b in cp.by_bound_us},
            "ops": [plain(o) for o in cp.ops],
        }
        if edges:
            doc["edges"] = {"type": cp.edge_type, "bound_by": cp.edge_bound,
                            "name": cp.edge_name, "start_us": cp.edge_start_us,
                            "end_us": cp.edge_end_us, "weight_us": cp.edge_weight_us}
        return doc

    doc: dict[str, Any] = {"schema": CRITICAL_PATH_SCHEMA, "ranks": [one(cp) for cp in paths]}
    if across is not None:
        doc["across_ranks"] = _across_document(across, edges)
    return doc


def _across_document(cp: RanksCriticalPath, edges: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "ranks": cp.ranks, "window": cp.window, "length_us": cp.length_us,
        "by_bound_us": cp.by_bound_us, "by_bound_pct": {b: cp.pct(b) for b in cp.by_bound_us},
        "by_rank_us": {str(r): v for r, v in cp.by_rank_us.items()},
        "num_collectives_joined": cp.num_joined, "num_collectives_unjoined": cp.num_unjoined,
        "last_by": cp.last_by,
        "stretches": [plain(s) for s in cp.stretches], "ops": [plain(o) for o in cp.ops],
    }
    if edges:
        doc["edges"] = {"rank": cp.edge_rank, "type": cp.edge_type, "bound_by": cp.edge_bound,
                        "name": cp.edge_name, "start_us": cp.edge_start_us,
                        "end_us": cp.edge_end_us, "weight_us": cp.edge_weight_us}
    return doc


def memory_document(views: list[MemoryView], *, curve: bool = False) -> dict[str, Any]:
    skip = () if curve else ("ts_us", "live_bytes")
    return {
        "schema": MEMORY_SCHEMA,
        "ranks": [{"rank": v.rank, "path": v.path, "devices": [plain(d, skip) for d in v.devices]}
                  for v in views],
    }


def python_document(trees: list[CallTree]) -> dict[str, Any]:
    return {
        "schema": PYTHON_SCHEMA,
        "ranks": [{"rank": t.rank, "path": t.path, "total_cpu_us": t.total_cpu_us,
                   "nodes": [plain(n) for n in t.nodes]} for t in trees],
    }


def samples_document(views: list[SampleView], *, curves: bool = False) -> dict[str, Any]:
    def device(d: Any) -> dict[str, Any]:
        doc = {"device": d.device, "num_samples": len(d.t_us),
               "steps": {"number": d.step_number, "num_samples": d.step_num_samples,
                         **d.step_means}}
        if curves:
            doc["curves"] = {"t_us": d.t_us, **d.curves}
        return doc

    return {"schema": SAMPLES_SCHEMA,
            "ranks": [{"rank": v.rank, "devices": [device(d) for d in v.devices]}
                      for v in views]}
