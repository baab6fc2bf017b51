"""Does the profiler's warm-up change the .item() case's recorded steps? (diagnose suite)

    OUT=/some/dir python3 scripts/h200/item_sync_warmup.py

Records the suite's item_sync_per_layer planted step under torch.profiler with the suite's
schedule (wait 1, warmup 1, active 3) and with a longer warm-up (wait 1, warmup 10, active 3),
twice each, alternating; times the planted and fixed steps without the profiler (CUDA events,
median of 8 after 3 warm-up) before each recording. Writes $OUT/item_warmup/*.trace.json.gz
and $OUT/item_warmup/runs.json. Needs only torch.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, schedule

sys.path.insert(0, str(Path(__file__).parent))
import diagnose_suite as suite  # noqa: E402


def record(step, path: Path, warmup: int) -> None:
    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, record_shapes=True,
                                schedule=schedule(wait=1, warmup=warmup, active=3)) as prof:
        for _ in range(1 + warmup + 3):
            step()
            prof.step()
    torch.cuda.synchronize()
    raw = path.with_suffix("")
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()


def main() -> None:
    out = Path(os.environ.get("OUT", "out")) / "item_warmup"
    out.mkdir(parents=True, exist_ok=True)
    planted, fixed, _, _ = suite.case_item_sync()
    runs = []
    for rep in range(2):
        for warmup in (1, 10):
            planted_ms = suite.timed(planted)
            fixed_ms = suite.timed(fixed)
            name = f"warmup{warmup}_rep{rep}.trace.json.gz"
            record(planted, out / name, warmup)
            runs.append({"trace": name, "warmup": warmup, "planted_step_ms": planted_ms,
                         "fixed_step_ms": fixed_ms,
                         "gain_pct": 100.0 * (1.0 - fixed_ms / planted_ms)})
            print(json.dumps(runs[-1]))
    (out / "runs.json").write_text(json.dumps({"device": torch.cuda.get_device_name(),
                                               "torch": torch.__version__, "runs": runs},
                                              indent=1))


if __name__ == "__main__":
    main()
