"""NVML access through nvidia-ml-py (module ``pynvml``), imported lazily.

Function names, units and constants follow the NVML API Reference
(https://docs.nvidia.com/deploy/nvml-api/): utilization in percent over the driver's sample
period (1/6 s to 1 s depending on the product), clocks in MHz, power in milliwatts, memory
in bytes, temperature in degrees C, PCIe throughput in KB/s over a 20 ms window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# NVML enum values (nvml.h: nvmlClockType_t, nvmlTemperatureSensors_t, nvmlPcieUtilCounter_t).
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1


@dataclass(frozen=True)
class NvmlHandle:
    """An initialized NVML module and one handle per device (NVML index order)."""

    module: Any
    devices: tuple[Any, ...]


@dataclass(frozen=True)
class NvmlStatus:
    """What ``open_nvml`` found: a handle, or None with the reason (kept as a note in meta)."""

    handle: NvmlHandle | None
    note: str


def open_nvml(module: Any | None = None) -> NvmlStatus:
    """Import and initialize NVML; never raises (a machine without GPUs gets a note instead).

    ``module`` replaces ``import pynvml`` (tests inject a fake module object here).
    """
    nvml: Any = module
    if nvml is None:
        try:
            import pynvml as nvml  # type: ignore[no-redef]
        except ImportError:
            return NvmlStatus(None, "no GPU samples: nvidia-ml-py is not installed "
                              "(pip install 'aiprof[torch]')")
    try:
        nvml.nvmlInit()
        count = int(nvml.nvmlDeviceGetCount())
        devices = tuple(nvml.nvmlDeviceGetHandleByIndex(index) for index in range(count))
    except Exception as error:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return NvmlStatus(None, f"no GPU samples: NVML unavailable ({error})")
    if not devices:
        return NvmlStatus(None, "no GPU samples: NVML sees no GPU")
    return NvmlStatus(NvmlHandle(nvml, devices), f"NVML sees {len(devices)} GPU(s)")


def close_nvml(handle: NvmlHandle | None) -> None:
    """Shut NVML down; errors are ignored (the run record matters more)."""
    if handle is None:
        return
    try:
        handle.module.nvmlShutdown()
    except Exception:
        pass


def _try(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except Exception:
        return None


def _scaled(value: Any, factor: float) -> float:
    return math.nan if value is None else float(value) * factor


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def read_sample(nvml: Any, device: Any, *, with_pcie: bool) -> tuple[float, ...]:
    """One sample of one device, in ``SAMPLE_COLUMNS`` order after time and device index.

    A value NVML cannot give (unsupported on the product, no permission) is NaN.
    """
    util = _try(nvml.nvmlDeviceGetUtilizationRates, device)
    memory = _try(nvml.nvmlDeviceGetMemoryInfo, device)
    pcie_tx = pcie_rx = None
    if with_pcie:  # each call blocks ~20 ms (NVML samples PCIe over a 20 ms window)
        pcie_tx = _try(nvml.nvmlDeviceGetPcieThroughput, device, NVML_PCIE_UTIL_TX_BYTES)
        pcie_rx = _try(nvml.nvmlDeviceGetPcieThroughput, device, NVML_PCIE_UTIL_RX_BYTES)
    return (
        _scaled(None if util is None else util.gpu, 1.0),
        _scaled(None if util is None else util.memory, 1.0),
        _scaled(_try(nvml.nvmlDeviceGetClockInfo, device, NVML_CLOCK_SM), 1.0),
        _scaled(_try(nvml.nvmlDeviceGetClockInfo, device, NVML_CLOCK_MEM), 1.0),
        _scaled(_try(nvml.nvmlDeviceGetPowerUsage, device), 1e-3),  # mW -> W
        _scaled(None if memory is None else memory.used, 1.0),
        _scaled(_try(nvml.nvmlDeviceGetTemperature, device, NVML_TEMPERATURE_GPU), 1.0),
        _scaled(pcie_tx, 1024.0),  # KB/s -> bytes/s (NVML's KB is 1024 bytes)
        _scaled(pcie_rx, 1024.0),
    )


def device_specs(handle: NvmlHandle) -> tuple[dict[str, Any], ...]:
    """Static facts per device: name, memory, max clocks, power limit, PCIe link."""
    nvml = handle.module
    specs = []
    for index, device in enumerate(handle.devices):
        memory = _try(nvml.nvmlDeviceGetMemoryInfo, device)
        power_limit = _try(nvml.nvmlDeviceGetPowerManagementLimit, device)
        specs.append({
            "nvml_index": index,
            "name": _text(_try(nvml.nvmlDeviceGetName, device)),
            "uuid": _text(_try(nvml.nvmlDeviceGetUUID, device)),
            "memory_total_bytes": None if memory is None else int(memory.total),
            "max_sm_clock_mhz": _try(nvml.nvmlDeviceGetMaxClockInfo, device, NVML_CLOCK_SM),
            "max_mem_clock_mhz": _try(nvml.nvmlDeviceGetMaxClockInfo, device, NVML_CLOCK_MEM),
            "power_limit_w": None if power_limit is None else power_limit / 1000.0,
            "pcie_link_gen": _try(nvml.nvmlDeviceGetCurrPcieLinkGeneration, device),
            "pcie_link_width": _try(nvml.nvmlDeviceGetCurrPcieLinkWidth, device),
        })
    return tuple(specs)


def driver_versions(handle: NvmlHandle) -> dict[str, str]:
    """Driver and NVML library versions."""
    nvml = handle.module
    return {
        "driver": _text(_try(nvml.nvmlSystemGetDriverVersion)),
        "nvml": _text(_try(nvml.nvmlSystemGetNVMLVersion)),
    }
