"""Compare aiprof's models with the ground truth recorded on a GPU by scripts/h200/gpu_models_*.

Each ``check_*`` returns the list of disagreements (empty = 100% agreement) and the number of
records compared; tests assert on both.
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

from aiprof.gpu.banks import bank_conflicts, strided_shared
from aiprof.gpu.coalescing import WARP_SIZE, coalescing, strided
from aiprof.gpu.divergence import even_odd
from aiprof.gpu.ncu_csv import NcuLaunch, parse_ncu_csv
from aiprof.gpu.occupancy import occupancy
from aiprof.gpu.tiles import tile_column_access
from aiprof.hardware import ArchLimits, spec_from_device_properties

SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
GLD_PCT = "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct"
WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
LDS = "smsp__sass_inst_executed_op_shared_ld.sum"
INST = "smsp__inst_executed.sum"
THREAD_INST = "smsp__thread_inst_executed.sum"


def _read_csv(path: Path) -> list[dict[str, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as handle:  # type: ignore[operator]
        return list(csv.DictReader(handle))


def device_arch(folder: Path) -> ArchLimits:
    """SM limits built from the recorded cudaDeviceProp (device values override the table)."""
    props = {r["key"]: r["value"] for r in _read_csv(folder / "device_props.csv")}
    spec = spec_from_device_properties({
        "name": props["name"], "computeMajor": props["major"], "computeMinor": props["minor"],
        "numSms": props["multiProcessorCount"], "warpSize": props["warpSize"],
        **{k: props[k] for k in ("maxThreadsPerBlock", "regsPerBlock", "regsPerMultiprocessor",
                                 "sharedMemPerBlock", "sharedMemPerMultiprocessor",
                                 "sharedMemPerBlockOptin")},
        "maxThreadsPerMultiprocessor": props["maxThreadsPerMultiProcessor"],
    })
    assert spec.arch is not None
    return spec.arch


def check_occupancy(folder: Path) -> tuple[list[str], int]:
    """Model vs cudaOccupancyMaxActiveBlocksPerMultiprocessor for every recorded configuration."""
    arch = device_arch(folder)
    attrs = {r["kernel"]: r for r in _read_csv(folder / "kernel_attrs.csv")}
    name = "occupancy_api.csv.gz" if (folder / "occupancy_api.csv.gz").exists() else \
        "occupancy_api.csv"
    bad, rows = [], _read_csv(folder / name)
    for r in rows:
        a = attrs[r["kernel"]]
        smem = int(a["static_smem_bytes"]) + int(r["dynamic_smem_bytes"])
        model = occupancy(arch, int(r["block_size"]), int(a["num_regs"]), smem,
                          carveout=int(r["carveout"])).active_blocks_per_sm
        expected = 0 if int(r["err"]) != 0 else int(r["blocks_per_sm"])
        if model != expected:
            bad.append(f"{r}: model {model}")
    return bad, len(rows)


def _launches(folder: Path) -> list[tuple[dict[str, str], NcuLaunch]]:
    probes = _read_csv(folder / "probes.csv")
    launches = parse_ncu_csv((folder / "ncu_probes.csv").read_text(errors="replace"))
    assert len(probes) == len(launches), "one ncu launch per probe"
    return list(zip(probes, launches, strict=True))


def _num(launch: NcuLaunch, metric: str) -> float:
    value = launch.number(metric)
    assert value is not None, f"{metric} missing for launch {launch.launch_id}"
    return value


def _global(p: dict[str, str], launch: NcuLaunch) -> list[str]:
    eb, stride, offset = int(p["elem_bytes"]), int(p["stride"]), int(p["offset"])
    if int(p["pairs"]):
        model = coalescing([(t // 2) * eb for t in range(WARP_SIZE)], eb)
    else:
        model = strided(stride, eb, offset)
    sectors = _num(launch, SECTORS) / _num(launch, REQUESTS)
    pct = _num(launch, GLD_PCT)
    if sectors != model.sectors_per_request or abs(pct - 100 * model.efficiency) > 0.01:
        return [f"global {p}: ncu {sectors} sectors/req {pct}%, model "
                f"{model.sectors_per_request} {100 * model.efficiency}%"]
    return []


def _shared(p: dict[str, str], launch: NcuLaunch) -> list[str]:
    requests = _num(launch, LDS)
    if p["kind"] == "transpose":
        reads = [bank_conflicts(tile_column_access(32, 32, int(p["pad"]), 4, c), 4)
                 for c in range(32)]
        wavefronts, conflicts = (sum(r.wavefronts for r in reads),
                                 sum(r.conflicts for r in reads))
    else:
        model = strided_shared(int(p["stride"]), int(p["elem_bytes"]))
        wavefronts, conflicts = model.wavefronts * requests, model.conflicts * requests
    got = (_num(launch, WAVEFRONTS), _num(launch, CONFLICTS))
    if got != (wavefronts, conflicts):
        return [f"{p['kind']} {p}: ncu wavefronts/conflicts {got}, model "
                f"{(wavefronts, conflicts)}"]
    return []


def _divergence(pairs: list[tuple[dict[str, str], NcuLaunch]]) -> list[str]:
    runs = {(int(p["mode"]), int(p["iters"])): launch for p, launch in pairs
            if p["kind"] == "diverge"}
    bad = []
    uniform = runs[(1, 100)]
    if _num(uniform, THREAD_INST) != 32 * _num(uniform, INST):
        bad.append(f"uniform branch: {_num(uniform, THREAD_INST) / _num(uniform, INST)} thr/inst")
    base, loop = runs[(0, 0)], runs[(0, 100)]
    extra = _num(loop, INST) - _num(base, INST)  # instructions the 100 iterations added
    model = even_odd(extra / 2, extra / 2)  # each path's instructions run with 16 lanes
    predicted = _num(base, THREAD_INST) + model.avg_active_threads_per_instruction * extra
    if predicted != _num(loop, THREAD_INST):
        bad.append(f"even/odd: ncu {_num(loop, THREAD_INST)} thread-inst, model {predicted}")
    return bad


def _theoretical(arch: ArchLimits, p: dict[str, str], launch: NcuLaunch) -> list[str]:
    smem = (launch.number("launch__shared_mem_per_block_static") or 0) + \
        (launch.number("launch__shared_mem_per_block_dynamic") or 0)
    model = occupancy(arch, int(_num(launch, "launch__block_size")),
                      int(_num(launch, "launch__registers_per_thread")), int(smem))
    measured = _num(launch, "sm__maximum_warps_per_active_cycle_pct")
    if abs(measured - 100 * model.occupancy) > 0.01:
        return [f"theoretical occupancy {p}: ncu {measured}%, model {100 * model.occupancy}%"]
    return []


def check_probes(folder: Path, arch: ArchLimits) -> tuple[list[str], int]:
    """Model vs ncu for every global, shared, transpose and divergence probe."""
    pairs = _launches(folder)
    bad: list[str] = []
    for p, launch in pairs:
        bad += _theoretical(arch, p, launch)
        if p["kind"] == "global":
            bad += _global(p, launch)
        elif p["kind"] in ("shared", "transpose"):
            bad += _shared(p, launch)
    bad += _divergence(pairs)
    return bad, len(pairs)
