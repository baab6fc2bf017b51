"""Read Nsight Compute CSV output (``ncu --csv``) into per-launch metric tables.

Format (../shared/reference/gpu-models.md §7.3, Nsight Compute CLI guide): ``--page details``
(the default with ``--csv``) is long, one row per metric, with columns ``ID, Process ID, Process
Name, Host Name, Kernel Name, Context, Stream, Block Size, Grid Size, Device, CC, Section Name,
Metric Name, Metric Unit, Metric Value``. ``--page raw`` is wide: one column per metric, a units
row, one row per launch. Values carry thousands separators and may be ``n/a``. Lines before the
header (``==PROF==`` lines, the application's output) are skipped.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from aiprof.errors import InputError

MetricValue = float | str | None

_IDENTITY = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
             "Block Size", "Grid Size", "Device", "CC")
_NUMBER = re.compile(r"^-?[\d,]*\.?\d+(?:[eE][-+]?\d+)?$")


@dataclass(frozen=True, kw_only=True)
class NcuLaunch:
    """One profiled kernel launch."""

    launch_id: int
    """ncu's launch ``ID``."""
    kernel_name: str
    """Kernel name as ncu printed it (demangled by default)."""
    block_size: tuple[int, ...]
    """Block dimensions."""
    grid_size: tuple[int, ...]
    """Grid dimensions."""
    device: str
    """Device index or name column."""
    cc: str
    """Compute capability column, e.g. ``9.0``."""
    metrics: dict[str, MetricValue]
    """Metric name -> value (float; str where not numeric; None for n/a)."""
    units: dict[str, str]
    """Metric name -> unit as printed."""

    def number(self, name: str) -> float | None:
        """The metric as a float, or None when absent, n/a or not numeric."""
        value = self.metrics.get(name)
        return value if isinstance(value, float) else None


def parse_value(text: str) -> MetricValue:
    """``"1,081,344"`` -> 1081344.0; ``"n/a"`` or empty -> None; other text unchanged."""
    stripped = text.strip()
    if stripped in ("", "n/a", "N/A"):
        return None
    if _NUMBER.match(stripped):
        return float(stripped.replace(",", ""))
    return stripped


def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def _header_start(text: str) -> int:
    match = re.search(r'^"ID",', text, flags=re.MULTILINE)
    if match is None:
        raise InputError("no ncu CSV header (a line starting with \"ID\") found: was ncu run "
                         "with --csv, and did it profile any kernel?")
    return match.start()


def _launch(row: dict[str, str], metrics: dict[str, MetricValue], units: dict[str, str]
            ) -> NcuLaunch:
    return NcuLaunch(launch_id=int(row["ID"]), kernel_name=row.get("Kernel Name", ""),
                     block_size=_dims(row.get("Block Size", "")),
                     grid_size=_dims(row.get("Grid Size", "")), device=row.get("Device", ""),
                     cc=row.get("CC", ""), metrics=metrics, units=units)


def _details(rows: list[dict[str, str]]) -> list[NcuLaunch]:
    grouped: dict[int, tuple[dict[str, str], dict[str, MetricValue], dict[str, str]]] = {}
    for row in rows:
        key = int(row["ID"])
        first, metrics, units = grouped.setdefault(key, (row, {}, {}))
        metrics[row["Metric Name"]] = parse_value(row.get("Metric Value", ""))
        units[row["Metric Name"]] = row.get("Metric Unit", "")
    return [_launch(*grouped[k]) for k in sorted(grouped)]


def _raw(rows: list[dict[str, str]]) -> list[NcuLaunch]:
    if not rows:
        return []
    unit_row, data = rows[0], rows[1:]
    names = [k for k in unit_row if k not in _IDENTITY and "__" in k]
    units = {n: unit_row[n] for n in names}
    return [_launch(r, {n: parse_value(r.get(n, "")) for n in names}, units) for r in data
            if r.get("ID", "").strip().isdigit()]


def parse_ncu_csv(text: str) -> tuple[NcuLaunch, ...]:
    """All launches in ncu CSV text (details or raw page), in launch-ID order."""
    body = text[_header_start(text):]
    lines = [ln for ln in body.splitlines() if not ln.startswith("==")]
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    fields = reader.fieldnames or []
    try:
        rows = list(reader)
        return tuple(_details(rows) if "Metric Name" in fields else _raw(rows))
    except (KeyError, ValueError) as error:
        raise InputError(f"malformed ncu CSV: {error}") from error
