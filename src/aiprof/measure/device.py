"""The GPU of this machine, read through torch or else NVML (both imported when called)."""

from __future__ import annotations

from aiprof.errors import MissingDependencyError, UnsupportedDeviceError
from aiprof.hardware.spec import GpuSpec, spec_from_device_properties


def live_device(index: int = 0) -> GpuSpec:
    """The spec of CUDA device ``index`` on this machine, through torch or else NVML."""
    try:
        import torch
    except ImportError:
        return _nvml_device(index)
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(index)
        return spec_from_device_properties({
            "name": p.name, "computeMajor": p.major, "computeMinor": p.minor,
            "numSms": p.multi_processor_count, "warpSize": getattr(p, "warp_size", 32),
            "maxThreadsPerMultiprocessor": p.max_threads_per_multi_processor,
            "regsPerMultiprocessor": getattr(p, "regs_per_multiprocessor", 0),
            "sharedMemPerMultiprocessor": getattr(p, "shared_memory_per_multiprocessor", 0),
            "sharedMemPerBlockOptin": getattr(p, "shared_memory_per_block_optin", 0),
        })
    return _nvml_device(index)


def _nvml_device(index: int) -> GpuSpec:
    try:
        import pynvml
    except ImportError as error:
        raise MissingDependencyError(
            "no CUDA device through torch and nvidia-ml-py is not installed: "
            "pip install nvidia-ml-py, or name the GPU with --arch") from error
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        name = pynvml.nvmlDeviceGetName(handle)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
    except pynvml.NVMLError as error:
        raise UnsupportedDeviceError(
            f"no NVIDIA GPU {index} found through NVML: {error}") from error
    name = name.decode() if isinstance(name, bytes) else str(name)
    return spec_from_device_properties({"name": name, "computeMajor": major,
                                        "computeMinor": minor})
