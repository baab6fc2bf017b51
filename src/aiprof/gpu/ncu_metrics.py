"""Nsight Compute metric names: what ``aiprof kernels`` collects, nvprof names, stall reasons.

Sources: ../shared/reference/gpu-models.md §5 (stall reasons and their metrics), §7.1-7.2
(the "Metrics Mapping Table from CUPTI to PerfWorks" of the Nsight Compute CLI guide 2024.1,
"Nvprof Transition Guide"), §1.8 (occupancy metrics).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiprof.errors import InputError

DURATION = "gpu__time_duration.sum"
SM_THROUGHPUT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM_THROUGHPUT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
ACHIEVED_OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCC = "sm__maximum_warps_per_active_cycle_pct"
SECTORS_PER_REQ = "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"
GLD_EFFICIENCY = "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct"
BANK_CONFLICTS = ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                  "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum")
SHARED_WAVEFRONTS = ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                     "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum")
THREADS_PER_INST = "smsp__thread_inst_executed_per_inst_executed.ratio"
LAUNCH = ("launch__block_size", "launch__grid_size", "launch__registers_per_thread",
          "launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic",
          "launch__shared_mem_config_size", "launch__waves_per_multiprocessor",
          "launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem",
          "launch__occupancy_limit_warps", "launch__occupancy_limit_blocks")


@dataclass(frozen=True)
class StallReason:
    """One warp stall reason with plain words and the usual fix."""

    key: str
    """Counter suffix X of ``smsp__average_warps_issue_stalled_X_per_issue_active.ratio``."""
    meaning: str
    """What the warp waits for."""
    fix: str
    """What usually helps."""
    fix_without_conflicts: str = ""
    """The fix when the kernel measured no shared-memory bank conflicts (else ``fix``)."""


STALLS = (
    StallReason("long_scoreboard", "waiting for global/local memory (L1TEX) results",
                "coalesce accesses, reuse data via shared memory, raise occupancy to hide latency"),
    StallReason("barrier", "waiting at __syncthreads for sibling warps",
                "balance work between warps; use smaller blocks or fewer barriers"),
    StallReason("membar", "waiting on a memory fence", "drop unneeded fences or use weaker scopes"),
    StallReason("short_scoreboard", "waiting for shared memory or special-math results",
                "remove shared-memory bank conflicts; use fewer MUFU operations",
                "fewer shared-memory loads or MUFU (special-math) operations per result "
                "(no bank conflicts were measured)"),
    StallReason("wait", "fixed-latency dependency between instructions",
                "more independent instructions per thread (ILP) or more warps"),
    StallReason("math_pipe_throttle", "the math pipe is busy",
                "compute-bound: use tensor cores or lower precision"),
    StallReason("mio_throttle", "shared-memory/special-math queue full",
                "fewer shared-memory instructions: wider (vector) accesses, fewer conflicts",
                "fewer shared-memory instructions: wider (vector) accesses (no bank conflicts "
                "were measured)"),
    StallReason("lg_throttle", "local/global memory queue full",
                "fewer, wider memory instructions (vectorize); avoid register spills to local"),
    StallReason("tex_throttle", "texture queue full", "fewer texture/surface fetches"),
    StallReason("not_selected", "eligible but another warp issued", "none needed: enough warps"),
    StallReason("selected", "issued an instruction", "not a stall"),
    StallReason("no_instruction", "instruction not fetched (I-cache miss)",
                "smaller kernels: less unrolling, fewer template variants"),
    StallReason("branch_resolving", "waiting for a branch target", "fewer divergent branches"),
    StallReason("dispatch_stall", "held by the dispatcher", "rare; check for pipe contention"),
    StallReason("drain", "waiting for memory writes at exit", "fewer stores at the end"),
    StallReason("imc_miss", "immediate constant cache miss",
                "uniform constant accesses across the warp"),
    StallReason("sleeping", "threads yielded or sleeping", "avoid spin-waits"),
    StallReason("misc", "miscellaneous", "none specific"),
    StallReason("gmma", "waiting on warpgroup MMA (wgmma)", "normal in Hopper GEMMs"),
)


def stall_metric(key: str) -> str:
    """ncu metric for stall reason ``key``: cycles stalled per issued instruction."""
    return f"smsp__average_warps_issue_stalled_{key}_per_issue_active.ratio"


def default_metrics() -> tuple[str, ...]:
    """Every metric ``aiprof kernels --ncu`` requests."""
    return (DURATION, SM_THROUGHPUT, MEM_THROUGHPUT, ACHIEVED_OCC, THEORETICAL_OCC,
            SECTORS_PER_REQ, GLD_EFFICIENCY, *BANK_CONFLICTS, *SHARED_WAVEFRONTS,
            THREADS_PER_INST, *LAUNCH, *(stall_metric(s.key) for s in STALLS))


@dataclass(frozen=True)
class NvprofMetric:
    """How one nvprof metric maps to Nsight Compute."""

    nvprof: str
    """nvprof / textbook name."""
    ncu: tuple[str, ...]
    """ncu metrics to collect (empty: none exists)."""
    combine: str
    """``same`` (one metric), ``sum`` (add them), ``ratio32`` (0-32 ratio; x 100/32 for %)."""
    note: str = ""
    """Caveat (units, nearest equivalent)."""


def _stalls(*keys: str) -> tuple[str, ...]:
    return tuple(f"smsp__warp_issue_stalled_{k}_per_warp_active.pct" for k in keys)


NVPROF = {m.nvprof: m for m in (
    NvprofMetric("sm_efficiency", ("smsp__cycles_active.avg.pct_of_peak_sustained_elapsed",),
                 "same"),
    NvprofMetric("achieved_occupancy", (ACHIEVED_OCC,), "same", "percent, not a 0-1 fraction"),
    NvprofMetric("eligible_warps_per_cycle", ("smsp__warps_eligible.sum.per_cycle_active",),
                 "same"),
    NvprofMetric("gld_efficiency", (GLD_EFFICIENCY,), "same"),
    NvprofMetric("gst_efficiency",
                 ("smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct",), "same"),
    NvprofMetric("gld_transactions_per_request", (SECTORS_PER_REQ,), "same",
                 "sectors: ideal is 4/8/16 for 32/64/128-bit loads, not 1"),
    NvprofMetric("gst_transactions_per_request",
                 ("l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio",),
                 "same"),
    NvprofMetric("warp_execution_efficiency", (THREADS_PER_INST,), "ratio32",
                 "ncu reports a 0-32 thread ratio; shown here converted to %"),
    NvprofMetric("branch_efficiency", ("smsp__sass_average_branch_targets_threads_uniform.pct",),
                 "same", "does not measure divergence (see aiprof divergence)"),
    NvprofMetric("shared_load_transactions", (SHARED_WAVEFRONTS[0],), "same", "wavefronts"),
    NvprofMetric("shared_store_transactions", (SHARED_WAVEFRONTS[1],), "same", "wavefronts"),
    NvprofMetric("shared_efficiency",
                 ("smsp__sass_average_data_bytes_per_wavefront_mem_shared.pct",), "same"),
    NvprofMetric("dram_read_throughput", ("dram__bytes_read.sum.per_second",), "same"),
    NvprofMetric("dram_write_throughput", ("dram__bytes_write.sum.per_second",), "same"),
    NvprofMetric("dram_utilization", ("dram__throughput.avg.pct_of_peak_sustained_elapsed",),
                 "same"),
    NvprofMetric("l2_read_throughput", ("lts__t_sectors_op_read.sum.per_second",
                                        "lts__t_sectors_op_atom.sum.per_second",
                                        "lts__t_sectors_op_red.sum.per_second"), "sum",
                 "sectors/s: multiply by 32 for bytes/s"),
    NvprofMetric("shared_load_throughput",
                 ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum.per_second",), "same",
                 "wavefronts/s, not bytes/s"),
    NvprofMetric("l2_cache_hit_rate", ("lts__t_sector_hit_rate.pct",), "same",
                 "nearest equivalent (nvprof l2_tex_hit_rate)"),
    NvprofMetric("texture_cache_hit_rate", ("l1tex__t_sector_hit_rate.pct",), "same",
                 "L1TEX is unified on sm_70+"),
    NvprofMetric("l1_cache_global_hit_rate",
                 ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum",
                  "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"), "hit_ratio",
                 "Kepler/Maxwell name; loads-only nearest equivalent"),
    NvprofMetric("ipc", ("sm__inst_executed.avg.per_cycle_active",), "same",
                 "per SM (nvprof's meaning)"),
    NvprofMetric("inst_replay_overhead", (), "none", "replays are not exposed on sm_70+"),
    NvprofMetric("stall_memory_dependency", _stalls("long_scoreboard"), "same"),
    NvprofMetric("stall_inst_fetch", _stalls("no_instruction"), "same"),
    NvprofMetric("stall_exec_dependency", _stalls("short_scoreboard", "wait"), "sum"),
    NvprofMetric("stall_sync", _stalls("barrier", "membar"), "sum"),
    NvprofMetric("stall_memory_throttle", _stalls("drain", "lg_throttle"), "sum"),
    NvprofMetric("stall_pipe_busy", _stalls("math_pipe_throttle", "mio_throttle"), "sum"),
    NvprofMetric("stall_other", _stalls("dispatch_stall", "misc"), "sum"),
    NvprofMetric("stall_constant_memory_dependency", _stalls("imc_miss"), "same"),
    NvprofMetric("stall_not_selected", _stalls("not_selected"), "same"),
)}
"""nvprof names the chapter uses, mapped to Nsight Compute."""


def translate(names: list[str]) -> list[NvprofMetric]:
    """The mapping of each nvprof name; ``InputError`` for a name nvprof never had here."""
    unknown = [n for n in names if n not in NVPROF]
    if unknown:
        raise InputError(f"unknown nvprof metric(s) {', '.join(unknown)}: known are "
                         f"{', '.join(sorted(NVPROF))}")
    return [NVPROF[n] for n in names]
