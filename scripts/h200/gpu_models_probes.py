"""Ground truth for aiprof's coalescing, bank-conflict and divergence models, from ncu.

Builds gpu_models_probes.cu (nvcc -arch=sm_90) and runs it under Nsight Compute
(--clock-control none) to record, per probe launch: global-load sectors and requests, shared-load
wavefronts and bank conflicts, instructions and thread-instructions. Output in $OUT/gpu_models/:
probes.csv (the launches in order) and ncu_probes.csv (ncu --csv --page details). Run from the
repo root:
    OUT=/tmp/out python3 scripts/h200/gpu_models_probes.py
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import gpu_models_common as common

METRICS = [
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "smsp__inst_executed.sum",
    "smsp__thread_inst_executed.sum",
    "smsp__thread_inst_executed_per_inst_executed.ratio",
    "smsp__sass_average_branch_targets_threads_uniform.pct",
    "launch__block_size",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "sm__maximum_warps_per_active_cycle_pct",
]


def ncu_probes(out: Path) -> str:
    binary = out / "build" / "probes"
    common.build("gpu_models_probes.cu", binary)
    log = out / "ncu_probes.csv"
    common.run([shutil.which("ncu") or "ncu", "--clock-control", "none", "--csv", "--page",
                "details", "--print-units", "base", "--log-file", str(log), "--metrics",
                ",".join(METRICS), str(binary), str(out / "probes.csv")], timeout=75)
    binary.unlink()
    lines = sum(1 for _ in log.open()) if log.exists() else 0
    return f"{lines} CSV lines in {log.name}"


if __name__ == "__main__":
    sys.exit(common.main(ncu_probes))
