"""The run record: what ``aiprof run`` leaves on disk and analyses read offline.

Layout of one record (``runs/<name>-<timestamp>/``, with ``runs/latest`` linking to the newest)::

    meta.json              RunMeta: schema version, command, how it ended, versions, GPUs, env
    rank<N>.trace.json.gz  the PyTorch profiler (Kineto) trace of rank N
    gpu_samples.csv        NVML samples, one row per (time, device); see SAMPLE_COLUMNS
    stdout.log             what the script printed (rank 0; rank N writes rank<N>.stdout.log)
    ceilings.json          measured roofs, when 'aiprof ceilings --save RUN' wrote them

Reading never needs torch or a GPU. Older schema versions load: a field missing from an
old ``meta.json`` takes its default, and no field changes meaning between versions.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from aiprof.errors import InputError
from aiprof.jsontext import dumps

if TYPE_CHECKING:
    from aiprof.trace import TraceSet

SCHEMA_VERSION = 1
"""Version of the run record layout and of ``meta.json`` (field ``schema``)."""
META_FILE = "meta.json"
SAMPLES_FILE = "gpu_samples.csv"
STDOUT_FILE = "stdout.log"
LATEST_LINK = "latest"
CEILINGS_FILE = "ceilings.json"
"""Measured ceilings saved into a record by ``aiprof ceilings --save RUN``."""

SAMPLE_COLUMNS: tuple[str, ...] = (
    "time_unix_ns",
    "device",
    "gpu_util_pct",
    "mem_util_pct",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "power_w",
    "memory_used_bytes",
    "temperature_c",
    "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s",
)
"""Columns of ``gpu_samples.csv``; an empty cell means NVML could not read that value."""


def trace_file_name(rank: int) -> str:
    """File name of rank ``rank``'s trace inside a run record."""
    return f"rank{rank}.trace.json.gz"


def rank_trace_paths(run_dir: Path) -> tuple[Path, ...]:
    """The rank traces of a run record (``rank<N>.trace.json[.gz]``), sorted by rank."""

    def rank_of(path: Path) -> int:
        digits = path.name[len("rank"):].split(".", 1)[0]
        return int(digits) if digits.isdigit() else -1

    found = [p for p in run_dir.glob("rank*.trace.json*") if p.name.endswith((".json", ".gz"))]
    return tuple(sorted(found, key=lambda p: (rank_of(p), p.name)))


def record_files(run_dir: Path) -> list[str]:
    """Names of the files in a run record (hidden claim and temporary files left out)."""
    return sorted(path.name for path in run_dir.iterdir() if not path.name.startswith("."))


def stdout_file_name(rank: int) -> str:
    """File name of rank ``rank``'s captured output (rank 0 gets plain ``stdout.log``)."""
    return STDOUT_FILE if rank == 0 else f"rank{rank}.stdout.log"


@dataclass(frozen=True, kw_only=True)
class RunMeta:
    """Contents of ``meta.json``. Every field has a default so older records still load."""

    schema: int = SCHEMA_VERSION
    """Layout version of the record this was written with."""
    name: str = ""
    """Run name (the script's stem unless ``--name`` was given)."""
    command: tuple[str, ...] = ()
    """The command line that was profiled."""
    start_unix_ns: int = 0
    """Wall-clock start (ns since the Unix epoch), the clock of ``baseTimeNanoseconds``."""
    end_unix_ns: int = 0
    """Wall-clock end of the run (ns since the Unix epoch)."""
    ended: str = "unknown"
    """How the script ended: completed, exit, exception, interrupted, terminated, unknown."""
    exit_code: int | None = None
    """The script's exit status, passed through by ``aiprof run``."""
    error: str = ""
    """Exception type and message when the script raised."""
    hostname: str = ""
    world_size: int = 1
    """Number of ranks that each write a ``rank<N>.trace.json.gz``."""
    versions: dict[str, str] = field(default_factory=dict)
    """python, torch, cuda, cudnn, nccl, driver, nvml versions found at capture time."""
    gpus: tuple[dict[str, Any], ...] = ()
    """One dict per GPU: name, memory, SM count, compute capability, clocks, power limit."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables that change performance (CUDA_VISIBLE_DEVICES, NCCL_*, OMP_*...)."""
    capture: dict[str, Any] = field(default_factory=dict)
    """Profiler settings and step detection: mode, skip/warmup/active, steps seen, step source."""
    samples: dict[str, Any] = field(default_factory=dict)
    """NVML sampling: source ("nvml" or "none"), rate_hz, num_samples."""
    notes: tuple[str, ...] = ()
    """Things the reader should know (no NVML, no steps reached the active window, ...)."""


