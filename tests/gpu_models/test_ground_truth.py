"""100% agreement with the ground truth recorded on a GPU (tests/data/gpu_models/).

The recorded files come from scripts/h200/gpu_models_occupancy.py and gpu_models_probes.py; the
tests skip when they are absent. The checker itself is exercised on tiny hand-made samples
(written below by hand in the recorded formats, values taken from the measured tables of
../shared/reference/gpu-models.md) so that parsing and matching are tested without a GPU, and on
a deliberately wrong sample to show it can fail.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from .ground_truth import check_occupancy, check_probes, device_arch

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu_models"

DEVICE = """key,value
name,NVIDIA H200
major,9
minor,0
multiProcessorCount,132
maxThreadsPerBlock,1024
maxThreadsPerMultiProcessor,2048
maxBlocksPerMultiProcessor,32
regsPerBlock,65536
regsPerMultiprocessor,65536
warpSize,32
sharedMemPerBlock,49152
sharedMemPerMultiprocessor,233472
sharedMemPerBlockOptin,232448
reservedSharedMemPerBlock,1024
l2CacheSize,62914560
"""
ATTRS = """kernel,num_regs,static_smem_bytes,max_threads_per_block,max_dynamic_smem_bytes
r16_s0,16,0,1024,232448
r32_s8k,32,8192,1024,224256
r72_s0,72,0,1024,232448
"""
# reference §1.7 (256 threads, 16 regs), §1.9 (textbook kernel on sm_90), §1.6 (72 regs).
OCCUPANCY = """kernel,block_size,dynamic_smem_bytes,carveout,blocks_per_sm,err
r16_s0,256,0,-1,8,0
r16_s0,256,1024,0,4,0
r16_s0,256,8192,25,7,0
r16_s0,256,32768,-1,6,0
r16_s0,256,65536,50,2,0
r32_s8k,256,0,-1,8,0
r32_s8k,256,0,10,3,0
r72_s0,1024,0,-1,0,0
r72_s0,512,0,-1,1,0
r16_s0,256,240000,-1,-1,1
"""
PROBES = """probe,kind,elem_bytes,stride,offset,pairs,pad,mode,iters,blocks,threads
0,global,4,2,0,0,0,0,0,1,32
1,global,4,1,1,0,0,0,0,1,32
2,shared,4,2,0,0,0,0,0,1,32
3,shared,16,0,0,0,0,0,0,1,32
4,transpose,4,0,0,0,0,0,0,1,32
5,transpose,4,0,0,0,1,0,0,1,32
6,diverge,4,0,0,0,0,0,0,2,64
7,diverge,4,0,0,0,0,1,0,2,64
8,diverge,4,0,0,0,0,0,100,2,64
9,diverge,4,0,0,0,0,1,100,2,64
"""
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')
LAUNCH = {"launch__block_size": 32, "launch__registers_per_thread": 16,
          "launch__shared_mem_per_block_static": 0, "launch__shared_mem_per_block_dynamic": 0,
          "sm__maximum_warps_per_active_cycle_pct": 50}  # 32 blocks x 1 warp of 64
SECT, REQ, PCT = ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                  "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
                  "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct")
WAVE, CONF, LDS = ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                   "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                   "smsp__sass_inst_executed_op_shared_ld.sum")
INST, THR = "smsp__inst_executed.sum", "smsp__thread_inst_executed.sum"
METRICS = [
    {SECT: 8, REQ: 1, PCT: 50}, {SECT: 5, REQ: 1, PCT: 80},
    {WAVE: 2, CONF: 1, LDS: 1}, {WAVE: 2, CONF: 0, LDS: 1},
    {WAVE: 1024, CONF: 992, LDS: 32}, {WAVE: 32, CONF: 0, LDS: 32},
    {INST: 40, THR: 1200}, {INST: 36, THR: 1152},
    {INST: 848, THR: 14128}, {INST: 440, THR: 14080},  # 14128 = 1200 + 16 * (848 - 40)
]


def _ncu_csv(metrics: list[dict[str, float]]) -> str:
    lines = ["==PROF== Connected to process 1", HEADER]
    for launch, values in enumerate(metrics):
        for name, value in {**LAUNCH, **values}.items():
            lines.append(f'"{launch}","1","probes","h","k","1","7","(32, 1, 1)","(1, 1, 1)",'
                         f'"0","9.0","Command line profiler metrics","{name}","","{value:,}"')
    return "\n".join(lines) + "\n"


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    (tmp_path / "device_props.csv").write_text(DEVICE)
    (tmp_path / "kernel_attrs.csv").write_text(ATTRS)
    with gzip.open(tmp_path / "occupancy_api.csv.gz", "wt") as handle:
        handle.write(OCCUPANCY)
    (tmp_path / "probes.csv").write_text(PROBES)
    (tmp_path / "ncu_probes.csv").write_text(_ncu_csv(METRICS))
    return tmp_path


def test_checker_agrees_with_hand_made_sample(sample):
    assert check_occupancy(sample) == ([], 10)
    assert check_probes(sample, device_arch(sample)) == ([], 10)


def test_checker_reports_wrong_values(sample):
    (sample / "occupancy_api.csv.gz").unlink()
    (sample / "occupancy_api.csv").write_text(OCCUPANCY.replace("r16_s0,256,0,-1,8,0",
                                                                "r16_s0,256,0,-1,7,0"))
    bad, _ = check_occupancy(sample)
    assert len(bad) == 1
    wrong = [dict(m) for m in METRICS]
    wrong[4][CONF] = 991
    wrong[8][THR] = 14000
    (sample / "ncu_probes.csv").write_text(_ncu_csv(wrong))
    bad, _ = check_probes(sample, device_arch(sample))
    assert len(bad) == 2


def _recorded(*names: str) -> Path:
    for name in names:
        if not any((DATA / n).exists() for n in (name, name + ".gz")):
            pytest.skip(f"ground truth {name} not recorded yet (run scripts/h200/gpu_models_*)")
    return DATA


def test_occupancy_api_sweep_agrees_100pct():
    folder = _recorded("device_props.csv", "kernel_attrs.csv", "occupancy_api.csv")
    bad, count = check_occupancy(folder)
    assert count >= 5000
    assert bad == [], f"{len(bad)} of {count} disagree; first: {bad[:5]}"


def test_recorded_device_matches_the_arch_table():
    folder = _recorded("device_props.csv")
    from aiprof.hardware import arch_for

    arch = device_arch(folder)
    table = arch_for((arch.major, arch.minor))
    assert arch == table, "device properties differ from the per-CC table"
    props = dict(line.split(",", 1) for line in
                 (folder / "device_props.csv").read_text().splitlines()[1:])
    assert int(props["maxBlocksPerMultiProcessor"]) == table.max_blocks_per_sm
    assert int(props["reservedSharedMemPerBlock"]) == table.reserved_smem_per_block_bytes


def test_ncu_probes_agree_100pct():
    folder = _recorded("device_props.csv", "probes.csv", "ncu_probes.csv")
    bad, count = check_probes(folder, device_arch(folder))
    assert count >= 40
    assert bad == [], f"{len(bad)} of {count} disagree; first: {bad[:5]}"


def test_model_matches_ncu_theoretical_occupancy_on_a_real_pytorch_workload():
    # ncu on one BERT-like encoder layer (cuBLAS GEMMs, memory-efficient attention, layer norm,
    # elementwise) on the H200: scripts/h200/gpu_models_kernels.py.
    folder = _recorded("kernels_example.csv")
    from aiprof.gpu.ncu_csv import parse_ncu_csv
    from aiprof.gpu.ncu_summary import summarize

    rows = [summarize(launch) for launch in
            parse_ncu_csv((folder / "kernels_example.csv").read_text(errors="replace"))]
    assert len(rows) >= 5
    for row in rows:
        assert row.model_occupancy_pct == pytest.approx(row.theoretical_occupancy_pct, abs=0.01)
        assert row.model_limiter == row.limiter
