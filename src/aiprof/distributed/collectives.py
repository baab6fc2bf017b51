"""α-β-γ cost of collectives, per algorithm, and the algorithm a cost-minimizing library picks.

Formulas: Thakur, Rabenseifner, Gropp, "Optimization of Collective Communication Operations in
MPICH", IJHPCA 19(1), 2005; Chan et al. 2007; Sanders, Speck, Träff 2009 (double binary tree);
table in ../shared/reference/serving-and-distributed.md §B3. n = bytes (nccl-tests' S: the whole
array for all-gather/reduce-scatter), p = ranks, lg = log₂.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from aiprof.distributed.busbw import algbw_gbps, busbw_factor, canonical_collective
from aiprof.distributed.links import LinkParams
from aiprof.errors import InputError

_Cost = Callable[[float, int, LinkParams], float]


def _terms(alpha_steps: float, beta_bytes: float, gamma_bytes: float, link: LinkParams) -> float:
    return (
        alpha_steps * link.alpha_us
        + beta_bytes * link.beta_us_per_byte
        + gamma_bytes * link.gamma_us_per_byte
    )


def _is_pow2(p: int) -> bool:
    return p & (p - 1) == 0


def allreduce_ring(n: float, p: int, link: LinkParams) -> float:
    """Ring (reduce-scatter ring + all-gather ring): 2(p−1)α + 2n(p−1)/p·β + n(p−1)/p·γ."""
    return _terms(2 * (p - 1), 2 * n * (p - 1) / p, n * (p - 1) / p, link)


def allreduce_recursive_doubling(n: float, p: int, link: LinkParams) -> float:
    """Recursive doubling: lg p·(α + nβ + nγ); for p not a power of 2 two extra steps
    fold the surplus ranks in and out (Thakur et al. 2005 §4.4), ⌊lg p⌋ + 2 steps."""
    steps = math.log2(p) if _is_pow2(p) else math.floor(math.log2(p)) + 2
    return _terms(steps, n * steps, n * steps, link)


def allreduce_rabenseifner(n: float, p: int, link: LinkParams) -> float:
    """Recursive-halving reduce-scatter + recursive-doubling all-gather (Rabenseifner)."""
    if _is_pow2(p):
        return _terms(2 * math.log2(p), 2 * n * (p - 1) / p, n * (p - 1) / p, link)
    floor_lg = math.floor(math.log2(p))
    return _terms(2 * floor_lg + 2, (2 * (p - 1) / p + 2) * n, n * (1 + (p - 1) / p), link)


def allreduce_double_binary_tree(n: float, p: int, link: LinkParams) -> float:
    """Two complementary binary trees, each carrying n/2, pipelined in k chunks (NCCL ≥ 2.4).

    A tree of depth D = ⌈lg p⌉ reduces then broadcasts: 2(D + k − 1) steps; an interior node
    exchanges a chunk with two children, α + nβ/k per step. As k grows the bandwidth term tends to
    2nβ, i.e. algbw = busBw/2, which is how NCCL costs Tree (tuning.cc, reference §B2 item 3).
    k is chosen to minimize the time: k* = √((D − 1)·nβ/α).
    """
    if p == 1:
        return 0.0
    depth = math.ceil(math.log2(p))
    nbeta = n * link.beta_us_per_byte
    best = math.inf
    ideal = math.sqrt((depth - 1) * nbeta / link.alpha_us) if link.alpha_us > 0 else 1e9
    for k in {1, max(1, math.floor(ideal)), max(1, math.ceil(ideal))}:
        steps = 2 * (depth + k - 1)
        best = min(best, steps * (link.alpha_us + nbeta / k) + n * link.gamma_us_per_byte)
    return best


def ring_gather_like(n: float, p: int, link: LinkParams) -> float:
    """Ring all-gather or reduce-scatter: (p−1)α + n(p−1)/p·β (+ n(p−1)/p·γ for reduce-scatter)."""
    return _terms(p - 1, n * (p - 1) / p, 0.0, link)


def allgather_recursive_doubling(n: float, p: int, link: LinkParams) -> float:
    """Recursive doubling all-gather: ⌈lg p⌉α + n(p−1)/p·β."""
    return _terms(math.ceil(math.log2(p)), n * (p - 1) / p, 0.0, link)


def reducescatter_ring(n: float, p: int, link: LinkParams) -> float:
    """Ring reduce-scatter: (p−1)α + n(p−1)/p·(β + γ)."""
    return _terms(p - 1, n * (p - 1) / p, n * (p - 1) / p, link)


def reducescatter_recursive_halving(n: float, p: int, link: LinkParams) -> float:
    """Recursive halving reduce-scatter: ⌈lg p⌉α + n(p−1)/p·(β + γ)."""
    return _terms(math.ceil(math.log2(p)), n * (p - 1) / p, n * (p - 1) / p, link)


def broadcast_binomial_tree(n: float, p: int, link: LinkParams) -> float:
    """Binomial tree broadcast: ⌈lg p⌉·(α + nβ)."""
    steps = math.ceil(math.log2(p))
    return _terms(steps, n * steps, 0.0, link)


def broadcast_scatter_ring_allgather(n: float, p: int, link: LinkParams) -> float:
    """Scatter + ring all-gather (van de Geijn): (⌈lg p⌉ + p − 1)α + 2n(p−1)/p·β."""
    return _terms(math.ceil(math.log2(p)) + p - 1, 2 * n * (p - 1) / p, 0.0, link)


def broadcast_pipelined_ring(n: float, p: int, link: LinkParams) -> float:
    """Pipelined chain (NCCL's only broadcast algorithm): (p + k − 2)(α + nβ/k), best k."""
    if p == 1:
        return 0.0
    nbeta = n * link.beta_us_per_byte
    ideal = math.sqrt((p - 2) * nbeta / link.alpha_us) if link.alpha_us > 0 else 1e9
    return min(
        (p + k - 2) * (link.alpha_us + nbeta / k)
        for k in {1, max(1, math.floor(ideal)), max(1, math.ceil(ideal))}
    )


ALGORITHMS: dict[str, dict[str, _Cost]] = {
    "allreduce": {
        "ring": allreduce_ring,
        "double_binary_tree": allreduce_double_binary_tree,
        "recursive_doubling": allreduce_recursive_doubling,
        "rabenseifner": allreduce_rabenseifner,
    },
    "allgather": {"ring": ring_gather_like, "recursive_doubling": allgather_recursive_doubling},
    "reducescatter": {
        "ring": reducescatter_ring,
        "recursive_halving": reducescatter_recursive_halving,
    },
    "broadcast": {
        "ring": broadcast_pipelined_ring,
        "binomial_tree": broadcast_binomial_tree,
        "scatter_allgather": broadcast_scatter_ring_allgather,
    },
}


@dataclass(frozen=True, kw_only=True)
class AlgorithmCost:
    """One algorithm's predicted cost."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float


@dataclass(frozen=True, kw_only=True)
class CollectiveCost:
    """One collective call under the α-β-γ model: the cheapest algorithm and all of them."""

    collective: str
    num_ranks: int
    num_bytes: int
    link: LinkParams
    algorithm: str
    """The cheapest algorithm (what a cost-minimizing tuner such as NCCL's would pick)."""
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    per_algorithm: dict[str, AlgorithmCost]


def algorithm_cost(
    collective: str, num_ranks: int, num_bytes: float, time_us: float
) -> AlgorithmCost:
    """Time plus the nccl-tests bandwidths it implies."""
    algbw = algbw_gbps(num_bytes, time_us)
    return AlgorithmCost(
        time_us=time_us, algbw_gbps=algbw, busbw_gbps=algbw * busbw_factor(collective, num_ranks)
    )


def cheapest(
    collective: str,
    num_ranks: int,
    num_bytes: int,
    per: dict[str, AlgorithmCost],
    links: dict[str, LinkParams],
) -> CollectiveCost:
    """The ``CollectiveCost`` whose headline is the cheapest entry of ``per`` (ties by name)."""
    best = min(per, key=lambda name: (per[name].time_us, name))
    return CollectiveCost(
        collective=collective,
        num_ranks=num_ranks,
        num_bytes=int(num_bytes),
        link=links[best],
        algorithm=best,
        time_us=per[best].time_us,
        algbw_gbps=per[best].algbw_gbps,
        busbw_gbps=per[best].busbw_gbps,
        per_algorithm=per,
    )


def collective_time_us(
    collective: str, num_bytes: float, num_ranks: int, link: LinkParams, algorithm: str
) -> float:
    """Time of one algorithm; raises InputError for unknown names or bad sizes."""
    kind = canonical_collective(collective)
    _check(num_bytes, num_ranks)
    table = ALGORITHMS.get(kind)
    if table is None:
        raise InputError(f"no cost model for {kind}; modelled: {', '.join(ALGORITHMS)}")
    if algorithm not in table:
        raise InputError(
            f"unknown {kind} algorithm {algorithm!r}; choose one of {', '.join(table)}"
        )
    return 0.0 if num_ranks == 1 else table[algorithm](float(num_bytes), num_ranks, link)


def model_collective(
    collective: str,
    num_bytes: int,
    num_ranks: int,
    link: LinkParams,
    algorithms: tuple[str, ...] | None = None,
) -> CollectiveCost:
    """Cost every algorithm of ``collective`` and pick the cheapest."""
    kind = canonical_collective(collective)
    _check(num_bytes, num_ranks)
    names = algorithms or tuple(ALGORITHMS.get(kind, {}))
    per = {
        name: algorithm_cost(
            kind, num_ranks, num_bytes, collective_time_us(kind, num_bytes, num_ranks, link, name)
        )
        for name in names
    }
    if not per:
        raise InputError(f"no cost model for {kind}; modelled: {', '.join(ALGORITHMS)}")
    return cheapest(kind, num_ranks, num_bytes, per, dict.fromkeys(per, link))


def _check(num_bytes: float, num_ranks: int) -> None:
    if num_ranks < 1:
        raise InputError(f"the number of ranks must be >= 1, got {num_ranks}")
    if num_bytes < 0:
        raise InputError(f"a message size cannot be negative, got {num_bytes} bytes")


def model_with_links(
    collective: str,
    num_bytes: int,
    num_ranks: int,
    links: dict[str, LinkParams],
    algorithm: str = "ring",
) -> CollectiveCost:
    """One algorithm under several fitted links (one per protocol regime); the cheapest wins."""
    kind = canonical_collective(collective)
    if not links:
        raise InputError("no fitted links to model with")
    per = {
        name: algorithm_cost(
            kind,
            num_ranks,
            num_bytes,
            collective_time_us(kind, num_bytes, num_ranks, link, algorithm),
        )
        for name, link in links.items()
    }
    return cheapest(kind, num_ranks, num_bytes, per, links)