def write_meta(run_dir: Path, meta: RunMeta) -> Path:
    """Write ``meta.json`` atomically (a reader never sees half a file)."""
    path = run_dir / META_FILE
    tmp = run_dir / f".{META_FILE}.tmp"
    tmp.write_text(dumps(meta) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_meta(run_dir: Path) -> RunMeta:
    """Read ``meta.json``; raise ``InputError`` when it is missing or not a run record."""
    path = run_dir / META_FILE
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise InputError(
            f"{run_dir} is not a run record ({META_FILE} unreadable: {error.strerror}); "
            "pass a directory written by 'aiprof run'"
        ) from None
    try:
        return msgspec.json.decode(raw, type=RunMeta)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise InputError(f"{path} is not a valid run record meta file: {error}") from None


@dataclass(frozen=True)
class GpuSamples:
    """NVML samples as columns (one entry per sample and device); NaN where a value was missing."""

    columns: dict[str, np.ndarray]
    """Column name (see ``SAMPLE_COLUMNS``) -> array; ``time_unix_ns`` int64, ``device`` int32."""

    @property
    def num_samples(self) -> int:
        """Number of rows."""
        return int(self.columns["time_unix_ns"].size)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]


def empty_samples() -> GpuSamples:
    """A sample table with no rows (a run without NVML)."""
    return _samples_from_rows([])


def _samples_from_rows(rows: list[list[str]]) -> GpuSamples:
    def column(index: int) -> list[float]:
        return [float(row[index]) if row[index] != "" else np.nan for row in rows]

    columns: dict[str, np.ndarray] = {
        "time_unix_ns": np.array([int(row[0]) for row in rows], dtype=np.int64),
        "device": np.array([int(row[1]) for row in rows], dtype=np.int32),
    }
    for index, name in enumerate(SAMPLE_COLUMNS[2:], start=2):
        columns[name] = np.array(column(index), dtype=np.float64)
    return GpuSamples(columns)


def read_samples(path: Path) -> GpuSamples:
    """Read ``gpu_samples.csv``; a missing file gives an empty table."""
    if not path.is_file():
        return empty_samples()
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            return empty_samples()
        index = {name: position for position, name in enumerate(header)}
        missing = [name for name in SAMPLE_COLUMNS[:2] if name not in index]
        if missing:
            raise InputError(f"{path}: missing columns {missing}; not an aiprof sample file")
        rows = [
            [row[index[name]] if name in index and index[name] < len(row) else ""
             for name in SAMPLE_COLUMNS]
            for row in reader if row
        ]
    try:
        return _samples_from_rows(rows)
    except ValueError as error:
        raise InputError(f"{path}: unreadable value ({error})") from None


@dataclass(frozen=True)
class RunRecord:
    """A run record read from disk: meta, rank traces and GPU samples."""

    path: Path
    meta: RunMeta
    traces: TraceSet | None
    """All ``rank<N>.trace.json.gz`` on a common clock; None when no rank wrote a trace."""
    samples: GpuSamples
    trace_paths: tuple[Path, ...]


def resolve_run_dir(path: str | Path) -> Path:
    """Follow ``runs/latest`` (or a parent ``runs`` directory) to one run record directory."""
    run_dir = Path(path)
    if not (run_dir / META_FILE).is_file() and (run_dir / LATEST_LINK).exists():
        run_dir = run_dir / LATEST_LINK
    if not run_dir.is_dir():
        raise InputError(f"run record {path} not found; pass a directory written by 'aiprof run'")
    return run_dir.resolve()


def load_run(path: str | Path) -> RunRecord:
    """Load a run record (meta, traces via ``load_traces``, samples as numpy columns)."""
    run_dir = resolve_run_dir(path)
    meta = read_meta(run_dir)
    trace_paths = rank_trace_paths(run_dir)
    traces = None
    if trace_paths:
        from aiprof.record.targets import load_traces

        traces = load_traces(run_dir)
    return RunRecord(run_dir, meta, traces, read_samples(run_dir / SAMPLES_FILE), trace_paths)
