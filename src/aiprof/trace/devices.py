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

    @property
    def compute_capability(self) -> str | None:
        if self.vendor != "nvidia" or self.compute_major is None:
            return None
        return f"{self.compute_major}.{self.compute_minor or 0}"


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
