"""Parse and print byte counts such as ``256MiB`` or ``1e9``."""

from __future__ import annotations

import re

from aiprof.errors import InputError

_UNITS = {
    "": 1,
    "b": 1,
    # A bare letter is binary, as nccl-tests' -b/-e sizes (128M = 2**27) and CUDA's "48K of
    # shared memory" mean it; a "B" after it is decimal (SI), an "iB" binary (IEC 80000-13).
    # The same rule as GNU coreutils' size suffixes (dd, head: K = 1024, KB = 1000).
    "k": 1024,
    "m": 1024**2,
    "g": 1024**3,
    "t": 1024**4,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "ki": 1024,
    "kib": 1024,
    "mi": 1024**2,
    "mib": 1024**2,
    "gi": 1024**3,
    "gib": 1024**3,
    "ti": 1024**4,
    "tib": 1024**4,
}
_PATTERN = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_bytes(text: str | int | float) -> int:
    """Bytes from ``"256MiB"``, ``"8"``, ``"8K"``, ``"1.5GB"`` (K/M/G and KiB/MiB/GiB: 1024ⁿ;
    KB/MB/GB: 1000ⁿ). The one byte-size parser of every command."""
    if isinstance(text, (int, float)):
        value, unit = float(text), ""
    else:
        match = _PATTERN.match(text)
        if match is None:
            raise InputError(
                f"cannot read a byte count from {text!r}; write e.g. 8, 64KiB, 256MiB, 1GB"
            )
        value, unit = float(match.group(1)), match.group(2).lower()
        if unit not in _UNITS:
            raise InputError(
                f"unknown size unit {match.group(2)!r} in {text!r}; use B, KB, MiB, GiB, ..."
            )
    number = value * _UNITS[unit]
    if number < 0:
        raise InputError(f"a size cannot be negative: {text!r}")
    return int(round(number))


def format_bytes(num_bytes: float) -> str:
    """``1048576 -> '1 MiB'``: binary units, as nccl-tests sweeps use powers of two."""
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
