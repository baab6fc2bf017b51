"""NCCL comm bench on 2 GPUs: 8 B .. 1 GiB for all-reduce, all-gather, reduce-scatter, broadcast.

Run from the repo root on a 2-GPU machine (about 30-60 s):
    OUT=/tmp/out PYTHONPATH=src torchrun --nproc_per_node 2 scripts/h200/distributed_comm_bench.py
Writes $OUT/distributed/comm_bench.json (schema aiprof.comm_bench/1: per-size time, algbw, busbw
like nccl-tests, and α/β fits from 1 MiB up). Commit it as tests/data/distributed/comm_bench.json.
NVLS (NVLink SHARP) is kept off (NCCL_NVLS_ENABLE=0) as the lab's machines require.
Needs only torch and numpy (not msgspec or rich).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")


def main() -> int:
    rank = int(os.environ.get("RANK", "0"))
    out = Path(os.environ.get("OUT", "out")) / "distributed"
    max_bytes = int(os.environ.get("DISTRIBUTED_BENCH_MAX_BYTES", str(1 << 30)))
    try:
        from aiprof.measure.distributed.bench import BenchOptions, bench_torchrun

        start = time.perf_counter()
        result = bench_torchrun(BenchOptions(min_bytes=8, max_bytes=max_bytes))
        if rank == 0:
            out.mkdir(parents=True, exist_ok=True)
            data = dataclasses.asdict(result)
            data["nccl_nvls_enable"] = os.environ.get("NCCL_NVLS_ENABLE")
            data["wall_s"] = time.perf_counter() - start
            (out / "comm_bench.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
            _summary(result)
    except Exception:  # report and let the rest of the batch run
        print(
            f"distributed_comm_bench (rank {rank}) failed:\n{traceback.format_exc()}",
            file=sys.stderr,
        )
    return 0


def _summary(result) -> None:  # type: ignore[no-untyped-def]
    print(
        f"comm bench: {result.backend} on {result.device}, {result.num_ranks} ranks, "
        f"{len(result.points)} points"
    )
    for p in result.points:
        if p.num_bytes in (8, 1 << 20, 1 << 30) or p.num_bytes == max(
            q.num_bytes for q in result.points
        ):
            print(
                f"  {p.collective:14s} {p.num_bytes:>11d} B  {p.time_us:10.1f} us  "
                f"busbw {p.busbw_gbps:8.2f} GB/s"
            )
    for f in result.fits:
        print(
            f"  fit {f.collective:14s} alpha {f.alpha_us:7.2f} us  "
            f"bw {f.bandwidth_gbps:8.2f} GB/s  "
            f"max err {f.max_rel_error_pct:5.1f}%"
        )
    for note in result.notes:
        print(f"  note: {note}")


if __name__ == "__main__":
    sys.exit(main())
