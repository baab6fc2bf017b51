"""Per-kernel summary of Nsight Compute measurements, with aiprof's model beside them.

Thresholds of the bottleneck label and the divergence/conflict warnings are Nsight Compute 2025.3
rule thresholds (../shared/reference/gpu-models.md §8).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiprof.errors import AiprofError
from aiprof.gpu import ncu_metrics as m
from aiprof.gpu.ncu_csv import NcuLaunch
from aiprof.gpu.occupancy import occupancy

_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
          "second": 1e6, "s": 1e6}
_LIMIT_NAMES = {"launch__occupancy_limit_warps": "warps",
                "launch__occupancy_limit_registers": "registers",
                "launch__occupancy_limit_shared_mem": "shared_memory",
                "launch__occupancy_limit_blocks": "blocks"}


@dataclass(frozen=True, kw_only=True)
class Stall:
    """One of a kernel's top stall reasons."""

    reason: str
    """ncu stall key."""
    cycles_per_issue: float
    """Warp-cycles stalled for this reason per issued instruction."""
    meaning: str
    """Plain words."""
    fix: str
    """What usually helps."""


@dataclass(frozen=True, kw_only=True)
class KernelCounters:
    """Measured counters of one launch and the model's prediction."""

    launch_id: int
    """ncu launch ID."""
    kernel_name: str
    """Kernel name as ncu printed it."""
    duration_us: float | None
    """``gpu__time_duration.sum`` in microseconds."""
    sm_throughput_pct: float | None
    """``sm__throughput`` as % of peak (SpeedOfLight "Compute")."""
    mem_throughput_pct: float | None
    """``gpu__compute_memory_throughput`` as % of peak (SpeedOfLight "Memory")."""
    bottleneck: str
    """Nsight Compute's SpeedOfLight verdict (§8)."""
    achieved_occupancy_pct: float | None
    """``sm__warps_active.avg.pct_of_peak_sustained_active``."""
    theoretical_occupancy_pct: float | None
    """Measured by ncu (``sm__maximum_warps_per_active_cycle_pct``)."""
    limiter: str | None
    """Smallest of ncu's ``launch__occupancy_limit_*``."""
    model_occupancy_pct: float | None
    """aiprof's theoretical occupancy from the launch arguments (None where it cannot apply)."""
    model_limiter: str | None
    """aiprof's limiter for the same launch."""
    sectors_per_request: float | None
    """Global-load sectors per request (``gld_transactions_per_request``)."""
    gld_efficiency_pct: float | None
    """Useful bytes per fetched sector, % (``gld_efficiency``)."""
    bank_conflicts: float | None
    """Shared-memory bank conflicts, loads + stores."""
    shared_wavefronts: float | None
    """Shared-memory wavefronts, loads + stores."""
    threads_per_instruction: float | None
    """Average active threads per warp instruction, 0 to 32."""
    top_stalls: tuple[Stall, ...]
    """Largest stall reasons (cycles per issued instruction), largest first."""


def _sum(launch: NcuLaunch, names: tuple[str, ...]) -> float | None:
    values = [launch.number(n) for n in names]
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _duration_us(launch: NcuLaunch) -> float | None:
    value = launch.number(m.DURATION)
    unit = launch.units.get(m.DURATION, "nsecond").strip().lower()
    return None if value is None else value * _TO_US.get(unit, 1e-3)


def _bottleneck(sm: float | None, mem: float | None, waves: float | None) -> str:
    if sm is None or mem is None:
        return "unknown"
    if sm >= 80 or mem >= 80:
        return "high throughput"
    if sm < 60 and mem < 60:
        return "small grid" if waves is not None and waves < 1 else "latency bound"
    if abs(sm - mem) >= 10:
        return "compute bound" if sm > mem else "memory bound"
    return "balanced"


def _limiter(launch: NcuLaunch) -> str | None:
    limits = {name: launch.number(k) for k, name in _LIMIT_NAMES.items()}
    present = {k: v for k, v in limits.items() if v is not None}
    return min(present, key=lambda k: present[k]) if present else None


def _model(launch: NcuLaunch) -> tuple[float | None, str | None]:
    block = launch.number("launch__block_size")
    regs = launch.number("launch__registers_per_thread")
    static = launch.number("launch__shared_mem_per_block_static") or 0.0
    dynamic = launch.number("launch__shared_mem_per_block_dynamic") or 0.0
    if block is None or regs is None or not launch.cc:
        return None, None
    try:
        result = occupancy(f"sm_{launch.cc.replace('.', '')}", int(block), int(regs),
                           int(static + dynamic))
    except AiprofError:
        return None, None
    return 100.0 * result.occupancy, result.limiter


def _stalls(launch: NcuLaunch, top: int) -> tuple[Stall, ...]:
    found = [(launch.number(m.stall_metric(s.key)), s) for s in m.STALLS
             if s.key not in ("selected", "not_selected")]
    ranked = sorted(((v, s) for v, s in found if v), key=lambda p: -p[0])[:top]
    no_conflicts = _sum(launch, m.BANK_CONFLICTS) == 0
    return tuple(Stall(reason=s.key, cycles_per_issue=v, meaning=s.meaning,
                       fix=s.fix_without_conflicts if no_conflicts and s.fix_without_conflicts
                       else s.fix)
                 for v, s in ranked)


def summarize(launch: NcuLaunch, *, top_stalls: int = 3) -> KernelCounters:
    """Counters and model prediction for one launch."""
    sm = launch.number(m.SM_THROUGHPUT)
    mem = launch.number(m.MEM_THROUGHPUT)
    model_pct, model_limiter = _model(launch)
    return KernelCounters(
        launch_id=launch.launch_id, kernel_name=launch.kernel_name,
        duration_us=_duration_us(launch), sm_throughput_pct=sm, mem_throughput_pct=mem,
        bottleneck=_bottleneck(sm, mem, launch.number("launch__waves_per_multiprocessor")),
        achieved_occupancy_pct=launch.number(m.ACHIEVED_OCC),
        theoretical_occupancy_pct=launch.number(m.THEORETICAL_OCC), limiter=_limiter(launch),
        model_occupancy_pct=model_pct, model_limiter=model_limiter,
        sectors_per_request=launch.number(m.SECTORS_PER_REQ),
        gld_efficiency_pct=launch.number(m.GLD_EFFICIENCY),
        bank_conflicts=_sum(launch, m.BANK_CONFLICTS),
        shared_wavefronts=_sum(launch, m.SHARED_WAVEFRONTS),
        threads_per_instruction=launch.number(m.THREADS_PER_INST),
        top_stalls=_stalls(launch, top_stalls),
    )
