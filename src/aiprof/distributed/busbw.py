"""nccl-tests' bandwidth conventions: ``algbw = S / t`` and ``busbw = algbw × factor``.

Source: NVIDIA nccl-tests ``doc/PERFORMANCE.md`` (@a0b82b2260cf), summarized in
../shared/reference/serving-and-distributed.md §B1. S is the nccl-tests size: the whole array for
all-gather and reduce-scatter, the buffer for all-reduce and broadcast. 1 GB = 10⁹ B.
"""

from __future__ import annotations

from aiprof.errors import InputError

COLLECTIVES = (
    "allreduce",
    "allgather",
    "reducescatter",
    "broadcast",
    "reduce",
    "alltoall",
    "sendrecv",
)

_ALIASES = {
    "all_reduce": "allreduce",
    "all-reduce": "allreduce",
    "all_gather": "allgather",
    "all-gather": "allgather",
    "all_gather_into_tensor": "allgather",
    "_allgather_base": "allgather",
    "reduce_scatter": "reducescatter",
    "reduce-scatter": "reducescatter",
    "reduce_scatter_tensor": "reducescatter",
    "_reduce_scatter_base": "reducescatter",
    "all_to_all": "alltoall",
    "all-to-all": "alltoall",
    "all_to_allv": "alltoall",
    "alltoall_base": "alltoall",
    "allgather_base": "allgather",
    "reduce_scatter_base": "reducescatter",
    "send": "sendrecv",
    "recv": "sendrecv",
    "send_recv": "sendrecv",
}


def canonical_collective(name: str) -> str:
    """``all_reduce``/``AllReduce``/``allreduce`` -> ``allreduce``; raises InputError if unknown."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in COLLECTIVES:
        raise InputError(f"unknown collective {name!r}; choose one of {', '.join(COLLECTIVES)}")
    return key


def busbw_factor(collective: str, num_ranks: int) -> float:
    """nccl-tests' factor: 2(n−1)/n all-reduce; (n−1)/n all-gather, reduce-scatter,
    all-to-all; 1 for the others."""
    if num_ranks < 1:
        raise InputError(f"the number of ranks must be >= 1, got {num_ranks}")
    kind = canonical_collective(collective)
    n = num_ranks
    if kind == "allreduce":
        return 2.0 * (n - 1) / n
    if kind in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    return 1.0


def algbw_gbps(num_bytes: float, time_us: float) -> float:
    """Algorithm bandwidth S/t in GB/s (bytes per µs / 1000)."""
    if time_us <= 0:
        return float("nan")
    return num_bytes / time_us / 1000.0


def busbw_gbps(collective: str, num_ranks: int, num_bytes: float, time_us: float) -> float:
    """Bus bandwidth: algbw × the nccl-tests factor, comparable to the link's peak."""
    return algbw_gbps(num_bytes, time_us) * busbw_factor(collective, num_ranks)
