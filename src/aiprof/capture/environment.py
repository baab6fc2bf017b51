"""The facts about the machine and software that a run record keeps in ``meta.json``."""

from __future__ import annotations

import platform
import socket
from collections.abc import Mapping
from typing import Any

ENV_NAMES = frozenset({
    "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "RANK", "WORLD_SIZE",
    "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
    "KMP_AFFINITY", "KMP_BLOCKTIME", "CUBLAS_WORKSPACE_CONFIG", "CUDA_LAUNCH_BLOCKING",
    "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MODULE_LOADING", "NVIDIA_TF32_OVERRIDE",
})
"""Single variables that change performance."""
ENV_PREFIXES = ("NCCL_", "PYTORCH_", "TORCH_", "TORCHINDUCTOR_", "GLOO_", "UCX_", "FI_")
"""Families of variables that change performance (NCCL tuning, allocator config, inductor...)."""
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL")
"""Never recorded, even inside a kept family."""


def relevant_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The performance-relevant variables of ``environ``, secrets left out."""
    kept = {}
    for name, value in environ.items():
        if any(word in name.upper() for word in SECRET_WORDS):
            continue
        if name in ENV_NAMES or name.startswith(ENV_PREFIXES):
            kept[name] = value
    return dict(sorted(kept.items()))


def torch_versions() -> dict[str, str]:
    """Versions of python, torch, CUDA, cuDNN and NCCL as torch reports them."""
    import torch

    versions = {"python": platform.python_version(), "torch": str(torch.__version__),
                "cuda": str(torch.version.cuda or ""), "platform": platform.platform()}
    if torch.backends.cudnn.is_available():
        versions["cudnn"] = str(torch.backends.cudnn.version())
    if torch.cuda.is_available() and hasattr(torch.cuda, "nccl"):
        try:
            versions["nccl"] = ".".join(str(part) for part in torch.cuda.nccl.version())
        except Exception:
            pass
    return versions


def torch_gpu_specs() -> tuple[dict[str, Any], ...]:
    """One dict per visible CUDA device, from ``torch.cuda.get_device_properties``."""
    import torch

    if not torch.cuda.is_available():
        return ()
    specs = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        specs.append({
            "index": index,
            "name": props.name,
            "compute_capability": f"{props.major}.{props.minor}",
            "num_sms": props.multi_processor_count,
            "memory_total_bytes": int(props.total_memory),
            "l2_cache_bytes": int(getattr(props, "L2_cache_size", 0)),
        })
        uuid = getattr(props, "uuid", None)  # torch >= 2.1; NVML spells it "GPU-<uuid>"
        if uuid is not None:
            specs[-1]["uuid"] = f"GPU-{uuid}"
    return tuple(specs)


def merge_gpu_specs(torch_specs: tuple[dict[str, Any], ...],
                    nvml_specs: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
    """Join torch's and NVML's view of each GPU.

    torch numbers devices after CUDA_VISIBLE_DEVICES, NVML numbers all of them, so they are
    matched by UUID; failing that, by position when the names agree. On a CPU build (no
    torch devices) the NVML list is kept as is.
    """
    if not torch_specs:
        return nvml_specs
    by_uuid = {spec["uuid"]: spec for spec in nvml_specs if spec.get("uuid")}
    merged = []
    for position, spec in enumerate(torch_specs):
        extra = by_uuid.get(spec.get("uuid", ""))
        if extra is None and position < len(nvml_specs):
            candidate = nvml_specs[position]
            extra = candidate if str(candidate.get("name", "")) == spec["name"] else None
        merged.append({**(extra or {}), **spec})
    return tuple(merged)


def hostname() -> str:
    """This machine's host name."""
    return socket.gethostname()
