"""A background thread that samples NVML at a fixed rate into ``gpu_samples.csv``.

Rows are written as they are taken (and flushed once a second), so a run that is killed
keeps the samples it had. NVML calls go through ctypes, which releases the GIL, so the
sampled script loses little time to this thread.
"""

from __future__ import annotations

import csv
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from aiprof.capture.nvml import NvmlHandle, read_sample
from aiprof.errors import InputError
from aiprof.record.runrecord import SAMPLE_COLUMNS

MIN_RATE_HZ = 1.0
MAX_RATE_HZ = 50.0


class Clock(Protocol):
    """Time source: wall-clock ns for timestamps, monotonic seconds for pacing."""

    def time_ns(self) -> int: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """The real clocks (``time.time_ns``, ``time.monotonic``)."""

    def time_ns(self) -> int:
        return time.time_ns()

    def monotonic(self) -> float:
        return time.monotonic()


@dataclass(frozen=True, kw_only=True)
class SamplerOptions:
    """How often to sample."""

    rate_hz: float = 20.0
    """Samples per second per device, between 1 and 50."""
    pcie_every: int | None = None
    """Read PCIe throughput every this many samples; default: once a second. NVML measures
    PCIe over a 20 ms window per call, and on an H200 a tick with the two PCIe reads took
    50-250 ms instead of 50 ms (tests/data/capture/h200_resnet50_run), so it is read rarely."""

    def __post_init__(self) -> None:
        if not MIN_RATE_HZ <= self.rate_hz <= MAX_RATE_HZ:
            raise InputError(f"sample rate {self.rate_hz} Hz is out of range; "
                             f"use {MIN_RATE_HZ:g}-{MAX_RATE_HZ:g} Hz")
        if self.pcie_every is not None and self.pcie_every < 1:
            raise InputError(f"pcie_every must be >= 1, got {self.pcie_every}")

    @property
    def pcie_period(self) -> int:
        """Ticks between PCIe reads."""
        return self.pcie_every or max(1, round(self.rate_hz))


def _cell(value: float) -> str:
    return "" if math.isnan(value) else repr(value)


class NvmlSampler:
    """Samples every NVML device at ``options.rate_hz`` until ``stop()``."""

    def __init__(self, nvml: NvmlHandle, path: Path, options: SamplerOptions | None = None,
                 clock: Clock | None = None) -> None:
        self._nvml = nvml
        self._path = path
        self._options = options or SamplerOptions()
        self._clock = clock or SystemClock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._file: IO[str] | None = None
        self._writer: csv.writer | None = None  # type: ignore[valid-type]
        self.num_samples = 0
        """Rows written so far (one per device per tick)."""
        self.errors: list[str] = []

    def open(self) -> None:
        """Create the CSV file and write its header."""
        self._file = self._path.open("w", newline="", encoding="utf-8")
        self._writer = csv.writer(self._file)
        self._writer.writerow(SAMPLE_COLUMNS)

    def sample_once(self, tick: int = 0) -> None:
        """Take one sample of every device and append the rows."""
        assert self._writer is not None, "open() first"
        now_ns = self._clock.time_ns()
        with_pcie = tick % self._options.pcie_period == 0
        for index, device in enumerate(self._nvml.devices):
            values = read_sample(self._nvml.module, device, with_pcie=with_pcie)
            self._writer.writerow([now_ns, index, *(_cell(value) for value in values)])
            self.num_samples += 1

    def _loop(self) -> None:
        period_s = 1.0 / self._options.rate_hz
        flush_every = max(1, int(self._options.rate_hz))
        start = self._clock.monotonic()
        tick = 0
        try:
            while not self._stop.is_set():
                self.sample_once(tick)
                tick += 1
                if tick % flush_every == 0 and self._file is not None:
                    self._file.flush()
                delay = start + tick * period_s - self._clock.monotonic()
                if delay < 0:  # fell behind (slow NVML calls): skip missed ticks, keep the grid
                    tick += int(-delay / period_s) + 1
                    delay = start + tick * period_s - self._clock.monotonic()
                self._stop.wait(max(0.0, delay))
        except Exception as error:  # a sampler failure must not kill the user's run
            self.errors.append(f"NVML sampler stopped: {error}")

    def start(self) -> None:
        """Open the file and start the sampling thread (a daemon: it never blocks exit)."""
        self.open()
        self._thread = threading.Thread(target=self._loop, name="aiprof-nvml", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and close the file."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        if self._file is not None:
            self._file.close()
            self._file = None
