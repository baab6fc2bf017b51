"""What ``meta.json`` keeps of the environment and the GPUs."""

from __future__ import annotations

from aiprof.capture.environment import merge_gpu_specs, relevant_environment


def test_keeps_performance_variables_and_drops_secrets_and_others():
    environ = {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_IB_DISABLE": "1", "OMP_NUM_THREADS": "8",
               "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "HOME": "/root",
               "NCCL_API_TOKEN": "hidden", "TORCH_SECRET_KEY": "hidden", "PATH": "/bin"}
    kept = relevant_environment(environ)
    assert kept == {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_IB_DISABLE": "1",
                    "OMP_NUM_THREADS": "8", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert list(kept) == sorted(kept)


def test_merge_gpu_specs_attaches_nvml_facts_by_position_when_names_agree():
    torch_specs = ({"index": 0, "name": "NVIDIA H200", "num_sms": 132},)
    nvml_specs = ({"nvml_index": 0, "name": "NVIDIA H200", "power_limit_w": 700.0},
                  {"nvml_index": 1, "name": "NVIDIA H200", "power_limit_w": 700.0})
    (merged,) = merge_gpu_specs(torch_specs, nvml_specs)
    assert merged["num_sms"] == 132 and merged["power_limit_w"] == 700.0
    other = ({"nvml_index": 0, "name": "NVIDIA A100", "power_limit_w": 400.0},)
    assert "power_limit_w" not in merge_gpu_specs(torch_specs, other)[0]
    assert merge_gpu_specs((), nvml_specs) == nvml_specs


def test_merge_by_uuid_follows_cuda_visible_devices():
    # CUDA_VISIBLE_DEVICES=1: torch's device 0 is NVML's device 1
    torch_specs = ({"index": 0, "name": "NVIDIA H200", "uuid": "GPU-b"},)
    nvml_specs = ({"nvml_index": 0, "name": "NVIDIA H200", "uuid": "GPU-a"},
                  {"nvml_index": 1, "name": "NVIDIA H200", "uuid": "GPU-b"})
    (merged,) = merge_gpu_specs(torch_specs, nvml_specs)
    assert merged["nvml_index"] == 1 and merged["index"] == 0
