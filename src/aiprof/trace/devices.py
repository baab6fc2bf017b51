"""Device and distributed metadata carried at the top of a trace (kineto-trace-format.md §1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DeviceProperties:
    """One ``deviceProperties`` entry. AMD GPUs report ``warpSize`` 64 and may claim
    ``computeMajor`` 9, which collides with Hopper: ``vendor`` tells them apart."""

    index: int
    name: str
    vendor: str  # "nvidia" or "amd"
    compute_major: int | None
    compute_minor: int | None
    num_sms: int | None
    total_global_mem_bytes: int | None
    warp_size: int | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> DeviceProperties:
        name = str(entry.get("name", ""))
        warp = _int(entry.get("warpSize"))
        amd = warp == 64 or "maxSharedMemoryPerMultiProcessor" in entry or _looks_amd(name)
        return cls(
            index=_int(entry.get("id")) or 0,
            name=name,
            vendor="amd" if amd else "nvidia",
            compute_major=_int(entry.get("computeMajor")),
            compute_minor=_int(entry.get("computeMinor")),
            num_sms=_int(entry.get("numSms")),
            total_global_mem_bytes=_int(entry.get("totalGlobalMem")),
            warp_size=warp,
            raw=dict(entry),
        )

    @classmethod
    def checked(cls, entry: dict[str, Any]) -> tuple[DeviceProperties, list[str]]:
        """``from_json`` of the entry with implausible numbers removed, and their keys.

        A numeric property (every key but the text ones) must be an integer within
        ``PROPERTY_LIMITS`` (default ``[1, 2**40]``; ``id`` may be 0); anything else (null,
        a string, a list, zero, negative, huge) is dropped, so the models fall back to the
        architecture's table as when the key is absent.
        """
        clean: dict[str, Any] = {}
        dropped = []
        for key, value in entry.items():
            if key in TEXT_PROPERTIES:
                if isinstance(value, str):
                    clean[key] = value
                else:
                    dropped.append(key)
                continue
            low, high = PROPERTY_LIMITS.get(key, (1, 1 << 40))
            number = None if isinstance(value, bool) else _int(value)
            if number is not None and low <= number <= high:
                clean[key] = number
            else:
                dropped.append(key)
        return cls.from_json(clean), dropped

    @property
    def compute_capability(self) -> str | None:
        if self.vendor != "nvidia" or self.compute_major is None:
            return None
        return f"{self.compute_major}.{self.compute_minor or 0}"


TEXT_PROPERTIES = frozenset({"name", "uuid", "vendor", "gcnArchName", "pciBusId"})
PROPERTY_LIMITS: dict[str, tuple[int, int]] = {
    "id": (0, 4095),  # as validate.MAX_DEVICES
    "totalGlobalMem": (1, 1 << 50),  # 1 PiB; an H200 has 141 GB (NVIDIA H200 datasheet)
    "computeMajor": (1, 99),
    "computeMinor": (0, 99),
    "warpSize": (32, 64),  # NVIDIA 32, AMD 64
    # at least one warp: fewer threads per SM or block leave no warp to schedule
    "maxThreadsPerMultiprocessor": (32, 1 << 16),
    "maxThreadsPerBlock": (32, 1 << 16),
}
"""Bounds of numeric ``deviceProperties``; others: 1 to 2**40, far beyond any GPU's value
(the largest besides memory, an H100's 50 MiB l2CacheSize: NVIDIA H100 whitepaper, 2022)."""


def _looks_amd(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in ("amd", "instinct", "radeon", "mi250", "mi300", "gfx"))


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


@dataclass(frozen=True)
class DistributedInfo:
    """``distributedInfo``: present when torch.distributed was initialized."""

    backend: str | None
    rank: int | None
    world_size: int | None
    nccl_version: str | None
    process_groups: tuple[dict[str, Any], ...]

    @classmethod
    def checked(cls, info: dict[str, Any]) -> tuple[DistributedInfo, list[str]]:
        """``from_json`` without a rank outside ``[0, 2**24)`` or a world size outside
        ``[1, 2**24]`` (dropped, with their keys), nor a backend or version not text."""
        clean = dict(info)
        dropped = []
        for key, low in (("rank", 0), ("world_size", 1)):
            if key in info:
                number = None if isinstance(info[key], bool) else _int(info[key])
                if number is None or not low <= number <= 1 << 24:
                    clean.pop(key)
                    dropped.append(key)
        for key in ("backend", "nccl_version"):
            if key in info and info[key] is not None and not isinstance(info[key], str):
                clean.pop(key)
                dropped.append(key)
        return cls.from_json(clean), dropped

    @classmethod
    def from_json(cls, info: dict[str, Any]) -> DistributedInfo:
        groups = info.get("pg_config")
        return cls(
            backend=str(info["backend"]) if info.get("backend") is not None else None,
            rank=_int(info.get("rank")),
            world_size=_int(info.get("world_size")),
            nccl_version=str(info["nccl_version"]) if info.get("nccl_version") else None,
            process_groups=tuple(g for g in groups if isinstance(g, dict))
            if isinstance(groups, list)
            else (),
        )
