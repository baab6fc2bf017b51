"""A fake ``pynvml`` module object: the same function names, values chosen by the test."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    """Stands for pynvml.NVMLError (e.g. NVML_ERROR_NOT_SUPPORTED)."""


@dataclass
class FakeGpu:
    """Raw NVML readings in NVML's own units (percent, MHz, mW, bytes, C, KB/s)."""

    gpu_util: int = 87
    mem_util: int = 41
    sm_clock: int = 1980
    mem_clock: int = 2619
    power_mw: int = 512_345
    memory_used: int = 40 * 2**30
    memory_total: int = 80 * 2**30
    temperature: int = 61
    pcie_tx_kbps: int = 1500
    pcie_rx_kbps: int = 250_000
    unsupported: set[str] = field(default_factory=set)


class FakeNvml:
    """Module-like object with the pynvml functions the sampler calls."""

    NVMLError = NVMLError

    def __init__(self, gpus: list[FakeGpu], *, init_error: str | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.calls: list[str] = []
        self.shut_down = False

    def _get(self, handle: FakeGpu, what: str, value: Any) -> Any:
        self.calls.append(what)
        if what in handle.unsupported:
            raise NVMLError("Not Supported")
        return value

    def nvmlInit(self) -> None:
        if self.init_error:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def nvmlDeviceGetUtilizationRates(self, h: FakeGpu) -> Any:
        return self._get(h, "util", SimpleNamespace(gpu=h.gpu_util, memory=h.mem_util))

    def nvmlDeviceGetMemoryInfo(self, h: FakeGpu) -> Any:
        return self._get(h, "memory", SimpleNamespace(used=h.memory_used, total=h.memory_total,
                                                      free=h.memory_total - h.memory_used))

    def nvmlDeviceGetClockInfo(self, h: FakeGpu, kind: int) -> int:
        return self._get(h, f"clock{kind}", h.sm_clock if kind == 1 else h.mem_clock)

    def nvmlDeviceGetMaxClockInfo(self, h: FakeGpu, kind: int) -> int:
        return self._get(h, f"maxclock{kind}", 1980 if kind == 1 else 2619)

    def nvmlDeviceGetPowerUsage(self, h: FakeGpu) -> int:
        return self._get(h, "power", h.power_mw)

    def nvmlDeviceGetPowerManagementLimit(self, h: FakeGpu) -> int:
        return self._get(h, "power_limit", 700_000)

    def nvmlDeviceGetTemperature(self, h: FakeGpu, sensor: int) -> int:
        return self._get(h, "temperature", h.temperature)

    def nvmlDeviceGetPcieThroughput(self, h: FakeGpu, counter: int) -> int:
        return self._get(h, f"pcie{counter}", h.pcie_tx_kbps if counter == 0 else h.pcie_rx_kbps)

    def nvmlDeviceGetName(self, h: FakeGpu) -> bytes:
        return self._get(h, "name", b"NVIDIA H200")

    def nvmlDeviceGetUUID(self, h: FakeGpu) -> str:
        return self._get(h, "uuid", "GPU-0000")

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: FakeGpu) -> int:
        return self._get(h, "pcie_gen", 5)

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: FakeGpu) -> int:
        return self._get(h, "pcie_width", 16)

    def nvmlSystemGetDriverVersion(self) -> str:
        return "570.86.15"

    def nvmlSystemGetNVMLVersion(self) -> str:
        return "12.570.86.15"
