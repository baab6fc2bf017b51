"""Summarize the run records under a directory (stdlib only): kernels, samples, GPU specs.

    python3 scripts/h200/capture_summary.py $OUT/capture     # writes summary.json there
"""

import csv
import gzip
import json
import sys
from pathlib import Path


def summarize(record: Path) -> dict:
    meta = json.loads((record / "meta.json").read_text())
    result = {"record": str(record), "ended": meta.get("ended"), "exit_code": meta.get("exit_code"),
              "gpus": [g.get("name") for g in meta.get("gpus", [])], "notes": meta.get("notes")}
    for trace_path in sorted(record.glob("rank*.trace.json.gz")):
        with gzip.open(trace_path, "rt") as handle:
            events = json.load(handle).get("traceEvents", [])
        result[trace_path.name] = {
            "bytes": trace_path.stat().st_size,
            "kernels": sum(1 for e in events if e.get("cat") == "kernel"),
            "steps": sum(1 for e in events if str(e.get("name", "")).startswith("ProfilerStep#")),
        }
    samples = record / "gpu_samples.csv"
    if samples.is_file():
        with samples.open() as handle:
            rows = list(csv.DictReader(handle))
        util = [float(r["gpu_util_pct"]) for r in rows if r["gpu_util_pct"]]
        result["samples"] = {"rows": len(rows), "max_gpu_util_pct": max(util, default=None),
                             "nonzero_util_rows": sum(1 for u in util if u > 0)}
    return result


def main() -> int:
    root = Path(sys.argv[1])
    records = sorted(p.parent for p in root.glob("*/*/meta.json") if not p.parent.is_symlink())
    summary = []
    for record in records:
        try:
            summary.append(summarize(record))
        except Exception as error:  # report, never crash the batch
            summary.append({"record": str(record), "error": repr(error)})
    (root / "summary.json").write_text(json.dumps(summary, indent=2))
    for item in summary:
        print("capture:", json.dumps(item)[:400])
    if not records:
        print(f"capture: no run records under {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
