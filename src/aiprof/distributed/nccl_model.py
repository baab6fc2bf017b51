"""A cost model shaped like NCCL's own tuner (NCCL 2.30.7 ``src/graph/tuning.cc``).

Summarized in ../shared/reference/serving-and-distributed.md §B2. For each (algorithm, protocol)
pair NCCL estimates ``time = latency + bytes / (1000 · algBw[GB/s])`` and runs the cheapest.
Modelled here: Ring (all collectives) and Tree (all-reduce) with the LL, LL128 and Simple
protocols; NVLS, CollNet and PAT are left out (NVLS is disabled on the machines we test,
``NCCL_NVLS_ENABLE=0``). Not modelled, for lack of the tables: the per-architecture caps
``llMaxBws``/``perChMax*``, the tree correction factors by size, and the 1.4× multi-node
Ring/Simple latency penalty. busBw (``nChannels × bw`` from NCCL's topology search) is an input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiprof.distributed.busbw import canonical_collective
from aiprof.distributed.collectives import AlgorithmCost, CollectiveCost, algorithm_cost, cheapest
from aiprof.distributed.links import LinkParams
from aiprof.errors import InputError

PROTOCOLS = ("LL", "LL128", "Simple")
# Base latency (µs) per algorithm and protocol (tuning.cc baseLat).
BASE_LAT_US = {"Tree": (6.8, 14.0, 8.4), "Ring": (6.6, 14.0, 8.4)}
# Per-hop hardware latency (µs) per link, algorithm and protocol (tuning.cc hwLat).
HW_LAT_US = {
    "nvlink": {"Tree": (0.6, 1.25, 4.0), "Ring": (0.6, 1.9, 3.4)},
    "pci": {"Tree": (1.0, 1.9, 4.0), "Ring": (1.0, 2.5, 5.7)},
    "net": {"Tree": (5.0, 8.5, 14.0), "Ring": (2.7, 4.0, 14.0)},
}
NET_POST_OVERHEAD_US = 1.0  # Intel CPUs; ×3 for Simple (reference §B2)


@dataclass(frozen=True, kw_only=True)
class NcclTopology:
    """What NCCL's topology search would find."""

    num_ranks: int
    num_nodes: int = 1
    intra_link: str = "nvlink"
    """``nvlink`` or ``pci`` inside a node; between nodes the network (``net``)."""
    bus_bandwidth_gbps: float = 370.0
    """busBw = nChannels × per-channel bandwidth, GB/s (measure it: comm bench busbw at 1 GiB)."""

    def __post_init__(self) -> None:
        if self.num_ranks < 1 or self.num_nodes < 1 or self.num_ranks % self.num_nodes:
            raise InputError(
                f"need ranks >= 1 spread evenly over nodes >= 1, got "
                f"{self.num_ranks} ranks on {self.num_nodes} nodes"
            )
        if self.intra_link not in ("nvlink", "pci"):
            raise InputError(f"intra-node link must be nvlink or pci, got {self.intra_link!r}")
        if not self.bus_bandwidth_gbps > 0:
            raise InputError(f"bus bandwidth must be > 0 GB/s, got {self.bus_bandwidth_gbps}")


def _steps(kind: str, p: int, nodes: int) -> tuple[int, int]:
    """(nsteps, nInterSteps) of the ring."""
    if kind == "allreduce":
        return 2 * (p - 1), 2 * (nodes - 1)
    if kind in ("allgather", "reducescatter"):
        return p - 1, nodes - 1
    return p, nodes - 1


def _bus_bw(algo: str, proto: int, busbw: float, nodes: int) -> float:
    if algo == "Ring":
        return (0.5, 0.92, 1.0)[proto] * busbw
    if proto == 0:
        return busbw / 3.8
    if proto == 1:
        return busbw * (7 / 9 if nodes == 1 else 120 / 128)
    return 0.92 * busbw


def _latency(algo: str, proto: int, kind: str, topo: NcclTopology) -> float:
    intra = HW_LAT_US[topo.intra_link][algo][proto]
    inter = HW_LAT_US["net"][algo][proto]
    if topo.num_nodes > 1:
        intra = max(intra, NET_POST_OVERHEAD_US * (3 if proto == 2 else 1))
    base = BASE_LAT_US[algo][proto]
    if algo == "Ring":
        nsteps, inter_steps = _steps(kind, topo.num_ranks, topo.num_nodes)
        return base + (nsteps - inter_steps) * intra + inter_steps * inter
    per_node = topo.num_ranks // topo.num_nodes
    return base + 2 * ((per_node - 1) * intra + math.log2(topo.num_nodes) * inter)


def nccl_costs(collective: str, num_bytes: int, topo: NcclTopology) -> dict[str, AlgorithmCost]:
    """``{"Ring/LL": cost, ...}`` for every applicable pair (Tree only for all-reduce)."""
    kind = canonical_collective(collective)
    if kind not in ("allreduce", "allgather", "reducescatter", "broadcast", "reduce"):
        raise InputError(
            f"the NCCL-shaped model covers all-reduce, all-gather, reduce-scatter, "
            f"broadcast and reduce, not {kind}"
        )
    if num_bytes < 0:
        raise InputError(f"a message size cannot be negative, got {num_bytes} bytes")
    algos = ("Tree", "Ring") if kind == "allreduce" and topo.num_ranks > 1 else ("Ring",)
    out = {}
    for algo in algos:
        for proto, name in enumerate(PROTOCOLS):
            bus = _bus_bw(algo, proto, topo.bus_bandwidth_gbps, topo.num_nodes)
            nsteps, _ = _steps(kind, topo.num_ranks, topo.num_nodes)
            alg = bus * 0.5 if algo == "Tree" else bus * topo.num_ranks / max(nsteps, 1)
            time_us = (
                0.0
                if topo.num_ranks == 1
                else (_latency(algo, proto, kind, topo) + num_bytes / (1000.0 * alg))
            )
            out[f"{algo}/{name}"] = algorithm_cost(kind, topo.num_ranks, num_bytes, time_us)
    return out


def model_nccl(collective: str, num_bytes: int, topo: NcclTopology) -> CollectiveCost:
    """The NCCL-shaped costs as a ``CollectiveCost`` (cheapest pair first-class)."""
    per = nccl_costs(collective, num_bytes, topo)
    link = LinkParams(
        name=f"nccl {topo.intra_link}, {topo.num_nodes} node(s)",
        alpha_us=0.0,
        bandwidth_gbps=topo.bus_bandwidth_gbps,
    )
    return cheapest(
        canonical_collective(collective), topo.num_ranks, num_bytes, per, dict.fromkeys(per, link)
    )
