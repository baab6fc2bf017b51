"""α-β-γ parameters of a link: latency per message, time per byte, reduction time per byte.

Presets are per GPU and per direction. Latency α uses NCCL's per-hop hardware latency of the
Ring/LL protocol (the one NCCL uses for the small messages where α matters), from NCCL 2.30.7
``src/graph/tuning.cc`` (../shared/reference/serving-and-distributed.md §B2). Bandwidths are
datasheet peaks, cited per preset. Measured parameters (``aiprof comm bench``) replace them.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiprof.errors import InputError


@dataclass(frozen=True, kw_only=True)
class LinkParams:
    """One link type in the α-β-γ model (Thakur, Rabenseifner, Gropp 2005)."""

    name: str
    """Preset name or ``custom`` / ``measured``."""
    alpha_us: float
    """α: fixed cost of one message (one step of an algorithm), microseconds."""
    bandwidth_gbps: float
    """1/β: bytes per second each rank can send (and receive) at once, in GB/s (10⁹ B/s)."""
    reduce_gbps: float = 0.0
    """1/γ: reduction throughput in GB/s; 0 means reductions are free (γ = 0)."""

    def __post_init__(self) -> None:
        if not self.alpha_us >= 0:
            raise InputError(f"link latency must be >= 0 µs, got {self.alpha_us}")
        if not self.bandwidth_gbps > 0:
            raise InputError(f"link bandwidth must be > 0 GB/s, got {self.bandwidth_gbps}")
        if not self.reduce_gbps >= 0:
            raise InputError(f"reduction bandwidth must be >= 0 GB/s, got {self.reduce_gbps}")

    @property
    def beta_us_per_byte(self) -> float:
        """β in µs per byte (1 GB/s = 1000 B/µs)."""
        return 1.0 / (self.bandwidth_gbps * 1000.0)

    @property
    def gamma_us_per_byte(self) -> float:
        """γ in µs per byte; 0 when reductions are free."""
        return 0.0 if self.reduce_gbps == 0 else 1.0 / (self.reduce_gbps * 1000.0)


PRESETS: dict[str, LinkParams] = {
    # NVLink 4 (H100/H200 SXM): 900 GB/s total = 450 GB/s per direction (NVIDIA H100/H200
    # datasheets); α = NCCL NVLINK Ring LL hop latency 0.6 µs (NCCL tuning.cc, §B2).
    "nvlink": LinkParams(name="nvlink", alpha_us=0.6, bandwidth_gbps=450.0),
    # PCIe Gen5 x16: ≈ 63 GB/s per direction (PCI-SIG; reference §C); α = NCCL PCI Ring LL 1.0 µs.
    "pcie": LinkParams(name="pcie", alpha_us=1.0, bandwidth_gbps=63.0),
    # PCIe Gen4 x16: ≈ 31.5 GB/s per direction (reference §C); α = NCCL PCI Ring LL 1.0 µs.
    "pcie4": LinkParams(name="pcie4", alpha_us=1.0, bandwidth_gbps=31.5),
    # InfiniBand NDR 400 Gb/s, one NIC per GPU: 50 GB/s per direction (NVIDIA ConnectX-7 spec);
    # α = NCCL NET Ring LL hop latency 2.7 µs (§B2).
    "infiniband": LinkParams(name="infiniband", alpha_us=2.7, bandwidth_gbps=50.0),
    # The worked example of reference §B3: α = 5 µs, β = 1/(25 GB/s).
    "example": LinkParams(name="example", alpha_us=5.0, bandwidth_gbps=25.0),
}


def link_preset(name: str) -> LinkParams:
    """The preset called ``name`` (``nvlink``, ``pcie``, ``pcie4``, ``infiniband``, ``example``)."""
    try:
        return PRESETS[name.lower()]
    except KeyError:
        known = ", ".join(sorted(PRESETS))
        raise InputError(
            f"unknown link {name!r}; choose one of {known}, or give --alpha-us and --bandwidth-gbps"
        ) from None
